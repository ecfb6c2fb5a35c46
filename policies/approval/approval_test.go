package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

func gate(t *testing.T, cfg approval.Config, path string) *approval.Gate {
	t.Helper()
	if err := cfg.Validate(t.TempDir(), false); err != nil {
		t.Fatal(err)
	}
	s, err := approval.OpenFileStore(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return approval.New(cfg, s, "t")
}

func call(args map[string]any) *policies.ApprovalCall {
	return &policies.ApprovalCall{Tool: "docs_edit", Arguments: args, Agent: "a", Session: "s",
		Ask: &policies.Approval{Effect: "edits", Summary: map[string]string{"doc": "1"}}}
}

// TestFileStoreSharedByTwoProcesses: two stores on one file (a sidecar
// and `toolgate approvals`) see each other's rows.
func TestFileStoreSharedByTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	side, cli := gate(t, approval.Config{}, path), gate(t, approval.Config{}, path)
	ctx := context.Background()
	out := side.Approve(ctx, call(map[string]any{"x": 1}))
	if out.State != policies.ApprovalPending {
		t.Fatalf("state %q", out.State)
	}
	if _, err := cli.Decide(ctx, out.ID, audit.VerdictApproved, "cli:dana", ""); err != nil {
		t.Fatal(err)
	}
	if got := side.Approve(ctx, call(map[string]any{"x": 1})); got.State != policies.ApprovalApproved || got.ID != out.ID {
		t.Fatalf("after approval: %+v", got)
	}
	if _, err := cli.Decide(ctx, out.ID, audit.VerdictDenied, "cli:x", ""); !errors.Is(err, approval.ErrDecided) {
		t.Errorf("second decision: %v", err)
	}
	if _, err := cli.Decide(ctx, "../../etc/passwd", audit.VerdictDenied, "cli:x", ""); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := cli.Decide(ctx, out.ID, "maybe", "cli:x", ""); !errors.Is(err, approval.ErrVerdict) {
		t.Errorf("bad verdict: %v", err)
	}
}

// TestMaxPending: past max_pending, calls that need approval are refused
// as unavailable, and asking nothing more of the store.
func TestMaxPending(t *testing.T) {
	g := gate(t, approval.Config{MaxPending: 2}, filepath.Join(t.TempDir(), "a.ndjson"))
	ctx := context.Background()
	for i := range 2 {
		if out := g.Approve(ctx, call(map[string]any{"i": i})); out.State != policies.ApprovalPending {
			t.Fatalf("call %d: %q", i, out.State)
		}
	}
	if out := g.Approve(ctx, call(map[string]any{"i": 3})); out.State != policies.ApprovalUnavailable {
		t.Fatalf("third: %q", out.State)
	}
	// A retry of a pending call still gets its request.
	if out := g.Approve(ctx, call(map[string]any{"i": 0})); out.State != policies.ApprovalPending {
		t.Fatalf("retry: %q", out.State)
	}
}

// TestBindingKey: the grant is bound to the tool, the MCP route, the
// method, the canonical URL (scheme, host, port, path, query), the
// arguments by value, an unread body, the agent and the session; key
// order, number spelling and string escapes in the arguments do not
// matter.
func TestBindingKey(t *testing.T) {
	same := []string{`{"a":5,"b":"x"}`, `{"b":"x","a":5.0}`, `{"a":5e0,"b":"\u0078"}`, `{ "a" : 50e-1 , "b" : "x" }`}
	var digests []string
	for _, s := range same {
		digests = append(digests, approval.ArgsDigest(decodeArgs(t, s)))
	}
	for i, d := range digests {
		if d != digests[0] {
			t.Errorf("%s digests differently from %s", same[i], same[0])
		}
	}
	for _, s := range []string{`{"a":6,"b":"x"}`, `{"a":"5","b":"x"}`, `{"a":5,"b":"x","c":null}`, `{"a":12345678901234567891,"b":"x"}`} {
		if approval.ArgsDigest(decodeArgs(t, s)) == digests[0] {
			t.Errorf("%s digests like %s", s, same[0])
		}
	}
	base := approval.Binding{Tool: "t", Method: "GET", URL: "http://h:80/v1/rec/7", ArgsDigest: digests[0], Agent: "a", Session: "s"}
	key := approval.BindingKey(base)
	for name, change := range map[string]func(*approval.Binding){
		"tool":          func(b *approval.Binding) { b.Tool = "u" },
		"route":         func(b *approval.Binding) { b.Route = "other" },
		"method":        func(b *approval.Binding) { b.Method = "DELETE" },
		"port":          func(b *approval.Binding) { b.URL = "http://h:81/v1/rec/7" },
		"scheme":        func(b *approval.Binding) { b.URL = "https://h:80/v1/rec/7" },
		"query":         func(b *approval.Binding) { b.URL += "?force=1" },
		"arguments":     func(b *approval.Binding) { b.ArgsDigest = approval.ArgsDigest(map[string]any{"a": 6}) },
		"body":          func(b *approval.Binding) { b.BodyDigest = "00" },
		"agent":         func(b *approval.Binding) { b.Agent = "b" },
		"session":       func(b *approval.Binding) { b.Session = "t" },
		"field shift":   func(b *approval.Binding) { b.Agent, b.Session = "as", "" },
		"tool to route": func(b *approval.Binding) { b.Tool, b.Route = "", "t" },
	} {
		b := base
		change(&b)
		if approval.BindingKey(b) == key {
			t.Errorf("%s: the key does not change", name)
		}
	}
}

