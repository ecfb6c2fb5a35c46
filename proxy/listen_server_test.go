package proxy_test

import (
	"bytes"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// TestListenServerAnswersAlike checks the forward and reverse listeners
// answer the same bytes (Date aside) whether served by the HTTP/1.1 loop
// (listen.server: loop, the default) or by net/http alone: a forwarded
// call, a schema refusal with the envelope, a call the forward proxy
// refuses itself, HEAD, a pipelined pair, a malformed request.
func TestListenServerAnswersAlike(t *testing.T) {
	loop := newEnv(t, baseConfig)
	std := newEnv(t, strings.Replace(baseConfig, "listen:\n", "listen:\n  server: net/http\n", 1))
	upLoop := strings.TrimPrefix(loop.up.URL(), "http://")
	upStd := strings.TrimPrefix(std.up.URL(), "http://")
	date := regexp.MustCompile(`(?m)^Date: [^\r\n]*\r$`)
	// ask sends raw, whose last request says Connection: close, and
	// returns all the server sent until it closed, its Date lines blanked.
	ask := func(t *testing.T, addr, raw string) string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, raw)
		var out bytes.Buffer
		if _, err := io.Copy(&out, c); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		return date.ReplaceAllString(out.String(), "Date: -\r")
	}
	const end = "Connection: close\r\n\r\n"
	for _, tc := range []struct{ name, raw string }{
		{"forwarded", "GET http://UP/esearch?term=x&retmax=3 HTTP/1.1\r\nHost: UP\r\n" + end},
		{"schema refusal", "GET http://UP/esearch?bogus=1 HTTP/1.1\r\nHost: UP\r\nX-Toolgate-Envelope: 1\r\n" + end},
		{"not absolute", "GET /esearch HTTP/1.1\r\nHost: UP\r\n" + end},
		{"head", "HEAD http://UP/esearch?term=x HTTP/1.1\r\nHost: UP\r\n" + end},
		{"pipelined", "GET http://UP/esearch?term=a HTTP/1.1\r\nHost: UP\r\n\r\nGET http://UP/esearch?term=b HTTP/1.1\r\nHost: UP\r\n" + end},
		{"no host", "GET http://UP/esearch?term=a HTTP/1.1\r\n" + end},
		{"http10", "GET http://UP/esearch?term=a HTTP/1.0\r\n\r\n"},
		{"malformed", "GET http://UP/esearch?term=a HTTP/1.1\r\nHost: UP\r\nBad Header: x\r\n" + end},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ask(t, loop.srv.Addr("forward", 0), strings.ReplaceAll(tc.raw, "UP", upLoop))
			b := ask(t, std.srv.Addr("forward", 0), strings.ReplaceAll(tc.raw, "UP", upStd))
			a = strings.ReplaceAll(a, upLoop, "UP")
			b = strings.ReplaceAll(b, upStd, "UP")
			if a != b || a == "" {
				t.Errorf("forward answers differ\nloop:     %q\nnet/http: %q", a, b)
			}
		})
	}
	raw := "GET /esearch?term=x HTTP/1.1\r\nHost: h\r\n\r\nGET /esearch?nope=1 HTTP/1.1\r\nHost: h\r\n" + end
	if a, b := ask(t, loop.srv.Addr("reverse", 0), raw), ask(t, std.srv.Addr("reverse", 0), raw); a != b || a == "" {
		t.Errorf("reverse answers differ\nloop:     %q\nnet/http: %q", a, b)
	}

	var cfg proxy.Config
	cfg.Listen.Server = "fast"
	if err := cfg.Validate(t.TempDir()); err == nil || !strings.Contains(err.Error(), "listen.server") {
		t.Errorf("listen.server: fast validated (err %v), want a listen.server error", err)
	}
}
