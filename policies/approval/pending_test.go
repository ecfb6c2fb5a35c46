package approval_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// TestMaxPendingBehindDecided: max_pending counts every undecided request,
// however many decided ones were made after it. (The count once looked
// only at the newest max_pending+1 requests, so pending ones behind
// enough decided ones went uncounted and the bound let more through.)
func TestMaxPendingBehindDecided(t *testing.T) {
	g := gate(t, approval.Config{MaxPending: 3}, filepath.Join(t.TempDir(), "a.ndjson"))
	ctx := context.Background()
	for i := range 2 {
		if out := g.Approve(ctx, call(map[string]any{"pending": i})); out.State != policies.ApprovalPending {
			t.Fatalf("pending %d: %q", i, out.State)
		}
	}
	for i := range 10 {
		out := g.Approve(ctx, call(map[string]any{"decided": i}))
		if out.State != policies.ApprovalPending {
			t.Fatalf("decided %d: %q", i, out.State)
		}
		verdict := audit.VerdictApproved
		if i%2 == 1 {
			verdict = audit.VerdictDenied
		}
		if _, err := g.Decide(ctx, out.ID, verdict, "test:dana", ""); err != nil {
			t.Fatal(err)
		}
	}
	if out := g.Approve(ctx, call(map[string]any{"pending": 2})); out.State != policies.ApprovalPending {
		t.Fatalf("third pending: %q; want pending (2 of 3 are)", out.State)
	}
	out := g.Approve(ctx, call(map[string]any{"pending": 3}))
	if out.State != policies.ApprovalUnavailable {
		t.Fatalf("fourth pending: %q; want unavailable (3 of 3 are pending, behind 10 decided)", out.State)
	}
}

// TestFileStoreCountPending holds CountPending, which keeps its own set
// of undecided requests, to a count over Recent, and the store read row
// by row as it grows to one that reads the whole file at once, over
// random requests (times out of order, some past the retention),
// decisions and uses, written through two stores on one file.
func TestFileStoreCountPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	const retention = time.Hour
	open := func() *approval.FileStore {
		s, err := approval.OpenFileStore(path, retention)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 45))
	now := time.Now()
	var ids []string
	verdicts := []string{audit.VerdictApproved, audit.VerdictDenied, audit.VerdictUsed}
	for op := range 3000 {
		w := a
		if rng.IntN(2) == 1 {
			w = b
		}
		switch rng.IntN(3) {
		case 0, 1:
			id := fmt.Sprintf("%032x", op)
			at := now.Add(-time.Duration(rng.Int64N(int64(retention + 10*time.Minute))))
			r := audit.ApprovalRequest{ID: id, Time: at, ExpiresAt: at.Add(time.Duration(rng.Int64N(int64(2 * time.Hour)))), Key: fmt.Sprintf("k%d", rng.IntN(50)), Tool: "t"}
			if err := w.PutRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		case 2:
			if len(ids) == 0 {
				continue
			}
			d := audit.ApprovalDecision{ID: ids[rng.IntN(len(ids))], Time: now, Verdict: verdicts[rng.IntN(len(verdicts))], Decider: "test:x"}
			if err := w.PutDecision(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		if op%100 != 99 {
			continue
		}
		since := now.Add(-time.Duration(rng.Int64N(int64(retention - time.Minute))))
		at := now.Add(time.Duration(rng.Int64N(int64(90 * time.Minute))))
		fresh := open()
		for name, s := range map[string]*approval.FileStore{"a": a, "b": b, "fresh": fresh} {
			got, err := s.CountPending(ctx, since, at, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := s.Recent(ctx, since, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for i := range recs {
				if recs[i].Verdict() == nil && at.Before(recs[i].Request.ExpiresAt) {
					want++
				}
			}
			if got != want {
				t.Fatalf("op %d, store %s: CountPending %d, Recent says %d", op, name, got, want)
			}
			freshRecs, err := fresh.Recent(ctx, since, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(freshRecs) {
				t.Fatalf("op %d, store %s: %d recent requests; a store reading the whole file has %d", op, name, len(recs), len(freshRecs))
			}
			if limited, _ := s.CountPending(ctx, since, at, 2); limited != min(want, 2) {
				t.Fatalf("op %d, store %s: CountPending with limit 2 = %d; want %d", op, name, limited, min(want, 2))
			}
		}
		fresh.Close()
		now = now.Add(time.Duration(rng.Int64N(int64(time.Minute))))
	}
}

// BenchmarkApprovePendingAmongDecided is a new approval request when the
// store keeps many decided ones: its cost must not grow with them.
func BenchmarkApprovePendingAmongDecided(b *testing.B) {
	for _, decided := range []int{0, 10000} {
		b.Run(fmt.Sprintf("decided=%d", decided), func(b *testing.B) {
			cfg := approval.Config{MaxPending: 1 << 30, Tools: map[string]approval.ToolRule{"docs_edit": {Require: approval.RequireAlways}}}
			if err := cfg.Validate(b.TempDir(), false); err != nil {
				b.Fatal(err)
			}
			s, err := approval.OpenFileStore(filepath.Join(b.TempDir(), "a.ndjson"), time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			now := time.Now()
			for i := range decided {
				id := fmt.Sprintf("%032x", i)
				if err := s.PutRequest(ctx, audit.ApprovalRequest{ID: id, Time: now, ExpiresAt: now.Add(time.Hour), Key: id, Tool: "docs_edit"}); err != nil {
					b.Fatal(err)
				}
				if err := s.PutDecision(ctx, audit.ApprovalDecision{ID: id, Time: now, Verdict: audit.VerdictDenied, Decider: "b:x"}); err != nil {
					b.Fatal(err)
				}
			}
			g := approval.New(cfg, s, "b")
			i := 0
			for b.Loop() {
				i++
				q := &policies.ApprovalCall{Tool: "docs_edit", Arguments: map[string]any{"i": i}, Agent: "a", Session: "s"}
				if out := g.Approve(ctx, q); out.State != policies.ApprovalPending {
					b.Fatal(out.State)
				}
			}
		})
	}
}
