package clickhouse_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
)

// docQueries reads the named queries of docs/queries.md: each fenced sql
// block whose first line is "-- query: NAME".
func docQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/queries.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```sql\n-- query: (\\w+)\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// docTo is the end of the time range the documented queries run over.
var docTo = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// docEvents are the events TestDocumentedQueries seeds: two tools, two
// sidecars, two hours, every error code the queries group by. Events of
// one tool and error code share a trace id, so any(trace_id) reads the
// same on one server and on a cluster.
func docEvents() []sink.Event {
	to := docTo
	var evs []sink.Event
	var revisionAt func(time.Time) string // the policy version of an event at a time
	add := func(n int, tool, code, reason, detail, sidecar string, at time.Time, envelope bool, dry []string) {
		for i := 0; i < n; i++ {
			evs = append(evs, sink.Event{
				EventID: fmt.Sprintf("%s-%s-%s-%d-%d", tool, code, sidecar, at.Unix(), i),
				Time:    at.Add(time.Duration(i) * time.Second), Sidecar: sidecar, Tool: tool, TraceID: fmt.Sprintf("trace-%s-%s", tool, code),
				ErrorCode: code, Reason: reason, Detail: detail, OK: code == "", Envelope: envelope,
				DryRunDenied: len(dry) > 0, DryRunViolations: dry, TotalUS: int64(1000 * (i + 1)),
				PolicyVersion: revisionAt(at),
			})
		}
	}
	prev, this := to.Add(-90*time.Minute), to.Add(-30*time.Minute)
	// The previous hour's calls were decided by bundle revision r1, the
	// rest by r2.
	revisionAt = func(at time.Time) string {
		if at.Equal(prev) {
			return "r1"
		}
		return "r2"
	}
	add(10, "pubmed_search", "", "", "", "sc-a", prev, true, nil)
	add(4, "pubmed_search", "validation", "unknown_field", "Tool 'pubmed_search' got unknown argument 'retmx'", "sc-a", prev, false, nil)
	add(6, "pubmed_search", "validation", "unknown_field", "Tool 'pubmed_search' got unknown argument 'retmx'", "sc-a", this, true, nil)
	add(3, "pubmed_search", "policy", "policy_denied", "Tool 'pubmed_search' refused by policy 'pii_guard': term looks like an e-mail", "sc-a", this, true, nil)
	add(8, "docs_edit", "", "", "", "sc-b", this, false, []string{"edits need an approval"})
	add(2, "docs_edit", "rate_limit", "status_429", "Tool 'docs_edit' failed: upstream answered 429", "sc-b", prev, false, nil)
	add(5, "docs_edit", "rate_limit", "status_429", "Tool 'docs_edit' failed: upstream answered 429", "sc-b", this.Add(-10*time.Minute), false, nil)
	return evs
}

// docFill fills the placeholders of a documented query for database db.
func docFill(db, q string) string {
	lit := func(ts time.Time) string { return "toDateTime('" + ts.Format("2006-01-02 15:04:05") + "')" }
	return strings.NewReplacer("{db}", "`"+db+"`", "{from}", lit(docTo.Add(-3*time.Hour)), "{to}", lit(docTo),
		"{bucket}", "3600", "{tool}", "'docs_edit'").Replace(q)
}

// checkDocQuery runs the documented query name, as written, on database db
// and checks its rows as fmt.Sprint prints them.
func checkDocQuery(t *testing.T, srv *chtest.Server, db string, queries map[string]string, name, want string) {
	t.Helper()
	q, ok := queries[name]
	if !ok {
		t.Fatalf("docs/queries.md has no query %q", name)
	}
	rows, err := srv.TryQuery(docFill(db, q))
	if err != nil {
		t.Fatalf("%v\n%s", err, docFill(db, q))
	}
	if got := fmt.Sprint(rows); got != want {
		t.Errorf("rows:\n got %s\nwant %s", got, want)
	}
}

// TestDocumentedQueries runs every query of docs/queries.md, as written,
// on seeded events (with a replayed batch among them) and checks what an
// analyst would read off each.
func TestDocumentedQueries(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	evs := docEvents()
	ctx := context.Background()
	if err := ch.WriteEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := ch.WriteEvents(ctx, evs[10:25]); err != nil { // a replayed batch
		t.Fatal(err)
	}
	queries := docQueries(t)
	tests := []struct {
		name string
		want string // rows as fmt.Sprint prints them
	}{
		{"failures_over_time", "[[2026-11-20 10:00:00 rate_limit 2] [2026-11-20 10:00:00 validation 4] [2026-11-20 11:00:00 policy 3] [2026-11-20 11:00:00 rate_limit 5] [2026-11-20 11:00:00 validation 6]]"},
		{"failure_rate_per_tool", "[[pubmed_search 23 13 0.5652 validation 3 9] [docs_edit 15 7 0.4667 rate_limit 3 8]]"},
		{"top_messages", "[[unknown_field Tool 'pubmed_search' got unknown argument 'retmx' 10 pubmed_search trace-pubmed_search-validation] [policy_denied Tool 'pubmed_search' refused by policy 'pii_guard': term looks like an e-mail 3 pubmed_search trace-pubmed_search-policy]]"},
		{"dry_run_messages", "[[edits need an approval 8 docs_edit trace-docs_edit-]]"},
		{"envelope_adoption", "[[pubmed_search 19 4 0.8261 2026-11-20 10:30:03] [docs_edit 0 15 0 2026-11-20 11:30:07]]"},
		{"spike", "[[docs_edit rate_limit 5 2 3] [pubmed_search policy 3 0 3] [pubmed_search validation 6 4 2]]"},
		{"freshness", "[[sc-a 2026-11-20 11:30:05 1795 23] [sc-b 2026-11-20 11:30:07 1793 15]]"},
		{"revisions_per_sidecar", "[[sc-a r2 2026-11-20 11:30:05 9] [sc-a r1 2026-11-20 10:30:09 14] [sc-b r2 2026-11-20 11:30:07 13] [sc-b r1 2026-11-20 10:30:01 2]]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkDocQuery(t, srv, db, queries, tc.name, tc.want) })
	}
	if len(queries) != len(tests)+len(otherQueryTests) {
		t.Errorf("docs/queries.md has %d named queries, the tests check %d", len(queries), len(tests)+len(otherQueryTests))
	}
}
