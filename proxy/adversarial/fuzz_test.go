package adversarial_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Bounds on a fuzzed request's parts, so each execution stays fast.
const (
	fuzzMaxMethod  = 16
	fuzzMaxTarget  = 512
	fuzzMaxHeaders = 16 << 10
	fuzzMaxBody    = 8192
)

// fuzzRequest assembles a raw absolute-form request for the forward
// listener from fuzzed parts: a method, an origin-form target appended to
// http://{AUTH}, header lines (one per line; lines without a colon, and
// Traceparent, Connection, Host and X-Api-Key, where secrets are injected,
// are dropped so the differential can tell calls and secrets apart) and a body. Content-Length is added unless the headers frame
// the body themselves.
func fuzzRequest(auth, tp, method, target, headers string, body []byte) []byte {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == ' ' {
				return -1
			}
			return r
		}, s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s http://%s%s HTTP/1.1\r\nHost: %s\r\nTraceparent: %s\r\n", clean(method), auth, clean(target), auth, tp)
	framed := false
	for _, line := range strings.Split(headers, "\n") {
		line = strings.TrimRight(line, "\r")
		name, _, ok := strings.Cut(line, ":")
		lname := strings.ToLower(strings.TrimSpace(name))
		if !ok || lname == "traceparent" || lname == "connection" || lname == "host" || lname == "x-api-key" {
			continue
		}
		if lname == "content-length" || lname == "transfer-encoding" {
			framed = true
		}
		b.WriteString(line + "\r\n")
	}
	if !framed && len(body) > 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(body)
	return []byte(b.String())
}

// FuzzMediation sends generated requests (request line, headers, body) as
// raw bytes to the forward listener of a real toolgate in front of the Go
// upstream, and asserts the differential of TestAdversarial: the tool's
// handler never parses an argument toolgate's schema refuses, never serves
// a call toolgate did not inspect as that tool, and no upstream's
// X-Toolgate-* header reaches the caller. The seeds are the attack table.
func FuzzMediation(f *testing.F) {
	rec := newGoRecorder(false)
	f.Cleanup(rec.srv.Close)
	up := &upstream{name: "go", scheme: "http", port: rec.port(), take: rec.take}
	w := &world{goUp: rec, ups: []*upstream{up}}
	g, err := startGate(f, mainConfig(w, "pass"))
	if err != nil {
		f.Fatal(err)
	}
	forward := g.srv.Addr("forward", 0)
	j := &judge{g: g, o: newOracle(f), w: w}
	for _, a := range attacks {
		if a.req.url != "" || a.req.host != "" || a.req.proto != "" {
			continue // the request line or Host is the attack: not in this target's shape
		}
		method := a.req.method
		if method == "" {
			method = "POST"
		}
		f.Add(method, a.req.target, strings.Join(a.req.hdr, "\n"), []byte(a.req.body))
	}
	f.Fuzz(func(t *testing.T, method, target, headers string, body []byte) {
		if len(method) == 0 || len(method) > fuzzMaxMethod || len(target) > fuzzMaxTarget ||
			len(headers) > fuzzMaxHeaders || len(body) > fuzzMaxBody {
			t.Skip()
		}
		if strings.EqualFold(method, "CONNECT") {
			t.Skip() // tunnels are TestAdversarialTLS's
		}
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		j.t = t
		trace, tp := newTrace()
		raw := fuzzRequest(up.authority(), tp, method, target, headers, body)
		resp, err := exchange(forward, raw, method, 2*time.Second)
		v := j.verdict(trace, resp, err)
		if len(v.leaks) > 0 && !reportOnly() {
			t.Errorf("request %q leaked:\n  %s", raw, strings.Join(v.leaks, "\n  "))
		}
	})
}
