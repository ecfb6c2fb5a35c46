package dashboard_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/dashboard"
)

type answer[T any] struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Query string    `json:"query"`
	Data  T         `json:"data"`
	Error string    `json:"error"`
}

// truth is what the panels must say, counted in Go from the events written.
type truth struct {
	calls, failures map[string]uint64 // per tool
	byCode          map[string]uint64 // failures per code
	env, legacy     map[string]uint64
	perCode         map[string]map[string]uint64 // tool -> failing code -> failures
}

// topCode is the tool's most frequent failing code, ties to the smallest.
func (tr truth) topCode(tool string) string {
	best, top := uint64(0), ""
	for c, n := range tr.perCode[tool] {
		if n > best || n == best && c < top {
			best, top = n, c
		}
	}
	return top
}

func count(evs []sink.Event, from, to time.Time, tool, agent, code string) truth {
	tr := truth{map[string]uint64{}, map[string]uint64{}, map[string]uint64{}, map[string]uint64{}, map[string]uint64{}, map[string]map[string]uint64{}}
	for _, e := range evs {
		if e.Time.Before(from) || !e.Time.Before(to) || (tool != "" && e.Tool != tool) || (agent != "" && e.Agent != agent) {
			continue
		}
		tr.calls[e.Tool]++
		if e.Envelope {
			tr.env[e.Tool]++
		} else {
			tr.legacy[e.Tool]++
		}
		failed := e.ErrorCode != "" && (code == "" || e.ErrorCode == code)
		if failed {
			tr.failures[e.Tool]++
			tr.byCode[e.ErrorCode]++
			if tr.perCode[e.Tool] == nil {
				tr.perCode[e.Tool] = map[string]uint64{}
			}
			tr.perCode[e.Tool][e.ErrorCode]++
		}
	}
	return tr
}

