package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// capConfig caps each listener at 3 connections; bodies and headers may
// take a minute, so only the cap cuts a stalled connection here.
const capConfig = `
listen:
  forward: 127.0.0.1:0
limits:
  max_conns: 3
  body_timeout: 60s
  read_header_timeout: 60s
tools:
  - name: checked
    match: {method: POST, path: /checked}
    schema: {type: object, properties: {n: {type: integer}}}
egress: {allow: [127.0.0.1]}
`

// blockingUpstream answers /hold only once release is closed, and
// everything else at once; it counts the calls it executed by path.
type blockingUpstream struct {
	srv     *httptest.Server
	release chan struct{}
	held    atomic.Int64 // /hold calls under way
	done    atomic.Int64 // /ok and /checked calls executed
}

func newBlockingUpstream(t *testing.T) *blockingUpstream {
	u := &blockingUpstream{release: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/hold" {
			u.held.Add(1)
			<-u.release
		} else {
			u.done.Add(1)
		}
		io.WriteString(w, `{"ok":1}`)
	}))
	t.Cleanup(func() {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
		u.srv.Close()
	})
	return u
}

// rawProxyConn opens a connection to the forward listener and writes head.
func rawProxyConn(t *testing.T, forward, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", forward)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConnectionCapCutsStalledFirst: at the cap, a connection whose call
// is upstream is never cut, and a newcomer is refused (503) while no
// connection is stalled; once one has sent nothing of its body for a
// second, the newcomer takes its place and is served, and the stalled one
// is cut (its call never reaches upstream).
func TestConnectionCapCutsStalledFirst(t *testing.T) {
	up := newBlockingUpstream(t)
	g := startGate(t, capConfig, up.srv.URL, nil)
	host := strings.TrimPrefix(up.srv.URL, "http://")
	proxyURL, _ := url.Parse("http://" + g.forward)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}, Timeout: 30 * time.Second}

	// Two calls held upstream: busy, not stalled.
	for i := 0; i < 2; i++ {
		rawProxyConn(t, g.forward, fmt.Sprintf("GET %s/hold HTTP/1.1\r\nHost: %s\r\n\r\n", up.srv.URL, host))
	}
	for deadline := time.Now().Add(15 * time.Second); up.held.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the held calls did not reach the upstream")
		}
	}
	// A third whose body stops after a few bytes: it owes the rest.
	stalled := rawProxyConn(t, g.forward, fmt.Sprintf("POST %s/checked HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"n\":", up.srv.URL, host))
	waitMetric(t, g.srv, "toolgate_proxy_open_connections", "forward", 3)

	// Wait past stallAfter (1 s), measured from when the stalled body's
	// bytes came; the held ones stay busy.
	time.Sleep(1500 * time.Millisecond)
	resp, err := client.Get(up.srv.URL + "/ok")
	if err != nil {
		t.Fatalf("the newcomer at the cap with a stalled connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the newcomer at the cap with a stalled connection: status %d, want 200", resp.StatusCode)
	}
	if got := metricValue(t, g.srv, "toolgate_proxy_stalled_connections_cut_total", map[string]string{"listener": "forward"}); got != 1 {
		t.Errorf("stalled connections cut = %v, want 1", got)
	}
	// The stalled connection was cut: its read ends.
	stalled.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := bufio.NewReader(stalled).ReadByte(); err == nil {
		t.Error("the stalled connection got an answer; it should have been cut")
	}
	if up.held.Load() != 2 || up.done.Load() != 1 {
		t.Errorf("upstream: %d held, %d executed; want 2 held (never cut) and 1 (the newcomer; the stalled body never went)", up.held.Load(), up.done.Load())
	}

	// Now: the two held calls and the newcomer's place freed. Fill the
	// third place with a busy call; no connection is stalled, so a
	// newcomer is refused.
	waitMetric(t, g.srv, "toolgate_proxy_open_connections", "forward", 2)
	rawProxyConn(t, g.forward, fmt.Sprintf("GET %s/hold HTTP/1.1\r\nHost: %s\r\n\r\n", up.srv.URL, host))
	for deadline := time.Now().Add(15 * time.Second); up.held.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the third held call did not reach the upstream: open %v, refused %v, cut %v",
				metricValue(t, g.srv, "toolgate_proxy_open_connections", map[string]string{"listener": "forward"}),
				metricValue(t, g.srv, "toolgate_proxy_connections_refused_total", map[string]string{"listener": "forward"}),
				metricValue(t, g.srv, "toolgate_proxy_stalled_connections_cut_total", map[string]string{"listener": "forward"}))
		}
	}
	time.Sleep(1500 * time.Millisecond) // busy connections never count as stalled
	resp, err = client.Get(up.srv.URL + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a newcomer with every place busy: status %d, want 503", resp.StatusCode)
	}
	if up.done.Load() != 1 {
		t.Errorf("upstream executed %d calls, want 1: a refused newcomer reached it", up.done.Load())
	}
	close(up.release)
}
