package mcppin

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var at = time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)

// TestLockRoundTrip writes a lock, reads it back, merges a server's
// changed list into it and loads it into a store.
func TestLockRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.pins")
	var l Lock
	u := l.Merge(route, server, list(t, pay, refund), at)
	if !slices.Equal(u.New, []string{"pay", "refund"}) || u.Changed != nil || u.Removed != nil {
		t.Errorf("first Merge = %+v", u)
	}
	if err := WriteLock(path, &l); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pins) != 2 || got.Pins[0].Tool != "pay" || !got.Pins[0].PinnedAt.Equal(at) || got.Pins[0].Digest != Digest(tool(t, pay)).Digest {
		t.Errorf("read back %+v", got.Pins)
	}
	rug := strings.Replace(pay, `,"maximum":100`, ``, 1)
	u = got.Merge(route, server, list(t, rug, `{"name":"drain","inputSchema":{"type":"object"}}`), at.Add(time.Hour))
	if !slices.Equal(u.New, []string{"drain"}) || !slices.Equal(u.Changed, []string{"pay"}) || !slices.Equal(u.Removed, []string{"refund"}) ||
		!slices.Equal(u.Fields["pay"], []string{FieldInputSchema}) {
		t.Errorf("second Merge = %+v", u)
	}
	if err := WriteLock(path, got); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the folder holds %d files after two writes, want the lock alone", len(entries))
	}

	// Loaded into a store, the lock's pins are enforced.
	p := New(Limits{})
	if err := p.Load(got); err != nil {
		t.Fatal(err)
	}
	if vs := states(p.Observe(route, server, list(t, pay), false)); !slices.Equal(vs, []string{"pay:changed[inputSchema]!"}) {
		t.Errorf("the pinned rug pull listed back as before: %v", vs)
	}
	if p.PinnedDefinition(route, server, "pay") == nil {
		t.Error("the lock's definition was not kept")
	}
	if err := New(Limits{MaxTools: 1}).Load(got); err == nil {
		t.Error("a lock over max tools was loaded")
	}
	if l, err := ReadLock(filepath.Join(t.TempDir(), "none")); err != nil || len(l.Pins) != 0 {
		t.Errorf("a missing lock: %v, %v; want an empty one", l, err)
	}
}

// TestParseLockErrors checks that a bad lock file is refused with its line
// and field.
func TestParseLockErrors(t *testing.T) {
	var l Lock
	l.Merge(route, server, list(t, pay), at)
	path := filepath.Join(t.TempDir(), "pins")
	if err := WriteLock(path, &l); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	d := Digest(tool(t, pay))
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"version", "version: 1", "version: 2", "pins:4: version: version 2"},
		{"unknown key", "    tool: pay", "    tool: pay\n    trust: yes", "pins:9: pins[0].trust"},
		{"digest edited", d.Digest, strings.Repeat("a", 64), "pins[0].digest: does not match the field digests"},
		{"not a digest", d.Fields[FieldDescription], "xyz", "pins[0].fields.description: not a SHA-256"},
		{"definition edited", `"maximum": 100`, `"maximum": 1000`, "pins[0].definition: does not match the digest (fields inputSchema differ)"},
		{"server not a key", server, "HTTP://127.0.0.1:8080/mcp", "pins[0].server: not a server key"},
		{"missing time", "    pinned_at: 2026-12-01T17:00:00Z\n", "", "pins[0].pinned_at: missing"},
		{"syntax", "pins:", "pins: [", "pins:"},
	} {
		data := strings.Replace(string(good), tc.from, tc.to, 1)
		if data == string(good) {
			t.Fatalf("%s: %q is not in the file:\n%s", tc.name, tc.from, good)
		}
		_, err := ParseLock("pins", []byte(data))
		if !errors.Is(err, ErrBadLockFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one with %q", tc.name, err, tc.want)
		}
	}
	twice := strings.Replace(string(good), "pins:\n", "pins:\n"+string(good[strings.Index(string(good), "  - route"):]), 1)
	if _, err := ParseLock("pins", []byte(twice)); err == nil || !strings.Contains(err.Error(), "pinned twice") {
		t.Errorf("an entry twice: %v", err)
	}
	if _, err := ParseLock("pins", nil); !errors.Is(err, ErrBadLockFile) {
		t.Errorf("an empty file: %v", err)
	}
}
