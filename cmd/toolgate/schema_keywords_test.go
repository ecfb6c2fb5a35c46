package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policies"
)

// TestSchemaKeywordErrors runs `toolgate run` and `toolgate policy check`
// on configurations whose schemas misspell a keyword: each must stop with
// FILE:LINE of the marked line (the keyword's own line in an inline
// schema, the schema_file line for a file, then the file's own line of
// the keyword), the field, the keyword's JSON pointer and the keyword it
// most likely means.
func TestSchemaKeywordErrors(t *testing.T) {
	const head = "admin:\n  listen: \"off\"\ntools:\n"
	tests := []struct {
		name  string
		yaml  string            // the tools; marker ends the line the error names
		files map[string]string // schema files beside it
		field string
		want  []string
	}{
		{
			name: "maxium",
			yaml: `  - name: calc
    match: {path: /calc}
    schema:
      type: object
      properties:
        n: {type: integer, maxium: 10} # <-
`,
			field: "tools[0].schema",
			want: []string{`schema for tool "calc": at /properties/n/maxium: unknown keyword "maxium" (did you mean "maximum"?): toolgate would not check it`,
				"unknown_keywords: ignore"},
		},
		{
			name: "minLenght",
			yaml: `  - name: calc
    match: {path: /calc}
    schema:
      properties:
        s:
          type: string
          minLenght: 3 # <-
`,
			field: "tools[0].schema",
			want:  []string{`at /properties/s/minLenght: unknown keyword "minLenght" (did you mean "minLength"?)`},
		},
		{
			name: "requird",
			yaml: `  - name: calc
    match: {path: /calc}
    schema:
      properties:
        a: {type: string}
      requird: [a] # <-
`,
			field: "tools[0].schema",
			want:  []string{`at /requird: unknown keyword "requird" (did you mean "required"?)`},
		},
		{
			name: "in items",
			yaml: `  - name: tags
    match: {path: /tags}
    schema:
      properties:
        tags:
          type: array
          items:
            type: string
            maxLenght: 20 # <-
`,
			field: "tools[0].schema",
			want:  []string{`at /properties/tags/items/maxLenght: unknown keyword "maxLenght" (did you mean "maxLength"?)`},
		},
		{
			name: "in $defs",
			yaml: `  - name: calc
    match: {path: /calc}
    schema:
      $defs:
        Small:
          type: integer
          maximun: 9 # <-
      properties:
        n: {$ref: "#/$defs/Small"}
`,
			field: "tools[0].schema",
			want:  []string{`at /$defs/Small/maximun: unknown keyword "maximun" (did you mean "maximum"?)`},
		},
		{
			name: "nested properties",
			yaml: `  - name: edit
    match: {path: /edit}
    schema:
      properties:
        request:
          properties:
            insert:
              properties:
                text: {type: string, minLenth: 1} # <-
`,
			field: "tools[0].schema",
			want:  []string{`at /properties/request/properties/insert/properties/text/minLenth: unknown keyword "minLenth" (did you mean "minLength"?)`},
		},
		{
			name: "under allOf",
			yaml: `  - name: calc
    match: {path: /calc}
    schema:
      allOf:
        - properties: {n: {type: integer}}
        - requierd: [n] # <-
`,
			field: "tools[0].schema",
			want:  []string{`at /allOf/1/requierd: unknown keyword "requierd" (did you mean "required"?)`},
		},
		{
			name: "in a schema file",
			yaml: `  - name: calc
    match: {path: /calc}
    schema_file: calc.json # <-
`,
			files: map[string]string{"calc.json": "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"n\": {\"type\": \"integer\", \"maxium\": 10}\n  }\n}\n"},
			field: "tools[0].schema_file",
			want:  []string{`tools[0].schema_file: calc.json:4: schema for tool "calc": at /properties/n/maxium: unknown keyword "maxium" (did you mean "maximum"?)`},
		},
		{
			name: "in a file a $ref loads",
			yaml: `  - name: calc
    match: {path: /calc}
    schema_file: calc.json # <-
`,
			files: map[string]string{
				"calc.json":   `{"properties": {"n": {"$ref": "common.json#/$defs/Small"}}}`,
				"common.json": `{"$defs": {"Small": {"type": "integer", "exclusiveMaximun": 9}}}`,
			},
			field: "tools[0].schema_file",
			want:  []string{`common.json#/$defs/Small/exclusiveMaximun: unknown keyword "exclusiveMaximun" (did you mean "exclusiveMaximum"?)`},
		},
		{
			name: "in an MCP route's override",
			yaml: `  - name: issues
    match: {host: mcp.example.com, path: /mcp}
    protocol: mcp
    mcp:
      tools:
        create_issue:
          schema:
            properties:
              title: {type: string, maxLength: 80, patern: "^[A-Z]"} # <-
`,
			field: "tools[0].mcp.tools.create_issue.schema",
			want:  []string{`schema for tool "create_issue": at /properties/title/patern: unknown keyword "patern" (did you mean "pattern"?)`},
		},
		{
			name: "in an answer schema",
			yaml: `  - name: calc
    match: {path: /calc}
    answer:
      schema:
        properties:
          result: {type: number, minimum: 0, maximim: 100} # <-
`,
			field: "tools[0].answer.schema",
			want:  []string{`at /properties/result/maximim: unknown keyword "maximim" (did you mean "maximum"?)`},
		},
		{
			name: "unknown_keywords with an unknown mode",
			yaml: `  - name: calc
    match: {path: /calc}
    unknown_keywords: warn # <-
    schema: true
`,
			field: "tools[0].unknown_keywords",
			want:  []string{`unknown mode "warn"; expected refuse or ignore`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "toolgate.yaml")
			text := head + tc.yaml
			writeFile(t, path, text)
			for name, body := range tc.files {
				writeFile(t, filepath.Join(dir, name), body)
			}
			want := append([]string{fmt.Sprintf("%s:%d: %s: ", path, markedLine(t, text), tc.field)}, tc.want...)
			for _, cmd := range [][]string{{"run", "--config", path}, {"policy", "check", "--config", path}} {
				var stdout, stderr bytes.Buffer
				code := run(context.Background(), cmd, &stdout, &stderr)
				if code != exitError {
					t.Errorf("%s: exit code = %d, want %d; stderr:\n%s", cmd[0], code, exitError, stderr.String())
				}
				for _, frag := range want {
					if !strings.Contains(stderr.String(), frag) {
						t.Errorf("%s: stderr does not contain %q:\n%s", cmd[0], frag, stderr.String())
					}
				}
			}
		})
	}
}

