package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestStreamHeadersBeforeBody checks that the headers of a streamed answer
// (no declared length) reach the caller as soon as upstream sends them,
// before any of its body: an MCP server's GET event stream is quiet until
// it has something to say, and the Go SDK's client waits for the stream to
// open before it carries on (it hung 15 s behind toolgate on
// server-everything). Through the forward and the reverse listener.
func TestStreamHeadersBeforeBody(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Write([]byte("event: message\ndata: {}\n\n"))
	}))
	defer up.Close()
	defer close(release)
	e := newEnvTo(t, strings.ReplaceAll(mcpConfig, "MCPUP", up.URL), nil, nil, nil, 10*time.Millisecond)
	proxyURL, _ := url.Parse("http://" + e.srv.Addr("forward", 0))
	for _, tc := range []struct {
		name, url string
		client    *http.Client
	}{
		{"forward", up.URL + "/mcp", &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}},
		{"reverse", e.reverse + "/mcp", &http.Client{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tc.url, nil)
			req.Header.Set("Accept", "text/event-stream")
			got := make(chan error, 1)
			go func() {
				resp, err := tc.client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				got <- err
			}()
			// The body is held until the test ends; the headers must not be.
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stream's headers did not arrive while upstream held its body")
			}
		})
	}
}
