package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
)

// limitScopeEvents are the events TestDocumentedLimitScopeQuery seeds.
func limitScopeEvents() []sink.Event {
	at := docTo.Add(-30 * time.Minute)
	var evs []sink.Event
	add := func(n int, sidecar, scope, reason string, when time.Time) {
		for i := 0; i < n; i++ {
			evs = append(evs, sink.Event{
				EventID: fmt.Sprintf("ls-%s-%s-%s-%d-%d", sidecar, scope, reason, when.Unix(), i),
				Time:    when.Add(time.Duration(i) * time.Second), Sidecar: sidecar, Tool: "search",
				LimitScope: scope, Reason: reason, Refused: reason != "", OK: reason == "",
			})
		}
	}
	add(5, "sc-a", "fleet", "", at)
	add(2, "sc-a", "fleet", "budget_exhausted", at)
	add(3, "sc-b", "fleet", "", at)
	add(4, "sc-b", "local", "", at.Add(5*time.Minute))
	add(1, "sc-b", "local", "limit_unavailable", at.Add(5*time.Minute))
	add(6, "sc-b", "", "", at)                          // no limit applied
	add(2, "sc-a", "fleet", "", docTo.Add(time.Minute)) // outside the range
	return evs
}

// TestDocumentedLimitScopeQuery runs docs/queries.md's limit_scope, as
// written, on seeded events of two sidecars (one of which fell back to
// its local counters for a while), a replayed batch among them, and
// checks what an operator reads off it; it also shows the limit_scope
// column (migration 11) round-trips.
func TestDocumentedLimitScopeQuery(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	evs := limitScopeEvents()
	ctx := context.Background()
	if err := ch.WriteEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := ch.WriteEvents(ctx, evs[:7]); err != nil { // a replayed batch
		t.Fatal(err)
	}
	q, ok := docQueries(t)["limit_scope"]
	if !ok {
		t.Fatal("docs/queries.md has no query limit_scope")
	}
	q = docFill(db, q)
	rows, err := srv.TryQuery(q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	want := "[[sc-a fleet 7 2 2026-11-20 11:30:00 2026-11-20 11:30:04] " +
		"[sc-b fleet 3 0 2026-11-20 11:30:00 2026-11-20 11:30:02] " +
		"[sc-b local 5 1 2026-11-20 11:35:00 2026-11-20 11:35:03]]"
	if got := fmt.Sprint(rows); got != want {
		t.Errorf("rows:\n got %s\nwant %s", got, want)
	}
}
