package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFiles checks that the files reload watches are what the sections
// list, resolved against the file's folder, even when the file does not
// validate (an unknown key, a missing listener).
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	abs := filepath.Join(dir, "abs", "p.rego")
	data := []byte("nonsense_key: 1\ntools:\n  - name: a\n    schema_file: schemas/a.json\n  - name: b\n" +
		"policies:\n  rego:\n    - {name: p, path: policies/p}\n    - {name: q, path: " + abs + "}\n  wasm:\n    - {name: w, path: w.wasm}\n")
	got := Files(path, data)
	want := []string{path, filepath.Join(dir, "schemas", "a.json"), filepath.Join(dir, "policies", "p"), abs, filepath.Join(dir, "w.wasm")}
	if !slices.Equal(got, want) {
		t.Errorf("Files = %q, want %q", got, want)
	}
	if got := Files(path, []byte("tools: [\n")); !slices.Equal(got, []string{path}) {
		t.Errorf("Files of a file that does not decode = %q, want only the file", got)
	}
}

// TestKeepStartSections checks that a reloaded configuration keeps the
// sections that take effect only at start from the one in force, names
// those it had changed, and leaves both values as they were.
func TestKeepStartSections(t *testing.T) {
	dir := t.TempDir()
	load := func(name, text string) *Loaded {
		t.Helper()
		lc, err := Parse(filepath.Join(dir, name), []byte(text))
		if err != nil {
			t.Fatalf("Parse %s: %v", name, err)
		}
		t.Cleanup(func() { lc.ClosePolicies(nil) })
		return lc
	}
	base := "listen: {forward: 127.0.0.1:0}\ntools: [{name: a, match: {path: /a}}]\n"
	inForce := load("a.yaml", base+"admin: {listen: off}\nevents: {file: {path: a.ndjson}}\n")
	next := load("b.yaml", base+"admin: {listen: off}\nevents: {file: {path: b.ndjson}}\nreload: {settle: 1s}\n"+
		"tracing: {endpoint: \"http://127.0.0.1:4318\"}\n")

	got, changed := next.KeepStartSections(inForce)
	if !slices.Equal(changed, []string{"events", "reload", "tracing"}) {
		t.Errorf("changed = %q, want [events reload tracing]", changed)
	}
	if got.Tracing.Enabled() {
		t.Errorf("kept tracing %q, want the one in force (off)", got.Tracing.Endpoint)
	}
	if got.Events.File.Path != filepath.Join(dir, "a.ndjson") || got.Reload != inForce.Reload {
		t.Errorf("kept events file %q, settle %s; want the ones in force (%q, %s)",
			got.Events.File.Path, got.Reload.Settle, inForce.Events.File.Path, inForce.Reload.Settle)
	}
	if got.Path != next.Path || got.Version != next.Version || got.LoadedPolicies != next.LoadedPolicies {
		t.Errorf("the copy is not the reloaded configuration: path %q, version %q", got.Path, got.Version)
	}
	if next.Events.File.Path != filepath.Join(dir, "b.ndjson") || next.Reload.Settle != time.Second {
		t.Errorf("KeepStartSections changed its receiver: events file %q, settle %s", next.Events.File.Path, next.Reload.Settle)
	}
	if _, changed := inForce.KeepStartSections(inForce); len(changed) != 0 {
		t.Errorf("a configuration against itself changed %q", changed)
	}
}

// events.file.journal: the spool's defaults apply to it (its folder
// beside the file), and it is refused with ClickHouse, which leaves the
// file unused.
func TestFileJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	lc, err := Parse(path, []byte("events:\n  file: {path: ev.ndjson, journal: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	lc.ClosePolicies(nil)
	if got, want := lc.Events.Spool.Dir, filepath.Join(dir, DefaultSpoolDir); got != want {
		t.Errorf("spool.dir = %q, want %q", got, want)
	}
	if lc.Events.Spool.SegmentAge == 0 {
		t.Error("the spool's defaults were not applied")
	}
	_, err = Parse(path, []byte("events:\n  file: {journal: true}\n  clickhouse: {addr: [127.0.0.1:9000]}\n"))
	if err == nil || !strings.HasSuffix(err.Error(), ": events.file.journal: journals the NDJSON file, which is not used when events.clickhouse.addr is set (events go through the spool to ClickHouse)") {
		t.Errorf("journal with ClickHouse: %v", err)
	}
}
