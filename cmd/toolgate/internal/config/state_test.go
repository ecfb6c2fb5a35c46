package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateRedisErrorsNameTheLine: a broken state.redis names the file,
// the line and the field; a valid one loads, is start-only, and leaves
// the client to the sidecar (Load connects to nothing).
func TestStateRedisErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		yaml, want string
	}{
		{"state:\n  redis:\n    addrs: [127.0.0.1:6379]\n    timeout: 10s\n", ":4: state.redis.timeout: 10s is outside 1ms to 5s"},
		{"state:\n  redis:\n    addrs: [redis]\n", ":3: state.redis.addrs[0]: \"redis\" is not host:port"},
		{"state:\n  redis:\n    addrs: [127.0.0.1:6379]\n    mode: ring\n", ":4: state.redis.mode:"},
		{"tools:\n  - name: s\n    match: {host: 127.0.0.1, path: /s}\nbudgets:\n  limits:\n    - name: b\n      calls: 1\n      window: 1m\n      on_unavailable: maybe\n", ":9: budgets.limits[0].on_unavailable: \"maybe\" is not local, deny or allow"},
	} {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p+tc.want) {
			t.Errorf("%q: error %v; want %s%s", tc.yaml, err, p, tc.want)
		}
	}
	p := filepath.Join(dir, "ok.yaml")
	os.WriteFile(p, []byte("state:\n  redis:\n    addrs: [127.0.0.1:1]\n"), 0o644)
	lc, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Fleet != nil || lc.State.Redis.Timeout == 0 {
		t.Fatalf("Load opened a client (%v) or applied no defaults (%+v)", lc.Fleet, lc.State.Redis)
	}
	os.WriteFile(p, []byte("state:\n  redis:\n    addrs: [127.0.0.1:2]\n"), 0o644)
	next, err := LoadAfter(p, lc)
	if err != nil {
		t.Fatal(err)
	}
	kept, changed := next.KeepStartSections(lc)
	if len(changed) != 1 || changed[0] != "state" || kept.State.Redis.Addrs[0] != "127.0.0.1:1" {
		t.Fatalf("a reload changing state: changed %v, in force %v; want state restart-only", changed, kept.State.Redis.Addrs)
	}
}
