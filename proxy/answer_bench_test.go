package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// answerBenchConfig has one tool per answer check on the same upstream
// answer, and one without: the answer checks' cost per call is what each
// adds to "plain".
const answerBenchConfig = `
listen: {forward: "127.0.0.1:0"}
tools:
  - name: plain
    match: {host: 127.0.0.1, method: GET, path: /plain}
  - name: schema
    match: {host: 127.0.0.1, method: GET, path: /schema}
    answer:
      schema: {type: object, required: [hits], properties: {hits: {type: array, items: {type: object}}}}
  - name: detect
    match: {host: 127.0.0.1, method: GET, path: /detect}
    answer: {detect: [secrets, pii, instructions]}
  - name: redact
    match: {host: 127.0.0.1, method: GET, path: /redact}
    answer: {detect: [secrets, pii, instructions], on_finding: redact}
`

// BenchmarkAnswerCheck measures what each answer check adds per call on a
// 4 KiB JSON answer (40 hits of prose), through a real sidecar, in paired
// bursts against the tool without answer checks: the answer schema, every
// detector on an answer with no finding, and every detector redacting one
// token. Run it with -benchtime 1x (about 25 s per check).
func BenchmarkAnswerCheck(b *testing.B) {
	var hits []string
	for i := range 40 {
		hits = append(hits, fmt.Sprintf(`{"id":"P%03d","title":"A study of protein folding under heat stress, part %d","score":0.%02d}`, i, i, i))
	}
	clean := `{"hits":[` + strings.Join(hits, ",") + `]}`
	secret := strings.Replace(clean, "part 7", "part 7 ghp"+"_aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5", 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/redact" {
			io.WriteString(w, secret)
			return
		}
		io.WriteString(w, clean)
	}))
	b.Cleanup(up.Close)
	srv, _, _ := serveConfig(b, answerBenchConfig, b.TempDir(), proxy.Snapshot{Version: "bench"}, nil, 50*time.Millisecond)
	proxyURL := &url.URL{Scheme: "http", Host: srv.Addr("forward", 0)}
	c := benchClient(b, proxyURL, true, 32)
	get := func(u string) error {
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	for _, check := range []string{"schema", "detect", "redact"} {
		b.Run(check, func(b *testing.B) {
			pairedBursts(b, get, up.URL+"/plain", up.URL+"/"+check)
		})
	}
}
