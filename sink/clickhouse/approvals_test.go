package clickhouse_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// TestApprovalStoreCountPending holds the server-side count of pending
// approval requests to a count over the rows RecentRows hands back, on
// random requests (some expired, some older than the window) and
// decisions (approvals, denials, uses) in a real ClickHouse; and checks
// that a gate on the store bounds max_pending however many decided
// requests were made after the pending ones.
func TestApprovalStoreCountPending(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, _ := openCH(t, srv)
	s := ch.Approvals(0)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(45, 7))
	now := time.Now()
	verdicts := []string{audit.VerdictApproved, audit.VerdictDenied, audit.VerdictUsed}
	var ids []string
	for i := range 60 {
		id := fmt.Sprintf("%032x", 1000+i)
		at := now.Add(-time.Duration(rng.Int64N(int64(2 * time.Hour))))
		r := audit.ApprovalRequest{ID: id, Time: at, ExpiresAt: at.Add(time.Duration(rng.Int64N(int64(3 * time.Hour)))), Key: fmt.Sprintf("k%d", i), Tool: "t"}
		if err := s.PutRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if rng.IntN(2) == 0 {
			d := audit.ApprovalDecision{ID: ids[rng.IntN(len(ids))], Time: now, Verdict: verdicts[rng.IntN(len(verdicts))], Decider: "test:x"}
			if err := s.PutDecision(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	for q := range 8 {
		since := now.Add(-time.Duration(rng.Int64N(int64(2 * time.Hour))))
		at := now.Add(time.Duration(rng.Int64N(int64(time.Hour))))
		reqs, decs, err := s.RecentRows(ctx, since, 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, r := range reqs {
			rec := approval.Record{Request: r, Decisions: decs[r.ID]}
			if rec.Verdict() == nil && at.Before(r.ExpiresAt) {
				want++
			}
		}
		got, err := s.CountPending(ctx, since, at, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("query %d: CountPending %d; the rows say %d", q, got, want)
		}
		if limited, _ := s.CountPending(ctx, since, at, 2); limited != min(want, 2) {
			t.Fatalf("query %d: CountPending with limit 2 = %d; want %d", q, limited, min(want, 2))
		}
	}

	ch2, _ := openCH(t, srv) // an empty database for the gate
	cfg := approval.Config{MaxPending: 3}
	if err := cfg.Validate(t.TempDir(), false); err != nil {
		t.Fatal(err)
	}
	g := approval.New(cfg, approval.RowsStore(ch2.Approvals(cfg.PendingTTL+cfg.DecisionTTL)), "t")
	ask := func(args map[string]any) policies.ApprovalOutcome {
		return g.Approve(ctx, &policies.ApprovalCall{Tool: "docs_edit", Arguments: args, Agent: "a", Session: "s",
			Ask: &policies.Approval{Effect: "edits"}})
	}
	for i := range 2 {
		if out := ask(map[string]any{"pending": i}); out.State != policies.ApprovalPending {
			t.Fatalf("pending %d: %q", i, out.State)
		}
	}
	for i := range 6 {
		out := ask(map[string]any{"decided": i})
		if out.State != policies.ApprovalPending {
			t.Fatalf("decided %d: %q", i, out.State)
		}
		if _, err := g.Decide(ctx, out.ID, audit.VerdictDenied, "test:dana", ""); err != nil {
			t.Fatal(err)
		}
	}
	if out := ask(map[string]any{"pending": 2}); out.State != policies.ApprovalPending {
		t.Fatalf("third pending: %q; want pending (2 of 3 are)", out.State)
	}
	if out := ask(map[string]any{"pending": 3}); out.State != policies.ApprovalUnavailable {
		t.Fatalf("fourth pending: %q; want unavailable (3 of 3 are pending, behind 6 decided)", out.State)
	}
}

// TestApprovalStoreFindWindow: a store with a window (a sidecar's:
// pending_ttl plus decision_ttl) finds by id and by key what the file
// store with that retention finds, requests well inside the window, and
// not those well past it (every one of them expired); a store without a
// window (the audit's) finds them all. In a real ClickHouse.
func TestApprovalStoreFindWindow(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, _ := openCH(t, srv)
	ctx := context.Background()
	const window = approval.DefaultPendingTTL + approval.DefaultDecisionTTL
	file := approval.NewFileStore(filepath.Join(t.TempDir(), "approvals.ndjson"), window)
	t.Cleanup(func() { file.Close() })
	all := approval.RowsStore(ch.Approvals(0))
	stores := map[string]approval.Store{"clickhouse": approval.RowsStore(ch.Approvals(window)), "file": file}
	now := time.Now().UTC()
	ages := []time.Duration{time.Minute, window - 2*time.Minute, window + time.Hour, 3 * window, 30 * 24 * time.Hour}
	for i, age := range ages {
		r := audit.ApprovalRequest{ID: fmt.Sprintf("%032x", 500+i), Time: now.Add(-age), ExpiresAt: now.Add(-age + approval.DefaultPendingTTL),
			Key: fmt.Sprintf("key-%d", i), Tool: "docs_edit"}
		for _, st := range []approval.Store{file, all} { // all and the windowed store share the tables
			if err := st.PutRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, age := range ages {
		id, key := fmt.Sprintf("%032x", 500+i), fmt.Sprintf("key-%d", i)
		inside := age < window
		for name, st := range stores {
			for _, by := range [][2]string{{id, ""}, {"", key}} {
				rec, found, err := st.Find(ctx, by[0], by[1])
				if err != nil {
					t.Fatal(err)
				}
				if found != inside || (found && rec.Request.ID != id) {
					t.Errorf("%s store, request of %s ago, Find(%q, %q): found %v (%q); want %v", name, age, by[0], by[1], found, rec.Request.ID, inside)
				}
			}
		}
		if rec, found, err := all.Find(ctx, "", key); err != nil || !found || rec.Request.ID != id {
			t.Errorf("store without a window, request of %s ago: found %v (%q), %v; want it", age, found, rec.Request.ID, err)
		}
	}
}

// benchOldRows is how many old approval requests
// BenchmarkApprovalFindAmongOld puts in the table.
const benchOldRows = 1_000_000

// BenchmarkApprovalFindAmongOld is a gate's lookup of a call's newest
// request (by key) and of a request by id on the ClickHouse store, with a
// year of older approval requests in the table (benchOldRows), as a
// fleet's audit trail grows; the store's window is the default
// pending_ttl plus decision_ttl, as a sidecar's.
func BenchmarkApprovalFindAmongOld(b *testing.B) {
	srv := chtest.Shared(b)
	ch, db := openCH(b, srv)
	ctx := context.Background()
	now := time.Now().UTC()
	// A year of old requests, inserted by the server from numbers().
	srv.Exec(b, fmt.Sprintf("INSERT INTO `%s`.approval_requests (id, time, time_us, expires_at, key, tool) "+
		"SELECT lower(hex(MD5(toString(number)))), toDateTime(%d - number * 31), 0, toDateTime(%d - number * 31 + 3600), "+
		"concat('old-', toString(number %% 5000)), 'docs_edit' FROM system.numbers LIMIT %d",
		db, now.Add(-48*time.Hour).Unix(), now.Add(-48*time.Hour).Unix(), benchOldRows))
	s := ch.Approvals(approval.DefaultPendingTTL + approval.DefaultDecisionTTL)
	r := audit.ApprovalRequest{ID: fmt.Sprintf("%032x", 7), Time: now, ExpiresAt: now.Add(time.Hour), Key: "recent", Tool: "docs_edit"}
	if err := s.PutRequest(ctx, r); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct{ name, id, key string }{{"key", "", "recent"}, {"id", r.ID, ""}} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				got, _, ok, err := s.FindRows(ctx, q.id, q.key)
				if err != nil || !ok || got.ID != r.ID {
					b.Fatalf("FindRows(%q, %q) = %q, %v, %v", q.id, q.key, got.ID, ok, err)
				}
			}
		})
	}
}
