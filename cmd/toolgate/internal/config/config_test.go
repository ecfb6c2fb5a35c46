package config

import (
	"path/filepath"
	"slices"
	"testing"
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
