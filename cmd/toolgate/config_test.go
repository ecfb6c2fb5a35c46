package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/admin"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
)

// marker ends the line a configuration error must point at, in the YAML
// texts below; it is a YAML comment, so it changes nothing else.
const marker = "# <-"

// markedLine returns the 1-based number of the line holding marker.
func markedLine(t testing.TB, text string) int {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, marker) {
			return i + 1
		}
	}
	t.Fatalf("no %q marker in\n%s", marker, text)
	return 0
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// unsetVar is an environment variable the tests make sure is not set.
const unsetVar = "TOOLGATE_TEST_SURELY_UNSET"

// TestConfigErrors runs `toolgate run` on broken configurations: each must
// exit 1 with FILE:LINE of the marked line and the field path on stderr, and
// start nothing (no "toolgate running", no events file, no listener).
func TestConfigErrors(t *testing.T) {
	t.Setenv(unsetVar, "")
	os.Unsetenv(unsetVar) // t.Setenv restores the original state afterwards

	// PORT is replaced by a port that was free a moment ago.
	port := freePort(t)

	tests := []struct {
		name  string
		yaml  string            // the configuration; marker ends the line the error names
		files map[string]string // more files beside it, such as schemas
		field string            // the field path the error must name
		want  []string          // more fragments the message must hold
		bug   string            // a known bug: failed checks skip rather than fail
	}{
		{
			name: "unknown key at top level",
			yaml: `listen:
  forward: 127.0.0.1:0
lisen: # <-
  forward: 127.0.0.1:0
`,
			field: "lisen",
			want:  []string{"unknown field; did you mean listen?"},
		},
		{
			name: "unknown key near none",
			yaml: `listen:
  forward: 127.0.0.1:0
  upstream: x # <-
`,
			field: "listen.upstream",
			want:  []string{"unknown field; expected one of: forward, reverse, transparent, allow_non_loopback"},
		},
		{
			name: "unknown key deep inside a tool",
			yaml: `tools:
  - name: search
    match:
      host: 127.0.0.1
      pth: /esearch # <-
`,
			field: "tools[0].match.pth",
			want:  []string{"unknown field; did you mean path?"},
		},
		{
			name: "wrong type: integer",
			yaml: `listen:
  forward: 127.0.0.1:0
max_body_bytes: lots # <-
`,
			field: "max_body_bytes",
			want:  []string{"expected an integer, got a string"},
		},
		{
			name: "wrong type: duration",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    timeout: soon # <-
`,
			field: "tools[0].timeout",
			want:  []string{"expected a duration"},
		},
		{
			name: "YAML syntax error",
			yaml: `listen:
  forward: 127.0.0.1:0
unmatched: pass: deny # <-
`,
			want: []string{"mapping values are not allowed"},
		},
		{
			name: "a key indented one space short",
			yaml: `listen:
  forward: 127.0.0.1:0
tools:
  - name: search
    match:
      host: 127.0.0.1
      path: /esearch
     method: GET # <-
`,
			want: []string{"did not find expected key; check this line's indentation against the lines above it"},
		},
		{
			name: "a top-level key indented",
			yaml: `listen:
  forward: 127.0.0.1:0

# Calls no tool names are refused.
 unmatched: deny # <-
`,
			want: []string{"did not find expected key; check this line's indentation"},
		},
		{
			name: "a tool's key at the list's level",
			yaml: `tools:
  - name: search
    match:
      host: 127.0.0.1
  timeout: 5s # <-
`,
			want: []string{"did not find expected '-' indicator; check this line's indentation"},
		},
		{
			name: "two YAML documents",
			yaml: `listen:
  forward: 127.0.0.1:0
--- # <-
unmatched: deny
`,
			want: []string{"more than one YAML document"},
		},
		{
			name: "two tools with the same name",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
  - name: search # <-
    match: {path: /esearch/v2}
`,
			field: "tools[1].name",
			want:  []string{`tool "search" is already defined by tools[0]`},
		},
		{
			name: "two tools matching exactly the same calls",
			yaml: `tools:
  - name: item
    match: {method: GET, path: "/v1/items/{id}"}
  - name: item_again
    match: {method: get, path: "/v1/items/{item_id}"} # <-
`,
			field: "tools[1].match",
			want:  []string{"matches exactly the same calls as tools[0] (item)"},
		},
		{
			name: "schema and schema_file both set",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    schema: {type: object}
    schema_file: search.json # <-
`,
			files: map[string]string{"search.json": `{"type": "object"}`},
			field: "tools[0].schema_file",
			want:  []string{"choose one"},
		},
		{
			name: "args json and form",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    args: [json, form] # <-
`,
			field: "tools[0].args",
			want:  []string{"json and form both read the body"},
		},
		{
			name: "unknown argument source",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    args:
      - query
      - body # <-
`,
			field: "tools[0].args[1]",
			want:  []string{`unknown source "body"`},
		},
		{
			name: "unknown envelope mode",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    envelope: sometimes # <-
`,
			field: "tools[0].envelope",
			want:  []string{`unknown mode "sometimes"`},
		},
		{
			name: "unknown unmatched mode",
			yaml: `listen:
  forward: 127.0.0.1:0
unmatched: maybe # <-
`,
			field: "unmatched",
			want:  []string{`unknown mode "maybe"; expected pass or deny`},
		},
		{
			name: "non-loopback forward listener",
			yaml: `listen:
  forward: 0.0.0.0:18080 # <-
`,
			field: "listen.forward",
			want:  []string{"not a loopback address", "allow_non_loopback"},
		},
		{
			name: "non-loopback reverse listener",
			yaml: `listen:
  forward: 127.0.0.1:0
  reverse:
    - upstream: http://127.0.0.1:9
      listen: 192.0.2.1:18081 # <-
`,
			field: "listen.reverse[0].listen",
			want:  []string{"not a loopback address"},
		},
		{
			name: "non-loopback admin listener",
			yaml: `listen:
  forward: 127.0.0.1:0
admin:
  listen: 0.0.0.0:18090 # <-
`,
			field: "admin.listen",
			want:  []string{"not a loopback address"},
		},
		{
			name: "pprof without the admin listener",
			yaml: `listen:
  forward: 127.0.0.1:0
admin:
  listen: "off"
  pprof: true # <-
`,
			field: "admin.pprof",
			want:  []string{"needs the admin listener"},
		},
		{
			name: "pprof on a non-loopback admin listener",
			yaml: `listen:
  forward: 127.0.0.1:0
  allow_non_loopback: true
admin:
  listen: 0.0.0.0:18090
  pprof: true # <-
`,
			field: "admin.pprof",
			want:  []string{"loopback admin.listen only", "not a loopback address"},
		},
		{
			name: "reverse upstream that is not a URL",
			yaml: `listen:
  forward: 127.0.0.1:0
  reverse:
    - listen: 127.0.0.1:0
      upstream: eutils.ncbi.nlm.nih.gov # <-
`,
			field: "listen.reverse[0].upstream",
			want:  []string{"absolute http or https URL"},
		},
		{
			name: "admin on the forward listener's address",
			yaml: `listen:
  forward: 127.0.0.1:PORT
admin:
  listen: 127.0.0.1:PORT # <-
`,
			field: "admin.listen",
			want:  []string{"already used by listen.forward"},
		},
		{
			name: "invalid tool name",
			yaml: `tools:
  - name: PubMed Search # <-
    match: {path: /esearch}
`,
			field: "tools[0].name",
			want:  []string{"not a valid tool name"},
		},
		{
			name: "bad path template",
			yaml: `tools:
  - name: item
    match:
      path: "/v1/items/{id" # <-
`,
			field: "tools[0].match.path",
			want:  []string{"unbalanced braces"},
		},
		{
			name: "missing environment variable in inject_headers",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    inject_headers:
      Accept: application/json
      X-Api-Key: ${` + unsetVar + `} # <-
`,
			field: "tools[0].inject_headers.X-Api-Key",
			want:  []string{"environment variable " + unsetVar + " is not set"},
		},
		{
			name: "inject_headers without match.host",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    inject_headers: # <-
      X-Api-Key: k
`,
			field: "tools[0].inject_headers",
			want:  []string{"needs match.host", "tool's own origin"},
		},
		{
			name: "template literal not canonical",
			yaml: `tools:
  - name: search
    match:
      path: /v1/%74ools # <-
`,
			field: "tools[0].match.path",
			want:  []string{"not in canonical form"},
		},
		{
			name: "hosts names no tool host",
			yaml: `tools:
  - name: search
    match: {host: api.example.com, path: /esearch}
hosts:
  - host: other.example.com # <-
    unmatched: pass
`,
			field: "hosts[0].host",
			want:  []string{"no tool's match.host names other.example.com"},
		},
		{
			name: "hosts unknown mode",
			yaml: `tools:
  - name: search
    match: {host: api.example.com, path: /esearch}
hosts:
  - host: api.example.com
    unmatched: open # <-
`,
			field: "hosts[0].unmatched",
			want:  []string{"expected deny, pass or dry_run"},
		},
		{
			name: "bad rule code",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    rules:
      - {status: 429, code: ratelimit} # <-
`,
			field: "tools[0].rules[0]",
			want:  []string{`rules[0]: unknown code "ratelimit"`},
		},
		{
			name: "negative queue capacity",
			yaml: `events:
  file:
    path: events.ndjson
  queue:
    batch_size: 10
    capacity: -1 # <-
`,
			field: "events.queue.capacity",
			want:  []string{"must not be negative"},
		},
		{
			name: "batch larger than the queue",
			yaml: `events:
  queue:
    capacity: 10
    batch_size: 100 # <-
`,
			field: "events.queue.batch_size",
			want:  []string{"must not exceed queue.capacity"},
		},
		{
			name: "spool segment above the spool's budget",
			yaml: `events:
  clickhouse:
    addr: [127.0.0.1:9000]
  spool:
    dir: spool
    max_bytes: 1000
    segment_bytes: 2000 # <-
`,
			field: "events.spool.segment_bytes",
			want:  []string{"must not exceed spool.max_bytes (1000), got 2000"},
		},
		{
			name: "negative ClickHouse write timeout",
			yaml: `events:
  clickhouse:
    addr: [127.0.0.1:9000]
    write_timeout: -1s # <-
`,
			field: "events.clickhouse.write_timeout",
			want:  []string{"must be positive, got -1s"},
		},
		{
			name: "ClickHouse database that is not a plain name",
			yaml: `events:
  clickhouse:
    addr: [127.0.0.1:9000]
    database: tool.gate # <-
`,
			field: "events.clickhouse.database",
			want:  []string{`"tool.gate" is not a plain database name`},
		},
		{
			name: "settle time above a minute",
			yaml: `reload:
  settle: 2m # <-
`,
			field: "reload.settle",
			want:  []string{"2m0s is outside 0 to 1m0s"},
		},
		{
			name: "negative events file size",
			yaml: `events:
  file:
    path: events.ndjson
    max_bytes: -1 # <-
`,
			field: "events.file.max_bytes",
			want:  []string{"must not be negative"},
		},
		{
			name: "schema file that is not a schema",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    schema_file: search.json # <-
`,
			files: map[string]string{"search.json": `{"type": "objekt"}`},
			field: "tools[0].schema_file",
			want:  []string{`schema for tool "search"`, "/type"},
		},
		{
			name: "schema with a format toolgate does not check",
			yaml: `tools:
  - name: signup
    match: {path: /signup}
    schema:
      properties:
        email: {type: string, format: idn-email} # <-
`,
			field: "tools[0].schema",
			want: []string{`schema for tool "signup": at /properties/email/format: unknown format "idn-email": toolgate would not check it; known formats: date, date-time,`,
				"unknown_formats: ignore"},
		},
		{
			name: "unknown_formats with an unknown mode",
			yaml: `tools:
  - name: signup
    match: {path: /signup}
    unknown_formats: warn # <-
    schema: true
`,
			field: "tools[0].unknown_formats",
			want:  []string{`unknown mode "warn"; expected refuse or ignore`},
		},
		{
			name: "schema file that is not JSON",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    schema_file: search.json # <-
`,
			files: map[string]string{"search.json": `{"type": "object",`},
			field: "tools[0].schema_file",
			want:  []string{"invalid JSON"},
		},
		{
			name: "schema file that does not exist",
			yaml: `tools:
  - name: search
    match: {path: /esearch}
    schema_file: nowhere.json # <-
`,
			field: "tools[0].schema_file",
			want:  []string{"nowhere.json"},
		},
		{
			name: "unknown protocol",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    protocol: grpc # <-
`,
			field: "tools[0].protocol",
			want:  []string{`unknown protocol "grpc"; expected http or mcp`},
		},
		{
			name: "mcp route with argument sources",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    protocol: mcp
    args: [json] # <-
`,
			field: "tools[0].args",
			want:  []string{"reads its arguments from tools/call"},
		},
		{
			name: "unknown mcp.unknown_tool mode",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    protocol: mcp
    mcp:
      unknown_tool: deny # <-
`,
			field: "tools[0].mcp.unknown_tool",
			want:  []string{`unknown mode "deny"; expected fetch or pass`},
		},
		{
			name: "unknown mcp.unchecked mode",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    protocol: mcp
    mcp:
      unchecked: deny # <-
`,
			field: "tools[0].mcp.unchecked",
			want:  []string{`unknown mode "deny"; expected pass or refuse`},
		},
		{
			name: "mcp.unchecked refuse with unknown_tool pass",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    protocol: mcp
    mcp:
      unknown_tool: pass
      unchecked: refuse # <-
`,
			field: "tools[0].mcp.unchecked",
			want:  []string{"use unknown_tool: fetch"},
		},
		{
			name: "mcp section on a plain route",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    mcp: # <-
      dry_run: true
`,
			field: "tools[0].mcp",
			want:  []string{"set only for protocol: mcp"},
		},
		{
			name: "mcp tool override schema that does not compile",
			yaml: `tools:
  - name: issues
    match: {path: /mcp}
    protocol: mcp
    mcp:
      tools:
        create_issue:
          schema: {type: objekt} # <-
`,
			field: "tools[0].mcp.tools.create_issue.schema",
			want:  []string{`schema for tool "create_issue"`, "/type"},
		},
		{
			name: "egress allow entry with host bits set",
			yaml: `listen:
  forward: 127.0.0.1:0
egress:
  allow:
    - 10.0.0.0/8
    - 10.0.0.1/8 # <-
`,
			field: "egress.allow[1]",
			want:  []string{"did you mean 10.0.0.0/8?"},
		},
		{
			name: "egress unknown mode",
			yaml: `listen:
  forward: 127.0.0.1:0
egress:
  mode: enforc # <-
`,
			field: "egress.mode",
			want:  []string{`unknown mode "enforc"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir) // relative defaults (the events file) land here too
			path := filepath.Join(dir, "toolgate.yaml")
			text := strings.ReplaceAll(tc.yaml, "PORT", port)
			writeFile(t, path, text)
			written := []string{"toolgate.yaml"}
			for name, body := range tc.files {
				writeFile(t, filepath.Join(dir, name), body)
				written = append(written, name)
			}

			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"run", "--config", path}, &stdout, &stderr)

			var problems []string
			if code != exitError {
				problems = append(problems, fmt.Sprintf("exit code = %d, want %d", code, exitError))
			}
			msg := stderr.String()
			want := append([]string{fmt.Sprintf("%s:%d: ", path, markedLine(t, text))}, tc.want...)
			if tc.field != "" {
				want = append(want, tc.field)
			}
			for _, frag := range want {
				if !strings.Contains(msg, frag) {
					problems = append(problems, fmt.Sprintf("stderr does not contain %q:\n%s", frag, msg))
				}
			}
			if strings.Contains(msg, "toolgate running") {
				problems = append(problems, "the sidecar started: stderr has \"toolgate running\"")
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !slices.Contains(written, e.Name()) {
					problems = append(problems, fmt.Sprintf("%s appeared: something started", e.Name()))
				}
			}
			report(t, tc.bug, problems)
		})
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free when asked.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// examplePath is the documented example configuration.
var examplePath = filepath.Join("..", "..", "examples", "toolgate.yaml")

