//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPeerAgreement starts what the benchmark compares (the real upstream,
// toolgate built from this tree with the schema + Rego routes, nginx, and
// the nginx + OPA peer: nginx with Debian's Lua module and `opa run
// --server` built at the pinned version) and checks the agreement check
// for real: toolgate and the peer decide every agreement call as the bench
// schema and policy say, judged by whether the upstream's answer came
// back; and the check fails, naming the calls, against a path that
// checks nothing (plain nginx) and against a wrong expectation. It needs
// no wrk: scripts/testdeps.sh's default set (make test) installs
// everything it runs.
func TestPeerAgreement(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "extbench-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // nginx's workers run as nobody under root
		t.Fatal(err)
	}
	ps := &procs{dir: dir}
	t.Cleanup(ps.stopAll)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var log bytes.Buffer
	o := options{root: root, only: regexp.MustCompile(`^(nginx|nginx-opa|rego|reverse)$`)}
	_, paths, err := setup(ctx, o, ps, dir, &log)
	if err != nil {
		t.Fatalf("setup (it runs the agreement check): %v\n%s", err, log.String())
	}
	byKey := map[string]path{}
	for _, p := range paths {
		byKey[p.Key] = p
	}
	for _, k := range []string{"direct", "nginx", peerKey, "rego", "reverse"} {
		if _, ok := byKey[k]; !ok {
			t.Fatalf("no %s path (scripts/testdeps.sh installs libnginx-mod-http-lua); log:\n%s", k, log.String())
		}
	}
	if !strings.Contains(log.String(), "decide the 15 agreement calls alike") {
		t.Errorf("the log does not say the agreement check ran:\n%s", log.String())
	}
	peer := byKey[peerKey]
	if len(peer.also) != 1 || filepath.Base(peer.also[0].cmd.Path) != "opa" {
		t.Fatalf("the peer's CPU must count nginx and the opa server; it counts %v and %v", peer.proc.cmd.Path, peer.also)
	}

	// Each verdict on its own, along each checking path.
	for _, k := range []string{"rego", "reverse", peerKey} {
		for _, c := range agreementCalls {
			ok, err := reached(ctx, byKey[k], c.body)
			if err != nil {
				t.Fatalf("%s, %s: %v", k, c.name, err)
			}
			if ok != c.allow {
				t.Errorf("%s, %s: %s, want %s", k, c.name, verdict(ok), verdict(c.allow))
			}
		}
	}

	// Where the peer is weaker, as docs/performance.md says: OPA's query
	// API reads the body as Go's encoding/json does (the last of two equal
	// names wins, data after the first JSON value is ignored), so such a
	// body reaches the upstream through the peer; toolgate refuses it.
	for _, c := range peerGaps {
		if ok, err := reached(ctx, byKey["rego"], c.body); err != nil || ok {
			t.Errorf("toolgate, %s: reached %v (%v), want refused", c.name, ok, err)
		}
		if ok, err := reached(ctx, peer, c.body); err != nil || !ok {
			t.Errorf("the peer, %s: reached %v (%v), want allowed (docs/performance.md says so)", c.name, ok, err)
		}
	}

	// A path that checks nothing lets every refused call reach the
	// upstream: the check must fail and name them.
	err = agree(ctx, agreementCalls, byKey["rego"], byKey["nginx"])
	if err == nil {
		t.Fatal("the agreement check passed between toolgate and a plain nginx")
	}
	for _, c := range agreementCalls {
		if !c.allow && !strings.Contains(err.Error(), c.name) {
			t.Errorf("the failed check does not name %q: %v", c.name, err)
		}
	}
	if !strings.Contains(err.Error(), "nginx allowed") || !strings.Contains(err.Error(), "rego refused") {
		t.Errorf("the failed check does not say who decided what: %v", err)
	}

	// Both paths agreeing with each other but not with the verdict the
	// schema and policy give fails too.
	wrong := []agreementCall{{"an e-mail address, expected allowed", `{"query":"bob@example.com"}`, true}}
	if err := agree(ctx, wrong, byKey["rego"], peer); err == nil || !strings.Contains(err.Error(), "nginx-opa refused") {
		t.Errorf("a wrong expectation: got %v, want a failed check", err)
	}
}

// peerGaps are calls toolgate refuses and the nginx + OPA peer lets
// through to the upstream (docs/performance.md, "Beside nginx + OPA").
var peerGaps = []agreementCall{
	{"a duplicate name, the last one valid", `{"query":1,"query":"a"}`, false},
	{"an e-mail address hidden by a duplicate name", `{"query":"alice@example.org","query":"a"}`, false},
	{"data after the JSON object", `{"query":"a"}{"query":1}`, false},
}

// TestPeerSchema checks the peer's schema is the bench tool's, closed as
// strict: true closes it: at the root and in the nested filters object,
// not in the free-form places.
func TestPeerSchema(t *testing.T) {
	s, err := peerSchema()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(s), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"query"},
		"properties": map[string]any{
			"query":    map[string]any{"type": "string", "maxLength": 200.0},
			"organism": map[string]any{"enum": []any{"human", "mouse", "rat"}},
			"limit":    map[string]any{"type": "integer", "minimum": 1.0, "maximum": 100.0},
			"filters": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"phase_min": map[string]any{"type": "integer"}, "modality": map[string]any{"type": "string"}}},
			"ids": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("peer schema\n%s\nwant\n%s", gb, wb)
	}
}
