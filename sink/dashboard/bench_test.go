package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// benchEvents is how many events the benchmark's table holds.
const benchEvents = 1_000_000

// seedMillion creates toolgate's schema through the sink's migrations and
// fills events with benchEvents generated rows in one INSERT ... SELECT on
// the server (the rollups fill through their views): 40 tools, 25 agents,
// 8 sidecars, every error code, every answer verdict (with a kind found
// in those redacted, withheld or in dry run), a changed MCP tool
// definition in one event of 97, spread over the 24 hours before now.
func seedMillion(b *testing.B, srv *chtest.Server) string {
	b.Helper()
	db := seed(b, srv, nil)
	cols := "event_id, time, time_us, sidecar, listener, tool, agent, session, trace_id, method, host, path_template, upstream_status, ok, " +
		"error_code, error_class, reason, detail, violation_paths, envelope, refused, retry_after_ms, total_us, upstream_us, " +
		"request_bytes, response_bytes, config_version, policy_version, dry_run_denied, dry_run_violations, policy_error, " +
		"answer, answer_findings, redactions, definition_changes"
	q := fmt.Sprintf(`INSERT INTO %s.events (%s)
SELECT concat('ev-', toString(number)), toDateTime(%d - 1 - (number * 7919) %% 86400), 0,
    concat('sc-', toString(number %% 8)), 'forward', concat('tool_', toString(number %% 40)), concat('agent-', toString(number %% 25)),
    '', concat('trace-', toString(number)), 'GET', 'upstream.example', '/v1/x', 200, ec = '',
    ec, '', if(ec = '', '', concat('r_', ec)),
    if(ec IN ('validation', 'policy'), concat('Tool ''tool_', toString(number %% 40), ''' got unknown argument ''a', toString(number %% 17), ''''), ''),
    [], number %% 3 != 0, 0, 0, toInt64(1000 + number %% 5000), 0, 0, 0, '', '', 0, [], '',
    ans, if(ans IN ('redacted', 'withheld', 'would_redact'), [concat('kind_', toString(number %% 6))], emptyArrayString()),
    toUInt32(if(ans = 'redacted', number %% 4 + 1, 0)),
    if(number %% 97 = 0, [concat('tool_', toString(number %% 40), ': description')], emptyArrayString())
FROM (SELECT number, arrayElement(['', '', '', 'validation', 'policy', 'rate_limit', 'auth', 'upstream', 'unknown'], toUInt64(number %% 9 + 1)) AS ec,
          arrayElement(['', '', 'passed', 'passed', 'redacted', 'withheld', 'would_redact', 'uninspected'], toUInt64(number %% 8 + 1)) AS ans
      FROM system.numbers LIMIT %d)`, db, cols, now.Unix(), benchEvents)
	srv.Exec(b, q)
	if got := srv.Query(b, "SELECT count() FROM "+db+".events"); got[0][0] != fmt.Sprint(benchEvents) {
		b.Fatalf("events: %v", got)
	}
	return db
}

// BenchmarkDashboard loads the whole page (over real HTTP, as the
// read-only user) on one million events, for three views, and reports the
// worst time of each of its queries (from sending it to the last row read)
// and of the page; each query must finish within a second.
func BenchmarkDashboard(b *testing.B) {
	srv := chtest.Shared(b)
	db := seedMillion(b, srv)
	addReader(b, srv)
	d, err := dashboard.Open(dashboard.Config{Addr: []string{srv.Addr()}, Database: db, Username: readerUser, Now: func() time.Time { return now }}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var mu sync.Mutex
	worst := map[string]time.Duration{}
	dashboard.ObserveQueries(d, func(name string, took time.Duration) {
		mu.Lock()
		worst[name] = max(worst[name], took)
		mu.Unlock()
	})
	hs := httptest.NewServer(d)
	defer hs.Close()
	views := []struct{ name, query string }{
		{"24h", "last=24h"},
		{"24h_tool_agent", "last=24h&tool=tool_7&agent=agent-7"},
		{"6h_code_1m", "last=6h&bucket=1m&error_code=validation"},
	}
	for _, v := range views {
		b.Run(v.name, func(b *testing.B) {
			mu.Lock()
			clear(worst)
			mu.Unlock()
			var page time.Duration
			for b.Loop() {
				start := time.Now()
				resp, err := http.Get(hs.URL + "/?" + v.query)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), `class="series`) {
					b.Fatalf("%d %.300s", resp.StatusCode, body)
				}
				page = max(page, time.Since(start))
			}
			mu.Lock()
			defer mu.Unlock()
			names := make([]string, 0, len(worst))
			for k := range worst {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				b.ReportMetric(float64(worst[k].Microseconds())/1000, k+"-ms")
				if worst[k] > time.Second {
					b.Errorf("query %s took %v at worst; the budget is a second", k, worst[k])
				}
			}
			b.ReportMetric(float64(page.Microseconds())/1000, "page-ms")
			// The page's queries: one per panel, latency's apart from
			// failures', the kinds found apart from answers', the refusals
			// apart from the definition changes'.
			want := []string{"adoption", "answer_findings", "answer_redactions", "answers", "budgets", "definition_refusals", "definitions", "failures", "freshness", "latency", "messages", "options", "revisions", "tools"}
			if !slices.Equal(names, want) {
				b.Errorf("observed queries %v; want the page's %v", names, want)
			}
		})
	}
}
