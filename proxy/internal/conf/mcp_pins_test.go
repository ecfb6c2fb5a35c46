package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigPin loads the mcp.pin section as the configuration file is
// read: the defaults (pinning on, on_change refuse), its errors at the
// field's path, a missing lock file, and a hand-edited lock refused with
// the lock's own line.
func TestConfigPin(t *testing.T) {
	dir := t.TempDir()
	good := `version: 1
pins:
  - route: payments
    server: http://127.0.0.1:8080/mcp
    tool: pay
    pinned_at: 2026-12-01T18:00:00Z
    digest: 0000000000000000000000000000000000000000000000000000000000000000
    fields:
      name: 0000000000000000000000000000000000000000000000000000000000000000
`
	if err := os.WriteFile(filepath.Join(dir, "bad.pins"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		tool    string // after "- name: payments\n    protocol: mcp\n    match: ..."
		wantErr []string
		check   func(t *testing.T, c *Config)
	}{
		{name: "on by default", tool: "", check: func(t *testing.T, c *Config) {
			p := c.Compiled[0].MCP.Cfg.Pin
			if p.OnChange != "refuse" || p.NewTools != "pin" {
				t.Errorf("defaults: on_change %q, new_tools %q; want refuse, pin", p.OnChange, p.NewTools)
			}
		}},
		{name: "an unknown mode", tool: "mcp: {pin: {on_change: follow}}",
			wantErr: []string{"tools[0].mcp.pin.on_change", `unknown mode "follow"`}},
		{name: "an unknown field to ignore", tool: "mcp: {pin: {ignore: [name]}}",
			wantErr: []string{"tools[0].mcp.pin.ignore[0]"}},
		{name: "a missing lock file", tool: "mcp: {pin: {lock_file: none.pins}}",
			wantErr: []string{"tools[0].mcp.pin.lock_file", "none.pins does not exist", "toolgate mcp pin"}},
		{name: "a hand-edited lock file", tool: "mcp: {pin: {lock_file: bad.pins}}",
			wantErr: []string{"tools[0].mcp.pin.lock_file", "bad.pins:7: pins[0].digest"}},
		{name: "pin on an http route", tool: "protocol: http\n    mcp: {pin: {on_change: record}}",
			wantErr: []string{"tools[0].mcp", "set only for protocol: mcp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := "protocol: mcp\n    " + tt.tool
			if strings.HasPrefix(tt.tool, "protocol: http") {
				tool = tt.tool
			}
			doc := "tools:\n  - name: payments\n    match: {host: 127.0.0.1, path: /mcp}\n    " + tool + "\n"
			var cfg Config
			if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate(dir)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, &cfg)
				return
			}
			if err == nil {
				t.Fatalf("loaded; want an error with %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