// TestSchemaKeywordsOptOutAndExtensions checks, with `toolgate policy
// eval`, what loads: an "x-" keyword, spelt-right keywords next to it
// (which check the call), and, with unknown_keywords: ignore, a typo,
// which then checks nothing: {"n": 999, "s": ""} is allowed.
func TestSchemaKeywordsOptOutAndExtensions(t *testing.T) {
	const tmpl = `admin:
  listen: "off"
tools:
  - name: calc
    match: {path: /calc}
    %s
    schema:
      type: object
      x-owner: platform-team
      properties:
        n: {type: integer, %s: 10, x-ui: {widget: slider}}
        s: {type: string, %s: 3}
      %s: [s]
`
	args := `{"n": 999, "s": ""}`
	for _, tc := range []struct {
		name, mode string
		keywords   [3]string
		code       int
		want       string
	}{
		{"spelt right, with x- extensions", "", [3]string{"maximum", "minLength", "required"}, exitRefused, "/n"},
		{"typos with unknown_keywords: ignore", "unknown_keywords: ignore", [3]string{"maxium", "minLenght", "requird"}, exitOK, "allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "toolgate.yaml")
			writeFile(t, path, fmt.Sprintf(tmpl, tc.mode, tc.keywords[0], tc.keywords[1], tc.keywords[2]))
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"policy", "eval", "--config", path, "--tool", "calc", "--args", args}, &out, &errb)
			if code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Errorf("policy eval = %d (want %d), printed:\n%s%s", code, tc.code, out.String(), errb.String())
			}
		})
	}
}

// TestShippedSchemasUseKnownKeywords checks that the schemas toolgate ships
// (examples/, the demo's, the Kubernetes base's, and the inputSchemas of
// examples/mcp/tools-list.json) use only keywords their drafts define, and
// that the example configurations still load. The docs' configurations
// are loaded by TestDocExamples with the same default (refuse).
func TestShippedSchemasUseKnownKeywords(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, glob := range []string{"examples/schemas/*.json", "internal/demo/schemas/*.json", "deploy/k8s/base/schemas/*.json"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: no schemas (%v)", glob, err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := policies.CompileSchema(doc, policies.SchemaOptions{Tool: filepath.Base(f), Strict: true, Dir: filepath.Dir(f),
			UnknownKeywords: policies.KeywordsIgnore, Limits: policies.FileSchemaLimits})
		if err != nil {
			t.Errorf("%s: %v", f, err)
		} else if kw := s.UnknownKeywords(); len(kw) > 0 {
			t.Errorf("%s: unknown keywords %v", f, kw)
		}
	}
	var list struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", "mcp", "tools-list.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Result.Tools) == 0 {
		t.Fatalf("examples/mcp/tools-list.json: %v (%d tools)", err, len(list.Result.Tools))
	}
	for _, tool := range list.Result.Tools {
		if _, err := policies.CompileSchema(tool.InputSchema, policies.SchemaOptions{Tool: tool.Name, Strict: true}); err != nil {
			t.Errorf("examples/mcp/tools-list.json: %v", err)
		}
	}
	t.Setenv("PUBMED_API_KEY", "k")
	t.Setenv("DOCS_TOKEN", "t")
	for _, cfg := range []string{"examples/toolgate.yaml", "examples/mcp/toolgate.yaml", "examples/policies/cases/policies-only.yaml"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"policy", "check", "--config", filepath.Join(root, cfg)}, &out, &errb); code != exitOK {
			t.Errorf("policy check %s = %d:\n%s%s", cfg, code, out.String(), errb.String())
		}
	}
}

