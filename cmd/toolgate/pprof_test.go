package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdminPprof checks admin.pprof: off by default (no /debug/pprof/ on the
// admin listener), and with it on, Go's profiles answer there.
func TestAdminPprof(t *testing.T) {
	t.Parallel()
	const config = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
PPROF
events:
  file:
    path: events.ndjson
`
	for _, c := range []struct {
		name       string
		pprof      string
		wantStatus int
		want       string
	}{
		{"default off", "", http.StatusNotFound, ""},
		{"on", "  pprof: true", http.StatusOK, "heap profile"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startRun(t, t.TempDir(), strings.Replace(config, "PPROF", c.pprof, 1))
			l := r.running(t)
			a := do(t, directClient(t), "GET", "http://"+l.Admin+"/debug/pprof/heap?debug=1", nil)
			if a.status != c.wantStatus || !strings.Contains(a.body, c.want) {
				t.Errorf("GET /debug/pprof/heap = %d %.200q, want %d with %q", a.status, a.body, c.wantStatus, c.want)
			}
		})
	}
}