func decodeArgs(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzFileStore reads arbitrary file contents: it never panics or fails,
// and only well-formed rows count.
func FuzzFileStore(f *testing.F) {
	f.Add([]byte(`{"request":{"id":"0123456789abcdef0123456789abcdef","time":"2099-01-01T00:00:00Z","key":"k"}}` + "\n" +
		`{"decision":{"id":"0123456789abcdef0123456789abcdef","verdict":"approved"}}` + "\n"))
	f.Add([]byte("{\n\x00garbage\n{\"request\":{\"id\":\"x\"}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "a.ndjson")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := approval.OpenFileStore(path, 876000*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		recs, err := s.Recent(context.Background(), time.Time{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if len(r.Request.ID) != 32 {
				t.Fatalf("a malformed id was kept: %q", r.Request.ID)
			}
		}
	})
}

// TestInBandAcrossSidecars: two gates on one store (two sidecars behind a
// balancer) with one approvals.state_key_env honour each other's in-band
// tokens; a gate with its own random key refuses them as invalid, and a
// token is refused on another call as a mismatch.
func TestInBandAcrossSidecars(t *testing.T) {
	t.Setenv("TG_STATE_KEY", strings.Repeat("s", approval.MinStateKeyBytes))
	path := filepath.Join(t.TempDir(), "a.ndjson")
	shared := approval.Config{URL: "http://127.0.0.1:1/approvals", StateKeyEnv: "TG_STATE_KEY"}
	a, b := gate(t, shared, path), gate(t, shared, path)
	other := gate(t, approval.Config{URL: "http://127.0.0.1:1/approvals"}, path)
	ctx := context.Background()
	q := call(map[string]any{"x": 1})
	q.InBand = true
	out := a.Approve(ctx, q)
	if out.State != policies.ApprovalPending || !approval.IsToken(out.Token) {
		t.Fatalf("in-band ask: %+v", out)
	}
	if _, err := b.Decide(ctx, out.ID, audit.VerdictApproved, "cli:dana", ""); err != nil {
		t.Fatal(err)
	}
	withToken := func(args map[string]any) *policies.ApprovalCall {
		q := call(args)
		q.InBand, q.Token = true, out.Token
		return q
	}
	if got := other.Approve(ctx, withToken(map[string]any{"x": 1})); got.State != policies.ApprovalInvalid {
		t.Errorf("a sidecar with another key: %+v", got)
	}
	if got := b.Approve(ctx, withToken(map[string]any{"x": 2})); got.State != policies.ApprovalMismatch {
		t.Errorf("changed arguments: %+v", got)
	}
	if got := b.Approve(ctx, withToken(map[string]any{"x": 1})); got.State != policies.ApprovalApproved || got.ID != out.ID {
		t.Errorf("the other sidecar with the shared key: %+v", got)
	}
}

// TestInBandHold: in hold mode, a call asked in-band is answered at once
// (the person needs the URL first); its retry with the token is held until
// the decision.
func TestInBandHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.ndjson")
	g := gate(t, approval.Config{URL: "http://127.0.0.1:1/approvals", Mode: approval.ModeHold, HoldTimeout: time.Minute, PollInterval: 10 * time.Millisecond}, path)
	ctx := context.Background()
	q := call(map[string]any{"x": 1})
	q.InBand = true
	start := time.Now()
	out := g.Approve(ctx, q)
	if out.State != policies.ApprovalPending || out.Token == "" || time.Since(start) > 20*time.Second {
		t.Fatalf("first in-band call: %+v after %s", out, time.Since(start))
	}
	done := make(chan policies.ApprovalOutcome, 1)
	go func() {
		q := call(map[string]any{"x": 1})
		q.InBand, q.Token = true, out.Token
		done <- g.Approve(ctx, q)
	}()
	select {
	case got := <-done:
		t.Fatalf("the retry was not held: %+v", got)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := g.Decide(ctx, out.ID, audit.VerdictApproved, "cli:dana", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got.State != policies.ApprovalApproved {
			t.Fatalf("held retry: %+v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held retry was not released by the approval")
	}
}

// TestInBandConfig checks in_band and state_key_env: their defaults, and
// the values Validate refuses.
func TestInBandConfig(t *testing.T) {
	c := approval.Config{Tools: map[string]approval.ToolRule{"a": {}, "b": {InBand: approval.InBandOff}}}
	if err := c.Validate(t.TempDir(), false); err != nil {
		t.Fatal(err)
	}
	if c.InBand != approval.InBandAuto || c.Tools["a"].InBand != approval.InBandAuto || c.Tools["b"].InBand != approval.InBandOff {
		t.Errorf("defaults: %q %+v", c.InBand, c.Tools)
	}
	t.Setenv("TG_SHORT_KEY", "short")
	for name, c := range map[string]approval.Config{
		"in_band":         {InBand: "sometimes"},
		"tools.a.in_band": {Tools: map[string]approval.ToolRule{"a": {InBand: "yes"}}},
		"state_key_env":   {StateKeyEnv: "TG_SHORT_KEY"},
		"state_key_env ":  {StateKeyEnv: "TG_UNSET_KEY_FOR_TEST"},
	} {
		err := c.Validate(t.TempDir(), false)
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(name)) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
