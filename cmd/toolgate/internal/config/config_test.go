package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/sink/events"
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

// events.file.journal: on unless events go to ClickHouse; the spool's
// defaults apply to it, its folder beside the file (the configuration's
// folder may be read-only); journal: false writes the file before each
// answer; and it is refused with ClickHouse, which leaves the file unused.
func TestFileJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	for _, tc := range []struct {
		name, yaml string
		journal    bool
		spoolDir   string
	}{
		{"default", "events:\n  file: {path: data/ev.ndjson}\n", true, filepath.Join(dir, "data", "ev.ndjson.journal")},
		{"no events section", "", true, filepath.Join(dir, "toolgate-events.ndjson.journal")},
		{"journal: true, own folder", "events:\n  file: {path: ev.ndjson, journal: true}\n  spool: {dir: j}\n", true, filepath.Join(dir, "j")},
		{"journal: false", "events:\n  file: {path: ev.ndjson, journal: false}\n", false, ""},
		{"ClickHouse", "events:\n  clickhouse: {addr: [127.0.0.1:9000]}\n", false, filepath.Join(dir, events.DefaultSpoolDir)},
	} {
		lc, err := Parse(path, []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lc.ClosePolicies(nil)
		ec := lc.Events
		if ec.File.Journal == nil || *ec.File.Journal != tc.journal {
			t.Errorf("%s: file.journal = %v, want %v", tc.name, ec.File.Journal, tc.journal)
		}
		if ec.Spool.Dir != tc.spoolDir {
			t.Errorf("%s: spool.dir = %q, want %q", tc.name, ec.Spool.Dir, tc.spoolDir)
		}
		if tc.spoolDir != "" && ec.Spool.SegmentAge == 0 {
			t.Errorf("%s: the spool's defaults were not applied", tc.name)
		}
	}
	_, err := Parse(path, []byte("events:\n  file: {journal: true}\n  clickhouse: {addr: [127.0.0.1:9000]}\n"))
	if err == nil || !strings.HasSuffix(err.Error(), ": events.file.journal: journals the NDJSON file, which is not used when events.clickhouse.addr is set (events go through the spool to ClickHouse)") {
		t.Errorf("journal with ClickHouse: %v", err)
	}
}

// events.on_write_failure: refuse by default, answer when asked, anything
// else refused with the field and its line.
func TestOnWriteFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	for _, tc := range []struct{ yaml, want string }{
		{"", events.OnWriteFailureRefuse},
		{"events:\n  on_write_failure: refuse\n", events.OnWriteFailureRefuse},
		{"events:\n  on_write_failure: answer\n", events.OnWriteFailureAnswer},
	} {
		lc, err := Parse(path, []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		lc.ClosePolicies(nil)
		if lc.Events.OnWriteFailure != tc.want {
			t.Errorf("%q: on_write_failure = %q, want %q", tc.yaml, lc.Events.OnWriteFailure, tc.want)
		}
	}
	_, err := Parse(path, []byte("events:\n  sidecar: a\n  on_write_failure: drop\n"))
	if err == nil || !strings.HasSuffix(err.Error(), `:3: events.on_write_failure: must be refuse or answer, got "drop"`) {
		t.Errorf("on_write_failure: drop: %v", err)
	}
}