// TestExampleConfig checks that examples/toolgate.yaml, the documented
// example, loads cleanly when its secrets are in the environment, and that
// a missing secret stops it, naming the variable, the file and the line.
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	lineOfText := func(s string) int {
		for i, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, s) {
				return i + 1
			}
		}
		t.Fatalf("%s does not contain %q", examplePath, s)
		return 0
	}
	tests := []struct {
		name      string
		unset     []string // of PUBMED_API_KEY and DOCS_TOKEN, which are otherwise set
		wantField string   // "" when the file must load
		wantLine  int
		wantVar   string
	}{
		{name: "secrets set"},
		{
			name:      "PUBMED_API_KEY missing",
			unset:     []string{"PUBMED_API_KEY"},
			wantField: "tools[0].inject_headers.X-Api-Key",
			wantLine:  lineOfText("${PUBMED_API_KEY}"),
			wantVar:   "PUBMED_API_KEY",
		},
		{
			name:      "DOCS_TOKEN missing",
			unset:     []string{"DOCS_TOKEN"},
			wantField: "tools[3].inject_headers.Authorization",
			wantLine:  lineOfText("${DOCS_TOKEN}"),
			wantVar:   "DOCS_TOKEN",
		},
		{
			name:      "both missing: the first is named",
			unset:     []string{"PUBMED_API_KEY", "DOCS_TOKEN"},
			wantField: "tools[0].inject_headers.X-Api-Key",
			wantLine:  lineOfText("${PUBMED_API_KEY}"),
			wantVar:   "PUBMED_API_KEY",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PUBMED_API_KEY", "pubmed-key")
			t.Setenv("DOCS_TOKEN", "docs-token")
			for _, k := range tc.unset {
				os.Unsetenv(k)
			}
			lc, err := config.Load(examplePath)
			if tc.wantField != "" {
				if err == nil {
					t.Fatalf("config.Load succeeded without %s", tc.wantVar)
				}
				msg := err.Error()
				for _, frag := range []string{
					fmt.Sprintf("%s:%d: ", examplePath, tc.wantLine),
					tc.wantField,
					"environment variable " + tc.wantVar + " is not set",
				} {
					if !strings.Contains(msg, frag) {
						t.Errorf("error %q does not contain %q", msg, frag)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("config.Load(%s): %v", examplePath, err)
			}
			var tools []string
			for _, tool := range lc.Tools {
				tools = append(tools, tool.Name)
			}
			host, _ := os.Hostname()
			checks := []struct {
				what      string
				got, want any
			}{
				{"tools", strings.Join(tools, ","), "pubmed_search,structure_lookup,drug_targets,docs_edit,notes_create"},
				{"listen.forward", lc.Listen.Forward, "127.0.0.1:18080"},
				{"reverse listeners", len(lc.Listen.Reverse), 2},
				{"admin.listen", lc.Admin.Listen, "127.0.0.1:18090"},
				{"unmatched", lc.Unmatched, "pass"},
				{"events.sidecar", lc.Events.Sidecar, host},
				{"events.queue.capacity", lc.Events.Queue.Capacity, 65536},
				{"reload.settle", lc.Reload.Settle, reload.DefaultSettle},
				{"events.file.path", lc.Events.File.Path, filepath.Join(filepath.Dir(examplePath), "toolgate-events.ndjson")},
				{"version length", len(lc.Version), 12},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

// FuzzParseConfig feeds config.Parse arbitrary bytes: it must never panic,
// an error must name the file first, and a configuration it accepts must
// have its defaults applied.
func FuzzParseConfig(f *testing.F) {
	// The example's secrets, so its seeds get past inject_headers.
	f.Setenv("PUBMED_API_KEY", "pubmed-key")
	f.Setenv("DOCS_TOKEN", "docs-token")
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	demoConfig, err := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "toolgate.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	// "fuzz.yaml" lives in this folder, so relative schema files resolve
	// here; these variants point them back at the real schemas so that the
	// fuzzer reaches past schema loading. The originals stay seeds too.
	f.Add(example)
	f.Add(bytes.ReplaceAll(example, []byte("schema_file: schemas/"), []byte("schema_file: ../../examples/schemas/")))
	f.Add(demoConfig)
	demoFixed := bytes.ReplaceAll(demoConfig, []byte("schema_file: schemas/"), []byte("schema_file: ../../internal/demo/schemas/"))
	demoFixed = bytes.ReplaceAll(demoFixed, []byte("UPSTREAM_URL"), []byte("http://127.0.0.1:9"))
	demoFixed = bytes.ReplaceAll(demoFixed, []byte("EVENTS_PATH"), []byte("events.ndjson"))
	f.Add(demoFixed)
	for _, s := range []string{
		"",
		"---\n",
		"{}\n",
		"[]\n",
		"listen: [\n",
		"listen:\n  forward: 127.0.0.1:0\n---\nunmatched: deny\n",
		"max_body_bytes: lots\n",
		"tools:\n  - name: a\n    match: {path: /x}\n  - name: a\n    match: {path: /y}\n",
		"tools:\n  - name: a\n    match: {path: \"/x/{id\"}\n",
		"tools:\n  - name: a\n    match: {path: /x}\n    schema: {type: object, properties: {a: {type: integer}}}\n    rules:\n      - {status: 999, code: nope}\n",
		"tools:\n  - name: a\n    match: {path: /x}\n    inject_headers: {X-K: \"${" + unsetVar + "}\"}\n",
		"events:\n  queue:\n    capacity: -1\n",
		"admin:\n  listen: 0.0.0.0:1\n",
		"a: &a [*a, *a]\n",
		"listen: &l {forward: 127.0.0.1:0}\nadmin: *l\n",
		"tools:\n  - name: a\n    match: {path: /x}\nbudgets:\n  limits:\n    - {name: s, per: [session, tool], tools: [a], calls: 3, cost: 2.5, window: 1m}\n  costs:\n    a: {cost: 0.5, header: X-Cost}\n  loops: {max_repeats: 2, window: 10s}\n  upstreams:\n    - {host: \"api.example.org:8443\", rate: 0.5, burst: 2, max_wait: 1s, max_backoff: 1m}\n  max_keys: 64\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lc, err := config.Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Errorf("error does not start with the file name: %q", err)
			}
			if lc != nil {
				t.Errorf("config.Parse returned a config with the error %q", err)
			}
			return
		}
		if lc == nil {
			t.Fatal("config.Parse returned neither a config nor an error")
		}
		if lc.Path != "fuzz.yaml" || len(lc.Version) != 12 || lc.Snapshot.Version != lc.Version {
			t.Errorf("path, version, snapshot version = %q, %q, %q; want fuzz.yaml and a 12-digit hash in both", lc.Path, lc.Version, lc.Snapshot.Version)
		}
		if lc.Admin.Listen == "" || lc.Listen.Forward == "" || lc.Events.File.Path == "" {
			t.Errorf("defaults not applied: admin %q, forward %q, events file %q", lc.Admin.Listen, lc.Listen.Forward, lc.Events.File.Path)
		}
		if lc.Unmatched != "pass" && lc.Unmatched != "deny" {
			t.Errorf("unmatched = %q, want pass or deny", lc.Unmatched)
		}
	})
}

// TestParseConfigEventsPath checks where the events file goes: a relative
// path resolves beside the configuration file, as the example documents.
func TestParseConfigEventsPath(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(t.TempDir(), "abs.ndjson")
	tests := []struct {
		name string
		yaml string
		want string
		bug  string
	}{
		{"relative", "events: {file: {path: logs/events.ndjson}}\n", filepath.Join(dir, "logs", "events.ndjson"), ""},
		{"absolute", fmt.Sprintf("events: {file: {path: %q}}\n", abs), abs, ""},
		{
			"default", "listen: {forward: 127.0.0.1:0}\n", filepath.Join(dir, "toolgate-events.ndjson"),
			"config.go:108 joins only an explicit relative path with the config's folder; the default " +
				"(sink.DefaultFilePath, applied later by FileConfig.Validate) stays relative to the working directory, " +
				"so deleting 'path: toolgate-events.ndjson' from the example moves the file",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lc, err := config.Parse(filepath.Join(dir, "toolgate.yaml"), []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var problems []string
			if lc.Events.File.Path != tc.want {
				problems = append(problems, fmt.Sprintf("events file = %q, want %q", lc.Events.File.Path, tc.want))
			}
			report(t, tc.bug, problems)
		})
	}
}

// TestParseConfigAdminListen checks the admin address the way the proxy's
// listeners are checked.
func TestParseConfigAdminListen(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    string // the address kept, when it is accepted
		wantErr string // a fragment of the error, when it is not
		bug     string
	}{
		{name: "default", yaml: "listen: {forward: 127.0.0.1:0}\n", want: admin.DefaultListen},
		{name: "off", yaml: "admin: {listen: \"off\"}\n", want: "off"},
		{name: "localhost", yaml: "admin: {listen: \"localhost:0\"}\n", want: "localhost:0"},
		{name: "IPv6 loopback", yaml: "admin: {listen: \"[::1]:0\"}\n", want: "[::1]:0"},
		{name: "wide", yaml: "admin: {listen: \"0.0.0.0:18090\"}\n", wantErr: "admin.listen: 0.0.0.0 is not a loopback address"},
		{name: "wide, allowed", yaml: "listen: {allow_non_loopback: true}\nadmin: {listen: \"0.0.0.0:18090\"}\n", want: "0.0.0.0:18090"},
		{name: "no port", yaml: "admin: {listen: \"127.0.0.1\"}\n", wantErr: "admin.listen: not a host:port address"},
		{
			name: "empty port", yaml: "admin: {listen: \"127.0.0.1:\"}\n", wantErr: "admin.listen",
			bug: "checkLoopback (config.go:130) does not reject an empty port as proxy's checkListen does " +
				"('missing port'), so admin.listen: \"127.0.0.1:\" binds a random port",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lc, err := config.Parse("toolgate.yaml", []byte(tc.yaml))
			var problems []string
			switch {
			case tc.wantErr != "" && err == nil:
				problems = append(problems, fmt.Sprintf("accepted admin.listen %q, want an error containing %q", lc.Admin.Listen, tc.wantErr))
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				problems = append(problems, fmt.Sprintf("error %q does not contain %q", err, tc.wantErr))
			case tc.wantErr == "" && err != nil:
				problems = append(problems, fmt.Sprintf("error %q, want admin.listen %q", err, tc.want))
			case tc.wantErr == "" && lc.Admin.Listen != tc.want:
				problems = append(problems, fmt.Sprintf("admin.listen = %q, want %q", lc.Admin.Listen, tc.want))
			}
			report(t, tc.bug, problems)
		})
	}
}

// TestConfigVersionCoversSchemas checks the version recorded in every event
// changes when a schema file changes, not only when the config file does.
func TestConfigVersionCoversSchemas(t *testing.T) {
	dir := t.TempDir()
	cfg := "listen: {forward: 127.0.0.1:0}\nadmin: {listen: 127.0.0.1:0}\ntools:\n  - name: t\n    match: {path: /x}\n    schema_file: s.json\n"
	writeFile(t, filepath.Join(dir, "toolgate.yaml"), cfg)
	versions := map[string]bool{}
	for _, schema := range []string{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"b":{"type":"string"}}}`} {
		writeFile(t, filepath.Join(dir, "s.json"), schema)
		lc, err := config.Load(filepath.Join(dir, "toolgate.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		versions[lc.Version] = true
	}
	if len(versions) != 2 {
		t.Errorf("two schemas gave versions %v; a schema change must change the version", versions)
	}
}