// TestMCPListedSchemaUnknownKeywords runs a real sidecar in front of a
// real MCP server (the official Go SDK) whose listed inputSchema misspells
// maxLength: the schema still checks the calls with its other keywords
// (strict closing included), judged by what the server's handler ran; the
// misspelt keyword checks nothing; /status lists it with a suggestion, and
// only the first call's event and one log line say so. A hostile listing
// (100 unknown keywords of 2,000 bytes each) is still checked by its
// bound, and what /status and the log show of it stays bounded.
func TestMCPListedSchemaUnknownKeywords(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ran []string // the titles the server's handler ran with
	s := mcp.NewServer(&mcp.Implementation{Name: "issues", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "create_issue", InputSchema: json.RawMessage(`{"type": "object",
		"properties": {"title": {"type": "string", "maxLenght": 5}, "priority": {"type": "integer", "maximum": 3}},
		"required": ["title"], "x-vendor": {"maxium": 1}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Title string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			mu.Lock()
			ran = append(ran, args.Title)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created"}}}, nil
		})
	// A hostile listing: 100 unknown keywords with 2,000-byte names, beside
	// a bound that still checks.
	flood := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "maximum": 3}}}
	for i := range 100 {
		flood[fmt.Sprintf("%04d%s", i, strings.Repeat("k", 2000))] = i
	}
	floodDoc, _ := json.Marshal(flood)
	s.AddTool(&mcp.Tool{Name: "flood", InputSchema: json.RawMessage(floodDoc)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			ran = append(ran, "flood "+string(req.Params.Arguments))
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)

	dir := t.TempDir()
	r := startRun(t, dir, `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  file: {path: events.ndjson}
  queue: {flush_interval: 20ms}
tools:
  - name: issues
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
`)
	l := r.running(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.URL + "/mcp", HTTPClient: proxyClient(t, l.Forward)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		tool    string
		args    map[string]any
		refused bool
	}{
		{"create_issue", map[string]any{"title": "a title longer than five", "priority": 2}, false}, // maxLenght checks nothing
		{"create_issue", map[string]any{"title": "short", "priority": 9}, true},                     // maximum still does
		{"create_issue", map[string]any{"title": "short", "prioity": 1}, true},                      // strict closing still does
		{"create_issue", map[string]any{"priority": 1}, true},                                       // required still does
		{"create_issue", map[string]any{"title": "again", "priority": 1}, false},
		{"flood", map[string]any{"n": 9}, true},
		{"flood", map[string]any{"n": 2}, false},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if res.IsError != c.refused {
			t.Errorf("%v: isError %v, want %v", c.args, res.IsError, c.refused)
		}
	}
	mu.Lock()
	got := slices.Clone(ran)
	mu.Unlock()
	if want := []string{"a title longer than five", "again", `flood {"n":2}`}; !slices.Equal(got, want) {
		t.Errorf("the server ran %q, want %q", got, want)
	}

	var st struct {
		Keywords []struct {
			Server, Tool string
			Keywords     []string
			More         int
		} `json:"mcp_schema_unknown_keywords"`
		Unusable []any `json:"mcp_unusable_schemas"`
	}
	a := do(t, directClient(t), "GET", "http://"+l.Admin+"/status", nil)
	if err := json.Unmarshal([]byte(a.body), &st); err != nil {
		t.Fatalf("/status: %v\n%s", err, a.body)
	}
	wantKw := `/properties/title/maxLenght: unknown keyword "maxLenght" (did you mean "maxLength"?)`
	if len(st.Keywords) != 2 || st.Keywords[0].Tool != "create_issue" || !strings.HasSuffix(st.Keywords[0].Server, "/mcp") ||
		!slices.Equal(st.Keywords[0].Keywords, []string{wantKw}) || len(st.Unusable) != 0 {
		t.Fatalf("/status: %.2000s", a.body)
	}
	if f := st.Keywords[1]; f.Tool != "flood" || len(f.Keywords) != 20 || f.More != 80 || len(a.body) > 20000 {
		t.Errorf("/status for the flood: %d keywords shown, %d more, /status %d bytes; want 20, 80, bounded", len(f.Keywords), f.More, len(a.body))
	}

	cs.Close()
	if code := r.stop(t); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
	}
	var noted []string
	for _, ev := range readEvents(t, filepath.Join(dir, "events.ndjson")) {
		if ev.RPCMethod == "tools/call" {
			noted = append(noted, ev.PolicyError)
		}
	}
	if want := []string{"schema: unknown_keywords", "", "", "", "", "schema: unknown_keywords", ""}; !slices.Equal(noted, want) {
		t.Errorf("the tools/call events' policy_error: %q, want %q", noted, want)
	}
	if n := strings.Count(r.stderr.String(), "the listed schema holds keywords its draft does not define"); n != 2 {
		t.Errorf("%d log lines about the keywords, want 2 (one per tool); stderr:\n%.3000s", n, r.stderr)
	}
	if strings.Contains(r.stderr.String(), strings.Repeat("k", 300)) {
		t.Errorf("the log holds a 2,000-byte keyword uncut")
	}
}
