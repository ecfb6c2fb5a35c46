package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
)

// TestSchemaSuggestCommand runs toolgate schema suggest on an events file:
// the evidence and a schema that compiles; --write puts the schema in a
// file; missing flags and a tool never observed are errors.
func TestSchemaSuggestCommand(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.ndjson")
	lines := `{"event_id":"1","tool":"search","arg_shape":"{\"t\":{\"object\":1},\"m\":{\"term\":{\"t\":{\"string\":1}},\"retmax\":{\"t\":{\"integer\":1}}}}"}
{"event_id":"2","tool":"search","arg_shape":"{\"t\":{\"object\":1},\"m\":{\"term\":{\"t\":{\"string\":1}}}}"}
{"event_id":"3","tool":"other"}
`
	if err := os.WriteFile(events, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"schema", "suggest", "--tool", "search", "--events", events}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"tool search: 2 observed calls", "retmax", "1/2", `"required": [
    "term"
  ]`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	schemaFile := filepath.Join(dir, "search.json")
	out.Reset()
	if code := run(context.Background(), []string{"schema", "suggest", "--tool", "search", "--events", events, "--write", schemaFile}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.CompileSchema(b, policies.SchemaOptions{Tool: "search", Strict: true}); err != nil {
		t.Errorf("written schema: %v", err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schema", "suggest", "--tool", "search"}, exitUsage, "--tool, and one of --events or --clickhouse, are required"},
		{[]string{"schema", "suggest", "--tool", "other", "--events", events}, exitError, `no observed calls of tool "other" (1 events without a shape)`},
		{[]string{"schema", "suggest", "--tool", "x", "--events", filepath.Join(dir, "none")}, exitError, "no such file"},
	} {
		errb.Reset()
		if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
