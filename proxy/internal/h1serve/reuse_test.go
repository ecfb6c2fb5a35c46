package h1serve

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"testing"
)

// TestSnapshotKeepsResponsesApart checks that the header snapshot a
// connection reuses (conn.snapshot) carries nothing of one response into
// the next on the same keep-alive connection, read by a real client: a
// header set before WriteHeader is sent, one set after it is not, and
// neither reaches a later response.
func TestSnapshotKeepsResponsesApart(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/first":
			h.Set("X-First", "1")
			h.Set("X-Shared", "a")
			h["X-Multi"] = []string{"m1", "m2"}
			h["X-Nil"] = nil
			w.WriteHeader(http.StatusAccepted)
			h.Set("X-Late", "1") // after WriteHeader: not sent
			h.Set("X-Shared", "late")
			io.WriteString(w, "first")
		case "/second":
			h.Set("X-Shared", "b")
			io.WriteString(w, "second")
		case "/unread":
			// Leaves its body unread: the loop discards it.
			h.Set("X-Unread", "1")
			w.WriteHeader(http.StatusOK)
		default:
			io.WriteString(w, "plain")
		}
	})}
	addr := startLoop(t, s)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)

	type want struct {
		status int
		header map[string][]string
		body   string
	}
	calls := []struct {
		method, path, body string
		want               want
	}{
		{"GET", "/first", "", want{202, map[string][]string{"X-First": {"1"}, "X-Shared": {"a"}, "X-Multi": {"m1", "m2"}}, "first"}},
		{"GET", "/second", "", want{200, map[string][]string{"X-Shared": {"b"}}, "second"}},
		{"POST", "/unread", strings.Repeat("x", 100), want{200, map[string][]string{"X-Unread": {"1"}}, ""}},
		{"GET", "/third", "", want{200, nil, "plain"}},
		{"GET", "/first", "", want{202, map[string][]string{"X-First": {"1"}, "X-Shared": {"a"}, "X-Multi": {"m1", "m2"}}, "first"}},
		{"GET", "/third", "", want{200, nil, "plain"}},
	}
	own := []string{"X-First", "X-Shared", "X-Multi", "X-Nil", "X-Late", "X-Unread"}
	for i, call := range calls {
		var body io.Reader
		if call.body != "" {
			body = strings.NewReader(call.body)
		}
		req, err := http.NewRequest(call.method, "http://"+addr+call.path, body)
		if err != nil {
			t.Fatal(err)
		}
		reused := false
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("call %d (%s): %v", i, call.path, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if i > 0 && !reused {
			t.Errorf("call %d (%s): a new connection; the test needs the one kept alive", i, call.path)
		}
		if resp.StatusCode != call.want.status || string(got) != call.want.body {
			t.Errorf("call %d (%s): %d %q, want %d %q", i, call.path, resp.StatusCode, got, call.want.status, call.want.body)
		}
		for _, k := range own {
			if !slices.Equal(resp.Header[k], call.want.header[k]) {
				t.Errorf("call %d (%s): %s is %q, want %q", i, call.path, k, resp.Header[k], call.want.header[k])
			}
		}
	}
}
