package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/opacli"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/sink"
)

// asToolgateEnv, set to 1, makes the test binary behave as the toolgate
// binary (see TestMain): the doc test runs the docs' shell commands with a
// link named toolgate, pointing at the test binary, first on their PATH, so
// no separate build is needed.
const asToolgateEnv = "TOOLGATE_TEST_AS_BINARY"

// TestMain runs the tests, or, with asToolgateEnv set, is `toolgate` as
// main is. Tests that neither stop nor restart ClickHouse share one server
// (chtest.Shared), each with a database of its own; chtest.Main stops it
// when the tests are done. The toolgate binary the process tests built
// (toolgateBinary) is removed then too.
func TestMain(m *testing.M) {
	if os.Getenv(asToolgateEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	code := chtest.Main(m)
	removeToolgateBinary()
	os.Exit(code)
}

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file string // relative to the repository, such as docs/config.md
	line int    // of the opening fence
	end  int    // of the closing fence
	lang string // the fence's info string: sh, yaml, json, console, ...
	text string // the lines between the fences, indentation of the fence removed
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// first is the block's first non-blank line, trimmed.
func (b docBlock) first() string {
	for _, l := range strings.Split(b.text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

var fenceRE = regexp.MustCompile("^(\\s*)```([A-Za-z0-9_+-]*)\\s*$")

// docBlocks reads the fenced blocks of a Markdown file. A fence that does
// not close is an error: the rest of the page would render as code.
func docBlocks(t *testing.T, root, file string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") && strings.Count(lines[i], "```") == 1 {
				t.Errorf("%s:%d: a fence with text after it: %q", file, i+1, lines[i])
			}
			continue
		}
		blk := docBlock{file: file, line: i + 1, lang: m[2]}
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
				t.Errorf("%s:%d: a fence with text after it does not close the block: %q", file, i+1, lines[i])
			}
			body = append(body, strings.TrimPrefix(lines[i], m[1]))
		}
		if !closed {
			t.Errorf("%s: the fence never closes", blk)
		}
		blk.text = strings.Join(body, "\n")
		blk.end = i + 1
		out = append(out, blk)
	}
	return out
}

// docSkips are the fenced blocks the doc test does not run, each with why.
// A block is named by its file and the start of its first line. An entry
// that matches no block fails the test, so this list cannot outlive its
// blocks.
var docSkips = []struct{ file, first, why string }{
	{"README.md", "go install github.com/toolgate/toolgate/cmd/toolgate@latest", "fetches the module over the network; TestReadmeInstall checks the line against go.mod"},
	{"README.md", "git clone https://github.com/toolgate/toolgate", "clones over the network and builds; TestReadmeInstall checks the lines against go.mod and the Makefile"},
	{"README.md", "make demo", "make demo is TestDemo; make test is the whole suite"},
	{"README.md", "toolgate run --config toolgate.yaml", "a sidecar on fixed ports until Ctrl-C; docs/quickstart.md's `toolgate run` is run (ports from the kernel)"},
	{"docs/config.md", "toolgate run --config toolgate.yaml", "as README's `toolgate run`"},
	{"docs/config.md", "tools:\n  - name: issues_mcp", "an MCP route whose policy and schema file are not shipped; MCP routes are tested in proxy's MCP tests"},
	{"docs/dashboard.md", "toolgate dashboard --config", "needs a ClickHouse server; the dashboard's tests start one"},
	{"docs/dashboard.md", "curl -s 'http://127.0.0.1:18091/api/tools", "needs a running dashboard over ClickHouse (sink/dashboard tests)"},
	{"docs/dashboard.md", "<?xml", "ClickHouse server configuration, applied by a DBA"},
	{"docs/dashboard.md", "CREATE USER", "ClickHouse DDL for a DBA"},
	{"docs/deploy.md", "# 1. The CA", "kubectl against a cluster; the manifests are checked by deploy/k8s's test"},
	{"docs/deploy.md", "toolgate ca init --dir ca-2026", "kubectl against a cluster"},
	{"docs/deploy.md", "initContainers:", "a Kubernetes pod fragment, not a toolgate configuration"},
	{"docs/deploy.md", "docker build", "needs docker"},
	{"docs/deploy.md", "images:", "a kustomization fragment"},
	{"docs/https.md", "toolgate ca init --dir /etc/toolgate/ca", "writes to /etc; the same command on a relative folder runs in docs/quickstart.md"},
	{"docs/https.md", "# in the pod's network namespace", "needs root and a network namespace (internal/netns's test runs the script)"},
	{"docs/envelope.md", "{\"ok\":false,\"data\":null,\"error\":{\"code\":\"rate_limit\"", "an envelope abbreviated with ... (not JSON)"},
	{"docs/policies.md", "package mcp.issues", "an MCP policy shown on its own; parsed below is every other Rego example"},
	{"docs/wasm-abi.md", "package main", "a Go guest module: building it for wasip1 takes minutes; wasm/testdata/go/main.go is the built one"},
	{"docs/wasm-abi.md", "GOOS=wasip1", "as the Go guest above"},
	{"docs/wasm-abi.md", "// Cargo.toml", "Rust is not installed here"},
	{"docs/wasm-abi.md", "cargo build", "Rust is not installed here"},
	{"docs/wasm-abi.md", "clang --target=wasm32", "clang is not installed here"},
	{"docs/queries.md", "", "every query is run against a real ClickHouse by sink's query tests"},
	{"docs/scale.md", "<yandex>", "ClickHouse server configuration, applied by a DBA; scripts/clickhouse.sh cluster-config writes the test cluster's"},
	{"docs/scale.md", "go test -run '^$' -bench", "a benchmark on a ClickHouse cluster, minutes"},
	{"docs/scale.md", "go test -race -count=1 -run 'TestCluster'", "the cluster tests themselves, minutes (part of the suite)"},
	{"docs/performance.md", "", "benchmarks (make bench), minutes each; owned by the performance page"},
	{"docs/architecture.md", "", "diagrams and listings"},
	{"docs/security.md", "TestAdversarial", "a test's summary line, asserted by that test"},
}

// docPorts are the fixed ports the docs use; the doc test replaces each
// with a port the kernel picked, since the machine is shared.
var docPorts = []string{"8000", "8443", "18080", "18081", "18082", "18090", "18300", "18301", "18302", docMCPPort}

// docReport counts what the doc test did.
type docReport struct {
	ran, failed, skipped, notExamples int
}

// TestDocExamples extracts the fenced blocks of README.md and docs/*.md and
// runs them: configurations are loaded by the real loader (a fragment of a
// tool is loaded inside a tool), JSON examples are decoded strictly into the
// envelope or the event they show, Rego examples are parsed, shell commands
// run with this package's toolgate, and console blocks ($ command, then its
// output) have their output checked. docs/quickstart.md runs as one session
// in order: its services, the sidecar, curl, Python and Node; so does
// README.md's first screen (readmeSession). A block outside a session
// leaves no process running. Untagged blocks are diagrams, listings and
// sample logs; they are counted, not run.
func TestDocExamples(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	md, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, f := range md {
		files = append(files, filepath.Join("docs", filepath.Base(f)))
	}
	// The secrets the example configuration names, for configurations the
	// test loads in process; the shell commands get them from env.env.
	t.Setenv("PUBMED_API_KEY", "doc-test-key")
	t.Setenv("DOCS_TOKEN", "doc-test-token")
	t.Setenv("PUBMED_KEY", "doc-test-key")   // config.md's inject_headers example
	t.Setenv("OTLP_TOKEN", "doc-test-token") // tracing.md's headers example
	env := newDocEnv(t, root)
	var rep docReport
	// Sessions, mostly waiting on their processes, run beside the other
	// blocks and are counted once they end (below).
	type sessionResult struct {
		ran    int
		failed bool
	}
	var sessions []*sessionResult
	session := func(name string, blocks []docBlock) {
		res := &sessionResult{}
		sessions = append(sessions, res)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res.ran = env.runSession(t, blocks)
			res.failed = t.Failed()
		})
	}
	used := make([]bool, len(docSkips))
	for _, f := range files {
		blocks := docBlocks(t, root, f)
		if f == filepath.Join("docs", "quickstart.md") {
			session("docs/quickstart.md", blocks)
			continue
		}
		if f == "README.md" {
			var first []docBlock
			first, blocks = sectionBlocks(t, root, f, blocks, readmeSession)
			if len(first) == 0 {
				t.Errorf("README.md has no blocks under %q", readmeSession)
			}
			session("README.md first screen", first)
		}
		for bi, b := range blocks {
			if i := skipOf(b); i >= 0 {
				used[i] = true
				rep.skipped++
				continue
			}
			if b.lang == "" {
				rep.notExamples++
				continue
			}
			rep.ran++
			ok := t.Run(b.String(), func(t *testing.T) {
				switch b.lang {
				case "yaml":
					env.loadYAML(t, b, wantedError(blocks, bi))
				case "json":
					checkJSONExample(t, b)
				case "rego":
					if _, err := ast.ParseModuleWithOpts(b.String(), b.text, ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
						t.Errorf("%s: Rego does not parse: %v", b, err)
					}
				case "sh":
					env.runShell(t, b)
				case "console":
					env.runConsole(t, b)
				default:
					t.Errorf("%s: no runner for a %q block; add one or a docSkips entry saying why", b, b.lang)
				}
			})
			if !ok {
				rep.failed++
			}
		}
	}
	for i, s := range docSkips {
		if !used[i] && s.first != "" { // a whole file's entry may outlive the file's blocks
			t.Errorf("docSkips entry %s %q matches no block: remove it", s.file, s.first)
		}
	}
	t.Cleanup(func() { // after the sessions
		for _, s := range sessions {
			rep.ran += s.ran
			if s.failed {
				rep.failed++
			}
		}
		t.Logf("doc examples: %d run, %d failing; %d skipped (docSkips); %d untagged blocks (diagrams, listings, logs) not run", rep.ran, rep.failed, rep.skipped, rep.notExamples)
	})
}

// skipOf returns the docSkips entry for b, or -1.
func skipOf(b docBlock) int {
	for i, s := range docSkips {
		if filepath.ToSlash(b.file) == s.file && strings.HasPrefix(strings.TrimSpace(b.text), s.first) {
			return i
		}
	}
	return -1
}

// readmeSession is the heading of README.md's section that runs as one
// session, as docs/quickstart.md does: its configuration, the sidecar it
// starts and the call it refuses.
const readmeSession = "## In one screen"

// sectionBlocks splits blocks, of file, into those under the heading (up
// to the next heading of its level or above) and the others.
func sectionBlocks(t *testing.T, root, file string, blocks []docBlock, heading string) (in, out []docBlock) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	level, _, _ := strings.Cut(heading, " ")
	fenced := map[int]bool{} // lines of code blocks, where "# x" is no heading
	for _, blk := range blocks {
		for n := blk.line; n <= blk.end; n++ {
			fenced[n] = true
		}
	}
	start, end := 0, 0
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case fenced[i+1]:
		case start == 0 && l == heading:
			start = i + 1
		case start > 0 && end == 0 && strings.HasPrefix(l, "#") && len(l)-len(strings.TrimLeft(l, "#")) <= len(level) && strings.HasPrefix(strings.TrimLeft(l, "#"), " "):
			end = i + 1
		}
	}
	if start == 0 {
		t.Errorf("%s has no heading %q", file, heading)
		return nil, blocks
	}
	for _, blk := range blocks {
		if blk.line > start && (end == 0 || blk.line < end) {
			in = append(in, blk)
		} else {
			out = append(out, blk)
		}
	}
	return in, out
}

// docEnv is the folder the examples run in: the example schemas and
// policies under the names the docs use, an interception CA, and a bin
// folder whose toolgate is this test binary.
type docEnv struct {
	root, dir, bin string
	env            []string
	ports          map[string]string // doc port -> kernel-picked port
	// session says the blocks run as one reader's session, whose processes
	// run on from one block to the next (until the test ends). A block
	// outside a session must stop what it starts.
	session bool
}

func newDocEnv(t *testing.T, root string) *docEnv {
	t.Helper()
	e := &docEnv{root: root, dir: t.TempDir(), ports: map[string]string{}}
	e.bin = filepath.Join(e.dir, ".bin")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(e.bin, "toolgate")); err != nil {
		t.Fatal(err)
	}
	// docs/bundles.md builds and checks bundles with the real opa CLI.
	if err := os.Symlink(opacli.Binary(t), filepath.Join(e.bin, "opa")); err != nil {
		t.Fatal(err)
	}
	docCopyTree(t, filepath.Join(root, "examples"), filepath.Join(e.dir, "examples"))
	docCopyTree(t, filepath.Join(root, "examples", "schemas"), filepath.Join(e.dir, "schemas"))
	docCopyTree(t, filepath.Join(root, "examples", "policies"), filepath.Join(e.dir, "policies"))
	docCopyFile(t, filepath.Join(root, "wasm", "testdata", "allow.wasm"), filepath.Join(e.dir, "policies", "words.wasm"))
	docCopyFile(t, filepath.Join(root, "wasm", "testdata", "wat", "allow.wat"), filepath.Join(e.dir, "allow.wat"))
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"ca", "init", "--dir", filepath.Join(e.dir, "ca")}, &out, &errb); code != exitOK {
		t.Fatalf("ca init: %d: %s", code, errb.String())
	}
	docCopyFile(t, filepath.Join(e.dir, "ca", "ca.crt"), filepath.Join(e.dir, "corp-ca.pem"))
	// Events for the jq examples: the demo's.
	if code := run(context.Background(), []string{"demo", "--dir", filepath.Join(e.dir, ".demo")}, &out, &errb); code != exitOK {
		t.Fatalf("demo: %d: %s", code, errb.String())
	}
	docCopyFile(t, filepath.Join(e.dir, ".demo", "events.ndjson"), filepath.Join(e.dir, "events.ndjson"))
	for _, p := range docPorts {
		e.ports[p] = docFreePort(t)
	}
	startDocMCPServer(t, e.ports[docMCPPort])
	// The commands' environment: only what they need. Secrets the example
	// configuration names are set; no proxy variable leaks in from the
	// machine running the test.
	e.env = []string{
		"PATH=" + e.bin + string(os.PathListSeparator) + "/usr/local/bin:/usr/bin:/bin",
		"HOME=" + e.dir,
		"LANG=C.UTF-8",
		asToolgateEnv + "=1",
		"PUBMED_API_KEY=doc-test-key",
		"DOCS_TOKEN=doc-test-token",
		"GOCACHE=" + os.Getenv("GOCACHE"),
	}
	return e
}

// docFreePort returns a port the kernel had free a moment ago. Another
// process may take it before the example listens on it; that shows as the
// example failing to listen, which says so.
func docFreePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// rewritePorts replaces the docs' fixed ports, in host:port form, with the
// kernel-picked ones.
func (e *docEnv) rewritePorts(s string) string {
	for doc, real := range e.ports {
		s = strings.ReplaceAll(s, "127.0.0.1:"+doc, "127.0.0.1:"+real)
		s = strings.ReplaceAll(s, "localhost:"+doc, "localhost:"+real)
	}
	return s
}

// toolKeys are the keys of one tools entry: a block with only these at its
// top level is a fragment of a tool, loaded inside one.
var toolKeys = map[string]bool{
	"inject_headers": true, "inject_over_http": true, "rules": true, "schema": true, "schema_file": true,
	"args": true, "strict": true, "timeout": true, "envelope": true, "policy_mode": true,
	"fail_open": true, "unknown_formats": true, "unknown_keywords": true,
}

// wantedError is, for a configuration block followed closely (a sentence
// between them at most) by a one-line untagged block "toolgate:
// FILE.yaml:LINE: ...", the error the docs say
// loading it gives, from ":LINE" on; "" otherwise.
func wantedError(blocks []docBlock, i int) string {
	if blocks[i].lang != "yaml" || i+1 >= len(blocks) {
		return ""
	}
	next := blocks[i+1]
	if next.line-blocks[i].end > 4 || next.lang != "" || strings.Contains(next.text, "\n") || !strings.HasPrefix(next.text, "toolgate: ") {
		return ""
	}
	_, after, ok := strings.Cut(next.text, ".yaml")
	if !ok {
		return ""
	}
	return after
}

// loadYAML loads a configuration example with the real loader, in the
// example folder (so its schema and policy paths resolve). With wantErr,
// the load must fail with that error (from the file's ":LINE" on).
func (e *docEnv) loadYAML(t *testing.T, b docBlock, wantErr string) {
	t.Helper()
	if strings.HasPrefix(b.text, "config:") || strings.HasPrefix(b.text, "cases:") {
		e.runCaseFile(t, b)
		return
	}
	text := b.text
	var list []any
	if yaml.Unmarshal([]byte(text), &list) == nil && len(list) > 0 {
		// An entry of tools ("- name: ...").
		text = "tools:\n" + text
	}
	var top map[string]any
	if err := yaml.Unmarshal([]byte(text), &top); err != nil {
		t.Errorf("%s: not YAML: %v", b, err)
		return
	}
	fragment := len(top) > 0
	for k := range top {
		if !toolKeys[k] {
			fragment = false
		}
	}
	if fragment {
		// A tool's fragment ("rules:", "inject_headers:"), on an
		// https tool so injection is allowed.
		text = "tools:\n  - name: doc_tool\n    match: {host: api.example.org, path: /x}\n" + docIndent(text, "    ")
	}
	path := filepath.Join(e.dir, fmt.Sprintf("doc-%s-%d.yaml", strings.NewReplacer("/", "-", ".", "-").Replace(b.file), b.line))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	switch {
	case wantErr != "" && err == nil:
		t.Errorf("%s: the configuration loads; the docs say it fails with %q", b, wantErr)
	case wantErr != "" && !strings.HasSuffix(err.Error(), wantErr):
		t.Errorf("%s: the configuration fails with\n%v\nthe docs show\n...%s", b, err, wantErr)
	case wantErr == "" && err != nil:
		t.Errorf("%s: the configuration does not load: %v\n%s", b, err, text)
	}
}

// runCaseFile runs a case file example with `toolgate policy test`, from
// examples/policies/cases (where its config: path resolves).
func (e *docEnv) runCaseFile(t *testing.T, b docBlock) {
	t.Helper()
	path := filepath.Join(e.dir, "examples", "policies", "cases", fmt.Sprintf("doc-%d.cases.yaml", b.line))
	if err := os.WriteFile(path, []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"policy", "test", path}, &out, &errb); code != exitOK {
		t.Errorf("%s: policy test on the case file = %d:\n%s%s", b, code, out.String(), errb.String())
	}
}

func docIndent(s, by string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = by + l
		}
	}
	return strings.Join(lines, "\n")
}

// checkJSONExample decodes a JSON example (one value or several, one per
// line): an envelope into bucketing.Envelope and an event into sink.Event,
// each strictly (no field the type lacks), with known codes and classes;
// an event must show every field the event has.
func checkJSONExample(t *testing.T, b docBlock) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(b.text))
	dec.UseNumber()
	for n := 0; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			if n == 0 {
				t.Errorf("%s: empty JSON block", b)
			}
			return
		} else if err != nil {
			t.Errorf("%s: not JSON: %v", b, err)
			return
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		switch {
		case keys["event_id"] != nil:
			var ev sink.Event
			docStrict(t, b, raw, &ev)
			var missing []string
			for _, f := range reflect.VisibleFields(reflect.TypeOf(ev)) {
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if strings.Contains(opts, "omitempty") {
					continue // absent from the file when empty (arg_shape)
				}
				if name != "" && name != "-" && keys[name] == nil {
					missing = append(missing, name)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%s: an example event lacks %s", b, strings.Join(missing, ", "))
			}
			docCheckCode(t, b, ev.ErrorCode, ev.ErrorClass, true)
		case filepath.ToSlash(b.file) == "docs/bundles.md" && keys["policies"] != nil:
			// toolgate's settings in a bundle (docs/bundles.md).
			var st policies.BundleSettings
			docStrict(t, b, raw, &st)
		case keys["ok"] != nil && keys["error"] != nil:
			var env bucketing.Envelope
			docStrict(t, b, raw, &env)
			if env.Error != nil {
				docCheckCode(t, b, string(env.Error.Code), string(env.Error.Class), false)
			}
		}
	}
}

func docStrict(t *testing.T, b docBlock, raw []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Errorf("%s: does not decode as %T: %v", b, v, err)
	}
}

func docCheckCode(t *testing.T, b docBlock, code, class string, okAllowed bool) {
	t.Helper()
	codes := map[string]bool{"validation": true, "policy": true, "rate_limit": true, "auth": true, "upstream": true, "unknown": true}
	classes := map[string]bool{"user": true, "policy": true, "transient": true, "terminal": true}
	if okAllowed && code == "" && class == "" {
		return
	}
	if !codes[code] || !classes[class] {
		t.Errorf("%s: code %q, class %q: not the envelope's vocabulary", b, code, class)
	}
}

// shell runs script with bash in the example folder and returns its
// combined output. Its output goes to a file, not a pipe, so a process it
// leaves in the background (a sidecar, a service) does not hold it open;
// such processes are stopped when the test ends.
func (e *docEnv) shell(t *testing.T, b docBlock, script string) (string, error) {
	t.Helper()
	out, err := os.CreateTemp(e.dir, ".out-")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eo", "pipefail", "-c", script)
	cmd.Dir = e.dir
	cmd.Env = e.env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	runErr := cmd.Run()
	left := false
	if cmd.Process != nil {
		pgid := cmd.Process.Pid
		t.Cleanup(func() {
			// Stopped, and waited for: a sidecar writes its events on the
			// way out, into the folder the test's TempDir cleanup removes
			// next (which failed on a loaded machine with "directory not
			// empty" while it still wrote).
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			if groupAlive(pgid, 20*time.Second) {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				groupAlive(pgid, 5*time.Second)
			}
		})
		if !e.session && ctx.Err() == nil {
			left = groupAlive(pgid, 10*time.Second)
		}
	}
	b2, _ := os.ReadFile(out.Name())
	if ctx.Err() != nil {
		return string(b2), fmt.Errorf("%s: still running after 30s", b)
	}
	if runErr == nil && left {
		runErr = errors.New("the block ended and left a process running: stop what it starts (trap '... kill ...; wait' EXIT)")
	}
	return string(b2), runErr
}

// groupAlive reports whether a process of the process group pgid is still
// there after wait.
func groupAlive(pgid int, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
	}
}

func (e *docEnv) runShell(t *testing.T, b docBlock) {
	t.Helper()
	if out, err := e.shell(t, b, e.rewritePorts(b.text)); err != nil {
		t.Errorf("%s: %v\n%s\noutput:\n%s", b, err, b.text, out)
	}
}

// runConsole runs each "$ command" of a console block and checks that the
// lines shown after it appear in its output, in order; "..." in a shown
// line stands for any text.
func (e *docEnv) runConsole(t *testing.T, b docBlock) {
	t.Helper()
	type step struct {
		cmd  string
		want []string
	}
	var steps []step
	for _, l := range strings.Split(e.rewritePorts(b.text), "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, step{cmd: c})
			continue
		}
		if len(steps) == 0 {
			t.Errorf("%s: a console block must start with \"$ \"", b)
			return
		}
		if strings.TrimSpace(l) != "" {
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, strings.TrimRight(l, " \t"))
		}
	}
	for _, s := range steps {
		out, err := e.shell(t, b, s.cmd)
		if err != nil {
			t.Errorf("%s: $ %s: %v\noutput:\n%s", b, s.cmd, err, out)
			continue
		}
		if miss, ok := linesInOrder(out, s.want); !ok {
			t.Errorf("%s: $ %s\nthe doc shows %q, not found in order in the output:\n%s", b, s.cmd, miss, out)
		}
	}
}

// linesInOrder reports whether every want line matches a line of out, in
// order; it returns the first that does not.
func linesInOrder(out string, want []string) (string, bool) {
	got := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		for ; i < len(got) && !lineMatches(w, strings.TrimRight(got[i], " \t")); i++ {
		}
		if i == len(got) {
			return w, false
		}
		i++
	}
	return "", true
}

// lineMatches matches a shown line against an output line; "..." in the
// shown line stands for any text.
func lineMatches(pattern, line string) bool {
	parts := strings.Split(pattern, "...")
	if len(parts) == 1 {
		return pattern == line
	}
	if !strings.HasPrefix(line, parts[0]) {
		return false
	}
	rest := line[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		j := strings.Index(rest, p)
		if j < 0 {
			return false
		}
		rest = rest[j+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

// fileNameRE is a first line naming the file a block is: "# toolgate.yaml",
// "# search.py", "// search.mjs".
var fileNameRE = regexp.MustCompile(`^(?:#|//) ([A-Za-z0-9_.-]+\.(?:yaml|py|mjs|js))\b`)

// runSession runs blocks (docs/quickstart.md, README.md's first screen)
// in order, as a reader would in one terminal: a block whose first line
// names a file is written to that file (a configuration is then loaded by
// the real loader too), sh blocks run, console blocks run and have their
// output checked. Sessions run side by side, so each has its own folder
// and ports. It returns the number of blocks run.
func (e *docEnv) runSession(t *testing.T, blocks []docBlock) int {
	t.Helper()
	dir := t.TempDir()
	session := *e
	session.dir = dir
	session.session = true
	session.ports = make(map[string]string, len(e.ports))
	for doc, real := range e.ports {
		if doc != docMCPPort { // the doc test's one MCP server, shared
			real = docFreePort(t)
		}
		session.ports[doc] = real
	}
	n := 0
	for _, b := range blocks {
		if b.lang == "" {
			continue // a listing or a log line
		}
		n++
		text := session.rewritePorts(b.text)
		if m := fileNameRE.FindStringSubmatch(b.first()); m != nil {
			path := filepath.Join(dir, m[1])
			if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if b.lang == "yaml" {
				if _, err := config.Load(path); err != nil {
					t.Errorf("%s: %s does not load: %v", b, m[1], err)
				}
			}
			continue
		}
		switch b.lang {
		case "sh":
			session.runShell(t, b)
		case "console":
			session.runConsole(t, b)
		default:
			t.Errorf("%s: a %q block in the quick start neither names a file nor runs", b, b.lang)
		}
		if t.Failed() {
			t.Logf("the quick start stopped at %s", b)
			break
		}
	}
	return n
}

func docCopyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		docCopyFile(t, p, filepath.Join(dst, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func docCopyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDocConfigErrors checks the error messages docs/config.md shows, one
// per line as "toolgate: NAME.yaml:LINE: ...": each is what loading
// testdata/docerrors/NAME.yaml prints, line number included.
func TestDocConfigErrors(t *testing.T) {
	t.Parallel()
	// Messages whose configuration the page itself shows beside them,
	// checked by TestDocExamples.
	shownWithConfig := map[string]bool{"c.yaml": true}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lineRE := regexp.MustCompile(`^toolgate: ([a-z0-9]+\.yaml):`)
	n := 0
	for _, b := range docBlocks(t, root, filepath.Join("docs", "config.md")) {
		if b.lang != "" {
			continue
		}
		for _, line := range strings.Split(b.text, "\n") {
			m := lineRE.FindStringSubmatch(line)
			if m == nil || shownWithConfig[m[1]] {
				continue
			}
			n++
			dir := filepath.Join("testdata", "docerrors")
			_, err := config.Load(filepath.Join(dir, m[1]))
			if err == nil {
				t.Errorf("%s: %s loads; the page shows %q", b, m[1], line)
				continue
			}
			// As run from the folder holding the file, as the page does.
			if got := "toolgate: " + strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""); got != line {
				t.Errorf("%s: loading %s prints\n%s\nthe page shows\n%s", b, m[1], got, line)
			}
		}
	}
	if n < 30 {
		t.Errorf("checked %d messages; the page shows more than 30", n)
	}
	t.Logf("%d configuration error messages of docs/config.md checked", n)
}