// TestPanels reads every panel as JSON, as the read-only user, for several
// views and checks each number against a count made in Go from the events
// written (with a replayed batch among them).
func TestPanels(t *testing.T) {
	srv := chtest.Shared(t)
	evs := genEvents(3000)
	db := seed(t, srv, evs)
	addReader(t, srv)
	base := serve(t, srv, db)

	views := []struct {
		name              string
		query             string
		from, to          time.Time
		tool, agent, code string
	}{
		{name: "default 24h", query: "", from: now.Add(-24 * time.Hour), to: now.Add(time.Second)},
		{name: "last 2h", query: "last=2h", from: now.Add(-2 * time.Hour), to: now.Add(time.Second)},
		{name: "tool", query: "last=6h&tool=docs_edit", from: now.Add(-6 * time.Hour), to: now.Add(time.Second), tool: "docs_edit"},
		{name: "agent", query: "last=24h&agent=agent-b", from: now.Add(-24 * time.Hour), to: now.Add(time.Second), agent: "agent-b"},
		{name: "code", query: "error_code=rate_limit", from: now.Add(-24 * time.Hour), to: now.Add(time.Second), code: "rate_limit"},
		{name: "absolute", query: "from=2026-11-20T08:30&to=2026-11-20T10:00:00&bucket=1m&tool=pubmed_search&agent=agent-a",
			from: time.Date(2026, 11, 20, 8, 30, 0, 0, time.UTC), to: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), tool: "pubmed_search", agent: "agent-a"},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			want := count(evs, v.from, v.to, v.tool, v.agent, v.code)

			var tl answer[[]dashboard.ToolRow]
			if st := getJSON(t, base+"/api/tools?"+v.query, &tl); st != 200 {
				t.Fatalf("tools: %d %s", st, tl.Error)
			}
			if !tl.From.Equal(v.from) || !tl.To.Equal(v.to) {
				t.Errorf("range %v..%v, want %v..%v", tl.From, tl.To, v.from, v.to)
			}
			got := truth{calls: map[string]uint64{}, failures: map[string]uint64{}}
			for _, r := range tl.Data {
				got.calls[r.Tool], got.failures[r.Tool] = r.Calls, r.Failures
				if r.Calls > 0 && r.FailureRate != float64(r.Failures)/float64(r.Calls) {
					t.Errorf("%s: failure rate %v", r.Tool, r.FailureRate)
				}
				if r.TopCode != want.topCode(r.Tool) {
					t.Errorf("%s: top code %q, want %q", r.Tool, r.TopCode, want.topCode(r.Tool))
				}
				if r.P50MS <= 0 || r.P95MS < r.P50MS {
					t.Errorf("%s: p50 %v p95 %v", r.Tool, r.P50MS, r.P95MS)
				}
				var sc, sf uint64
				for i := range r.SparkCalls {
					sc, sf = sc+r.SparkCalls[i], sf+r.SparkFailures[i]
				}
				if sc != r.Calls || sf != r.Failures || len(r.SparkCalls) > dashboard.SparkBuckets+1 {
					t.Errorf("%s: sparkline sums %d/%d over %d points, want %d/%d", r.Tool, sc, sf, len(r.SparkCalls), r.Calls, r.Failures)
				}
			}
			if !reflect.DeepEqual(got.calls, want.calls) || !reflect.DeepEqual(got.failures, nonZero(want.failures, want.calls)) {
				t.Errorf("per tool:\n got calls %v failures %v\nwant calls %v failures %v", got.calls, got.failures, want.calls, want.failures)
			}

			var fl answer[dashboard.Failures]
			if st := getJSON(t, base+"/api/failures?"+v.query, &fl); st != 200 {
				t.Fatalf("failures: %d %s", st, fl.Error)
			}
			if fl.Data.Buckets > dashboard.MaxBuckets+1 {
				t.Errorf("%d buckets", fl.Data.Buckets)
			}
			gotCodes := map[string]uint64{}
			for _, s := range fl.Data.Series {
				gotCodes[s.Code] = s.Total
				if len(s.Counts) != fl.Data.Buckets {
					t.Errorf("%s: %d counts for %d buckets", s.Code, len(s.Counts), fl.Data.Buckets)
				}
			}
			if !reflect.DeepEqual(gotCodes, want.byCode) {
				t.Errorf("failures by code:\n got %v\nwant %v", gotCodes, want.byCode)
			}

			var ad answer[[]dashboard.Adoption]
			if st := getJSON(t, base+"/api/adoption?"+v.query, &ad); st != 200 {
				t.Fatalf("adoption: %d %s", st, ad.Error)
			}
			for _, a := range ad.Data {
				if a.Envelope != want.env[a.Tool] || a.Legacy != want.legacy[a.Tool] {
					t.Errorf("adoption %s: %d/%d, want %d/%d", a.Tool, a.Envelope, a.Legacy, want.env[a.Tool], want.legacy[a.Tool])
				}
				if a.Ready != (a.Share > dashboard.ReadyShare) {
					t.Errorf("adoption %s: share %v ready %v", a.Tool, a.Share, a.Ready)
				}
			}
			if len(ad.Data) != len(want.calls) {
				t.Errorf("adoption: %d tools, want %d", len(ad.Data), len(want.calls))
			}

			var ms answer[[]dashboard.Message]
			if st := getJSON(t, base+"/api/messages?"+v.query, &ms); st != 200 {
				t.Fatalf("messages: %d %s", st, ms.Error)
			}
			for _, m := range ms.Data {
				if m.Code != "validation" && m.Code != "policy" || m.SampleTraceID == "" || m.Tool == "" || !strings.Contains(m.Detail, m.Tool) {
					t.Errorf("message %+v", m)
				}
			}
		})
	}

	t.Run("freshness", func(t *testing.T) {
		var fr answer[[]dashboard.Freshness]
		if st := getJSON(t, base+"/api/freshness", &fr); st != 200 {
			t.Fatalf("%d %s", st, fr.Error)
		}
		last := map[string]time.Time{}
		for _, e := range evs {
			if e.Time.After(last[e.Sidecar]) {
				last[e.Sidecar] = e.Time
			}
		}
		if len(fr.Data) != len(sidecars) {
			t.Fatalf("%d sidecars, want %d", len(fr.Data), len(sidecars))
		}
		for _, f := range fr.Data {
			if !f.LastEvent.Equal(last[f.Sidecar].Truncate(time.Second)) || f.LagSeconds != int64(now.Sub(f.LastEvent)/time.Second) {
				t.Errorf("%+v, want last event %v", f, last[f.Sidecar])
			}
		}
	})
}

// nonZero keeps the tools of calls in failures, with 0 where none failed.
func nonZero(failures, calls map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k := range calls {
		out[k] = failures[k]
	}
	return out
}

