package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
)

// TestConfigSchemaTooDeep loads a configuration whose tool's schema file
// nests items 100 deep: it is refused at load, naming the tool's field
// and the bound, before any compiler runs; 50 deep loads.
func TestConfigSchemaTooDeep(t *testing.T) {
	t.Parallel()
	nest := func(d int) string {
		return `{"type":"object","properties":{"x":` + strings.Repeat(`{"type":"array","items":`, d) + `{"type":"string"}` + strings.Repeat(`}`, d) + `}}`
	}
	for _, tc := range []struct {
		depth   int
		wantErr string
	}{
		{50, ""},
		{100, "too complex"},
	} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "deep.json"), nest(tc.depth))
		writeFile(t, filepath.Join(dir, "toolgate.yaml"), `listen:
  forward: 127.0.0.1:0
tools:
  - name: deep
    match: {host: 127.0.0.1, method: POST, path: /deep}
    schema_file: deep.json
`)
		_, err := config.Load(filepath.Join(dir, "toolgate.yaml"))
		t.Logf("items %d deep: %v", tc.depth, err)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("items %d deep: %v, want loaded", tc.depth, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "deeper than 64") ||
			!strings.Contains(err.Error(), "toolgate.yaml:6")):
			t.Errorf("items %d deep: %v, want refused at toolgate.yaml:6 as too complex, deeper than 64", tc.depth, err)
		}
	}
}
