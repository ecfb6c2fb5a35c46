package approval_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// TestFileStoreUseIsOneStep: many goroutines on several stores sharing
// one file (each its own open file, as separate processes have) race to
// use a one-use grant; exactly one use is recorded, in every round.
func TestFileStoreUseIsOneStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	var stores []*approval.FileStore
	for range 3 {
		s, err := approval.OpenFileStore(path, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	ctx := context.Background()
	for round := range 500 {
		id := fmt.Sprintf("%032x", round+1)
		now := time.Now().UTC()
		if err := stores[0].PutRequest(ctx, audit.ApprovalRequest{ID: id, Time: now, ExpiresAt: now.Add(time.Hour), Key: id}); err != nil {
			t.Fatal(err)
		}
		if err := stores[1].PutDecision(ctx, audit.ApprovalDecision{ID: id, Time: now, Verdict: audit.VerdictApproved, Decider: "t"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		taken := 0
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := stores[i%3].Use(ctx, audit.ApprovalDecision{ID: id, Time: time.Now().UTC(), Verdict: audit.VerdictUsed, Decider: "sidecar:x"}, 1)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		rec, _, err := stores[2].Find(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if taken != 1 || rec.Uses() != 1 {
			t.Fatalf("round %d: %d uses taken, %d recorded; want 1 and 1", round, taken, rec.Uses())
		}
	}
}

// TestGrantUnderOldKeyIsAskedAnew: a grant a sidecar before the whole-call
// binding stored (its key digests the tool, the arguments, agent and
// session only) no longer matches after the upgrade: the same call is
// asked anew, with a new request, and the old grant is never used.
func TestGrantUnderOldKeyIsAskedAnew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	q := call(map[string]any{"x": 1})
	q.Method, q.URL = "POST", "http://127.0.0.1:80/v1/docs"
	args, _ := json.Marshal(q.Arguments)
	sum := sha256.Sum256(args)
	digest := hex.EncodeToString(sum[:])
	h := sha256.New()
	for _, s := range []string{q.Tool, digest, q.Agent, q.Session} {
		fmt.Fprintf(h, "%d:%s|", len(s), s)
	}
	oldKey := hex.EncodeToString(h.Sum(nil))
	now := time.Now().UTC()
	const oldID = "0123456789abcdef0123456789abcdef"
	req, _ := json.Marshal(map[string]any{"request": audit.ApprovalRequest{ID: oldID, Time: now, ExpiresAt: now.Add(time.Hour), Key: oldKey, Tool: q.Tool, Agent: q.Agent, Session: q.Session, ArgsDigest: digest}})
	dec, _ := json.Marshal(map[string]any{"decision": audit.ApprovalDecision{ID: oldID, Time: now, Verdict: audit.VerdictApproved, Decider: "cli:dana"}})
	if err := os.WriteFile(path, append(append(req, '\n'), append(dec, '\n')...), 0o600); err != nil {
		t.Fatal(err)
	}
	g := gate(t, approval.Config{}, path)
	out := g.Approve(context.Background(), q)
	if out.State != policies.ApprovalPending || out.ID == oldID {
		t.Fatalf("a call granted under the old key: %+v; want a new pending request", out)
	}
}

// twoStepStore is the file store with its one-step use hidden: the gate
// then uses a grant as it does on ClickHouse (read the uses, then write),
// and each read's answer arrives a moment after it was read, as
// ClickHouse's does.
type twoStepStore struct{ approval.Store }

func (s twoStepStore) Find(ctx context.Context, id, key string) (approval.Record, bool, error) {
	rec, ok, err := s.Store.Find(ctx, id, key)
	time.Sleep(time.Millisecond) // the answer travels back
	return rec, ok, err
}

// TestGateUsesOnceOnTwoStepStore: on a store without a one-step use (as
// ClickHouse is), one sidecar's gate still forwards a uses: 1 grant once
// when 16 retries race.
func TestGateUsesOnceOnTwoStepStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	cfg := approval.Config{}
	if err := cfg.Validate(t.TempDir(), false); err != nil {
		t.Fatal(err)
	}
	fs, err := approval.OpenFileStore(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	g := approval.New(cfg, twoStepStore{fs}, "t")
	person := gate(t, approval.Config{}, path)
	ctx := context.Background()
	for round := range 20 {
		q := call(map[string]any{"round": round})
		out := g.Approve(ctx, q)
		if out.State != policies.ApprovalPending {
			t.Fatalf("state %q", out.State)
		}
		if _, err := person.Decide(ctx, out.ID, audit.VerdictApproved, "cli:dana", ""); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		approved := 0
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if g.Approve(ctx, call(map[string]any{"round": round})).State == policies.ApprovalApproved {
					mu.Lock()
					approved++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if approved != 1 {
			t.Fatalf("round %d: a uses: 1 grant approved %d of 16 racing calls", round, approved)
		}
	}
}