// TestHostileFilters feeds quotes, SQL fragments, huge numbers, unicode and
// overlong values to every filter. Each is refused with 400 and a message
// naming the filter, or is harmless: it answers what a plain query for the
// same (validated) value answers. The events table is intact afterwards,
// and the dashboard's user cannot write at all.
func TestHostileFilters(t *testing.T) {
	srv := chtest.Shared(t)
	evs := genEvents(600)
	db := seed(t, srv, evs)
	addReader(t, srv)
	base := serve(t, srv, db)
	rowsBefore := srv.Query(t, "SELECT count(), uniqExact(event_id) FROM "+db+".events")

	tests := []struct {
		name, query string
		param       string // the 400 message names it; "" when the value is harmless
		same        string // harmless: the answer equals this plain query's
	}{
		{name: "quote in tool", query: "tool=" + url.QueryEscape("docs_edit' OR '1'='1"), param: "tool"},
		{name: "comment in tool", query: "tool=" + url.QueryEscape("docs_edit'--"), param: "tool"},
		{name: "union in agent", query: "agent=" + url.QueryEscape("x' UNION ALL SELECT name, 1 FROM system.users --"), param: "agent"},
		{name: "drop in tool", query: "tool=" + url.QueryEscape("a'; DROP TABLE "+db+".events; --"), param: "tool"},
		{name: "backslash in agent", query: "agent=" + url.QueryEscape(`agent-a\`), param: "agent"},
		{name: "NUL in tool", query: "tool=docs%00edit", param: "tool"},
		{name: "newline in tool", query: "tool=docs%0Aedit", param: "tool"},
		{name: "sql as error code", query: "error_code=" + url.QueryEscape("validation' OR 1=1"), param: "error_code"},
		{name: "unknown code", query: "error_code=VALIDATION", param: "error_code"},
		{name: "bucket expression", query: "bucket=" + url.QueryEscape("60) * 0 + (1"), param: "bucket"},
		{name: "bucket zero", query: "bucket=0", param: "bucket"},
		{name: "bucket huge", query: "bucket=99999999999999999999", param: "bucket"},
		{name: "last huge", query: "last=99999999999999999999d", param: "last"},
		{name: "last past the limit", query: "last=9999d", param: "last"},
		{name: "last negative", query: "last=-5m", param: "last"},
		{name: "from is sql", query: "from=" + url.QueryEscape("now() - 1; SELECT 1"), param: "from"},
		{name: "from huge year", query: "from=99999-01-01T00:00", param: "from"},
		{name: "from after to", query: "from=2026-11-20T10:00&to=2026-11-20T09:00", param: "from"},
		{name: "range too wide", query: "from=2001-01-01T00:00&to=2026-11-20T09:00", param: "from"},
		{name: "from far past", query: "from=1900-01-01T00:00&to=2026-11-20T09:00", param: "from"},
		{name: "overlong tool", query: "tool=" + strings.Repeat("a", 129), param: "tool"},
		{name: "overlong query", query: "agent=" + strings.Repeat("%27", 1000), param: "query"},
		{name: "unknown parameter", query: "tool=docs_edit&limit=1000000", param: "query"},
		{name: "repeated parameter", query: "tool=docs_edit&tool=pubmed_search", param: "tool"},
		{name: "invalid utf-8", query: "tool=%ff%fe", param: "tool"},
		{name: "bad escape", query: "tool=%zz", param: "query"},
		{name: "unicode tool", query: "tool=" + url.QueryEscape("пабмед_搜索"), same: "tool=" + url.QueryEscape("пабмед_搜索")},
		{name: "unicode tool yields nothing", query: "tool=" + url.QueryEscape("ツール"), same: "tool=nonexistent_tool"},
		{name: "spaces around a valid tool", query: "tool=" + url.QueryEscape("  docs_edit "), same: "tool=docs_edit"},
		{name: "empty values", query: "tool=&agent=&error_code=&bucket=&last=&from=&to=", same: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, panel := range []string{"tools", "failures", "messages", "budgets", "revisions", "answers", "definitions", "adoption", "freshness", "options"} {
				var got answer[any]
				st := getJSON(t, base+"/api/"+panel+"?"+tc.query, &got)
				if tc.param != "" {
					if st != http.StatusBadRequest || !strings.HasPrefix(got.Error, "filter "+tc.param+":") {
						t.Fatalf("%s: %d %q, want 400 naming filter %s", panel, st, got.Error, tc.param)
					}
					continue
				}
				var plain answer[any]
				if st2 := getJSON(t, base+"/api/"+panel+"?"+tc.same, &plain); st != 200 || st2 != 200 {
					t.Fatalf("%s: %d and %d (%s)", panel, st, st2, got.Error)
				}
				if !reflect.DeepEqual(got.Data, plain.Data) {
					t.Errorf("%s: answer differs from the plain query's:\n%v\n%v", panel, got.Data, plain.Data)
				}
			}
			// The page answers the same status, with the message shown.
			resp, err := http.Get(base + "/?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.param != "" && (resp.StatusCode != 400 || !strings.Contains(string(body), `id="error"`)) {
				t.Errorf("page: %d, want 400 with the message", resp.StatusCode)
			}
			if tc.param == "" && resp.StatusCode != 200 {
				t.Errorf("page: %d", resp.StatusCode)
			}
		})
	}
	if after := srv.Query(t, "SELECT count(), uniqExact(event_id) FROM "+db+".events"); fmt.Sprint(after) != fmt.Sprint(rowsBefore) {
		t.Errorf("events changed: %v, then %v", rowsBefore, after)
	}
	// The dashboard's user only reads.
	for _, stmt := range []string{
		"INSERT INTO " + db + ".events (event_id) VALUES ('x')",
		"DROP TABLE " + db + ".events",
		"SELECT 1 SETTINGS readonly = 0",
	} {
		if _, err := asReader(srv, stmt); err == nil || !strings.Contains(err.Error(), "readonly") {
			t.Errorf("%s as %s: %v, want a readonly refusal", stmt, readerUser, err)
		}
	}
	// Not a GET: refused before anything runs.
	resp, err := http.Post(base+"/api/tools", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

// TestClickHouseAway: with no server behind the address, the page and the
// panels answer 502 with a message that names no internals; a bad filter is
// still a 400 (it is refused before any query).
func TestClickHouseAway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	d, err := dashboard.Open(dashboard.Config{Addr: []string{addr}, DialTimeout: time.Second, QueryTimeout: 3 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	hs := httptest.NewServer(d)
	defer hs.Close()
	var a answer[any]
	if st := getJSON(t, hs.URL+"/api/tools", &a); st != http.StatusBadGateway || strings.Contains(a.Error, addr) {
		t.Errorf("tools: %d %q", st, a.Error)
	}
	if st := getJSON(t, hs.URL+"/api/tools?tool=%27", &a); st != http.StatusBadRequest {
		t.Errorf("bad filter: %d %q", st, a.Error)
	}
	resp, err := http.Get(hs.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "ClickHouse did not answer") {
		t.Errorf("page: %d", resp.StatusCode)
	}
	for _, p := range []string{"/static/style.css", "/static/favicon.svg", "/favicon.ico"} {
		resp, err := http.Get(hs.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}

// TestIngestDelay writes events as a sidecar with a backed-up spool would
// deliver them (calls made five minutes before they reach ClickHouse),
// beside a sidecar whose events arrive at once and one that recorded
// nothing lately, and reads the freshness panel at the real present.
func TestIngestDelay(t *testing.T) {
	srv := chtest.Shared(t)
	real := time.Now().UTC()
	ev := func(id, sidecar string, age time.Duration) sink.Event {
		return sink.Event{EventID: id, Time: real.Add(-age), Sidecar: sidecar, Listener: "forward", Tool: "t", Method: "GET", OK: true}
	}
	evs := []sink.Event{
		ev("p1", "prompt", time.Second), ev("p2", "prompt", 2*time.Second),
		ev("b1", "backlogged", 5*time.Minute), ev("b2", "backlogged", 4*time.Minute),
		ev("q1", "quiet", 30*time.Minute),
	}
	db := seed(t, srv, evs)
	d, err := dashboard.Open(dashboard.Config{Addr: []string{srv.Addr()}, Database: db, Username: "default"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(func() { hs.Close(); d.Close() })

	var fr answer[[]dashboard.Freshness]
	if st := getJSON(t, hs.URL+"/api/freshness?last=1h", &fr); st != 200 {
		t.Fatalf("%d %s", st, fr.Error)
	}
	got := map[string]int64{}
	for _, f := range fr.Data {
		got[f.Sidecar] = f.IngestDelaySeconds
	}
	// The insert happened within the test's first seconds; allow for a slow
	// machine between building the events and writing them.
	if d := got["prompt"]; d < 0 || d > 30 {
		t.Errorf("prompt sidecar: ingest delay %ds, want about 2s", d)
	}
	if d := got["backlogged"]; d < 300 || d > 330 {
		t.Errorf("backlogged sidecar: ingest delay %ds, want about 300s", d)
	}
	if d, ok := got["quiet"]; !ok || d != -1 {
		t.Errorf("quiet sidecar: ingest delay %d (listed %v), want -1: nothing in the last 10 minutes", d, ok)
	}
}
