package clickhouse_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	s := ch.Approvals()
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
	g := approval.New(cfg, approval.RowsStore(ch2.Approvals()), "t")
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
