package conf

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigInlineSchemas loads tools whose schema is written in the YAML
// as a mapping or as a boolean, with and without unknown_formats, the way
// the configuration file is read.
func TestConfigInlineSchemas(t *testing.T) {
	tests := []struct {
		name    string
		tool    string // the tool's YAML, after "- name: t"
		wantErr []string
		args    map[string]any
		refused bool
	}{
		{name: "schema true accepts any arguments", tool: "schema: true",
			args: map[string]any{"anything": 1}},
		{name: "schema false refuses every call", tool: "schema: false",
			args: map[string]any{}, refused: true},
		{name: "a mapping still works", tool: "schema: {properties: {q: {type: string}}}",
			args: map[string]any{"qq": "x"}, refused: true},
		{name: "a string is not a schema", tool: "schema: object",
			wantErr: []string{"tools[0].schema", "schema must be a JSON object or boolean, got string"}},
		{name: "an unknown format is refused at load", tool: "schema: {properties: {e: {type: string, format: idn-email}}}",
			wantErr: []string{"tools[0].schema", `unknown format "idn-email"`, "/properties/e/format", "known formats: date,"}},
		{name: "unknown_formats ignore loads it unchecked", tool: "unknown_formats: ignore\n    schema: {properties: {e: {type: string, format: idn-email}}}",
			args: map[string]any{"e": "not checked"}},
		{name: "unknown_formats takes two values", tool: "unknown_formats: warn\n    schema: true",
			wantErr: []string{"tools[0].unknown_formats", `unknown mode "warn"; expected refuse or ignore`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "tools:\n  - name: t\n    match: {path: /s}\n    " + tt.tool + "\n"
			var cfg Config
			if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
				t.Fatalf("yaml: %v", err)
			}
			err := cfg.Validate(t.TempDir())
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("loaded, want an error containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			vs := cfg.Compiled[0].Schema.Validate(tt.args)
			if (vs != nil) != tt.refused {
				t.Errorf("Validate(%v) = %+v, want refused=%v", tt.args, vs, tt.refused)
			}
		})
	}
}
