package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// dryRunTools are the tools whose schemas run in dry run in dryRunEvents.
var dryRunTools = []string{"drug_targets", "pubmed_search"}

// hostileReason is a violation line as a schema could word it about a
// caller's key name: the page must escape it.
const hostileReason = `/<i>x</i>: unknown argument`

// dryRunEvents are calls of tools whose schema runs in dry run, over the
// six hours before now: most pass it, some would be refused for one or
// two reasons (seven reasons, more than a row lists), some carry a dry-run
// policy's line too (which the panel must not count), and all go upstream.
func dryRunEvents(n int) []sink.Event {
	reasons := []string{"/organism: not one of the allowed values", "/limit: wrong type", "/qury: unknown argument",
		"/query: required", hostileReason, "/filters/modality: wrong type", "/retmax: wrong type"}
	evs := make([]sink.Event, n)
	for i := range evs {
		e := sink.Event{
			EventID: fmt.Sprintf("dryrun-%05d", i), Time: now.Add(-time.Duration(i*67%(6*3600)+1) * time.Second),
			Sidecar: sidecars[i%2], Listener: "forward", Tool: dryRunTools[i%len(dryRunTools)], Agent: agents[(i/3)%len(agents)],
			TraceID: fmt.Sprintf("dtrace-%05d", i), Method: "POST", OK: true, UpstreamStatus: 200, TotalUS: 80, Inspected: true,
		}
		switch i % 5 {
		case 1:
			e.DryRunDenied = true
			e.DryRunViolations = []string{"schema: " + reasons[(i/5)%len(reasons)]}
		case 2:
			e.DryRunDenied = true
			e.DryRunViolations = []string{"schema: " + reasons[(i/5)%len(reasons)], "schema: " + reasons[(i/5+3)%len(reasons)]}
		case 3:
			e.DryRunDenied = true
			e.DryRunViolations = []string{"policy pii_guard: an e-mail address in term"}
		}
		evs[i] = e
	}
	return evs
}

// wantSchemaDryRun counts the panel in Go from the events.
func wantSchemaDryRun(evs []sink.Event, from time.Time, tool, agent string) map[string]dashboard.SchemaDryRunRow {
	out := map[string]dashboard.SchemaDryRunRow{}
	reasons := map[string]map[string]uint64{}
	for _, e := range evs {
		if e.Time.Before(from) || tool != "" && e.Tool != tool || agent != "" && e.Agent != agent {
			continue
		}
		r := out[e.Tool]
		r.Tool = e.Tool
		r.Calls++
		would := false
		for _, l := range e.DryRunViolations {
			if reason, ok := strings.CutPrefix(l, "schema: "); ok {
				would = true
				if reasons[e.Tool] == nil {
					reasons[e.Tool] = map[string]uint64{}
				}
				reasons[e.Tool][reason]++
			}
		}
		if would {
			r.WouldRefuse++
		}
		out[e.Tool] = r
	}
	for t, r := range out {
		if r.WouldRefuse == 0 {
			delete(out, t)
			continue
		}
		r.Share = float64(r.WouldRefuse) / float64(r.Calls)
		for k, n := range reasons[t] {
			r.Reasons = append(r.Reasons, dashboard.SchemaReason{Reason: k, Calls: n})
		}
		sort.Slice(r.Reasons, func(i, j int) bool {
			a, b := r.Reasons[i], r.Reasons[j]
			return a.Calls > b.Calls || a.Calls == b.Calls && a.Reason < b.Reason
		})
		if len(r.Reasons) > dashboard.MaxSchemaReasons {
			r.Reasons = r.Reasons[:dashboard.MaxSchemaReasons]
		}
		out[t] = r
	}
	return out
}

// TestSchemaDryRunPanel reads the schema dry run panel as JSON, as the
// read-only user, for several views, and checks every row against a count
// made in Go from the events written (other tools' events and a dry-run
// policy's lines among them, which it must not count); the page shows the
// panel with the reasons escaped.
func TestSchemaDryRunPanel(t *testing.T) {
	srv := chtest.Shared(t)
	dry := dryRunEvents(500)
	evs := append(append([]sink.Event(nil), dry...), genEvents(400)...)
	db := seed(t, srv, evs)
	addReader(t, srv)
	base := serve(t, srv, db)

	views := []struct {
		name, query string
		from        time.Time
		tool, agent string
	}{
		{name: "default 24h", from: now.Add(-24 * time.Hour)},
		{name: "last 1h", query: "last=1h", from: now.Add(-time.Hour)},
		{name: "agent", query: "agent=" + agents[1], from: now.Add(-24 * time.Hour), agent: agents[1]},
		{name: "error code does not apply", query: "error_code=policy", from: now.Add(-24 * time.Hour)},
		{name: "tool", query: "tool=" + dryRunTools[1] + "&last=6h", from: now.Add(-6 * time.Hour), tool: dryRunTools[1]},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			var got answer[[]dashboard.SchemaDryRunRow]
			if st := getJSON(t, base+"/api/schema_dry_run?"+v.query, &got); st != 200 {
				t.Fatalf("schema_dry_run: %d %s", st, got.Error)
			}
			want := wantSchemaDryRun(evs, v.from, v.tool, v.agent)
			have := map[string]dashboard.SchemaDryRunRow{}
			for i, r := range got.Data {
				have[r.Tool] = r
				if i > 0 && r.WouldRefuse > got.Data[i-1].WouldRefuse {
					t.Errorf("row %s (%d) after %s (%d)", r.Tool, r.WouldRefuse, got.Data[i-1].Tool, got.Data[i-1].WouldRefuse)
				}
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("schema dry run:\n got %+v\nwant %+v", have, want)
			}
			if len(want) == 0 {
				t.Fatal("the view holds no dry-run refusal; the test would prove nothing")
			}
		})
	}

	resp, err := http.Get(base + "/?last=24h")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	for _, s := range []string{`<section id="schema-dry-run">`, `<tr data-tool="drug_targets">`, `<code>/organism: not one of the allowed values</code>`, `&lt;i&gt;x&lt;/i&gt;`} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	if strings.Contains(page, "<i>x</i>") {
		t.Error("the page shows a reason unescaped")
	}
}
