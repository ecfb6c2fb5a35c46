// Package policytest runs policies' tests for `toolgate policy test`:
// every policy's Rego unit tests, and case files, NAME.cases.yaml, that
// list calls and what the checks (the tool's schema, then its policies, in
// their configured modes) must decide for each. A case runs the checks the
// sidecar runs for a call, through a configuration loaded as `toolgate run`
// loads it, without sending anything. The package does not link the proxy:
// it declares what it needs from a loaded configuration (Config) and the
// command wires the proxy's evaluation in. Run prints one PASS or FAIL line per
// test and returns a Report; the command maps it to an exit code.
//
// A case file (decoding is strict: an unknown or misspelt key is an error
// naming the file and the line; fields left out of expect are not checked):
//
//	config: ../toolgate.yaml        # relative to this file; --config overrides;
//	                                # required when --config is not given
//	tools_list: tools-list.json     # optional: a recorded tools/list answer,
//	                                # relative to this file; every case's tool
//	                                # is then a tool of an MCP route
//	route: files_mcp                # optional: that MCP route (default: the
//	                                # configuration's only one)
//	cases:
//	  - name: retmax over the bound # required, unique in the file
//	    tool: pubmed_search         # required: a tool of the configuration
//	                                # (with a tools list: an MCP tool's name)
//	    tools_list: other.json      # optional: this case's list (and route:)
//	    arguments: {term: x, retmax: 500}   # default {}; numbers reach the
//	                                        # checks as json.Number, as from a JSON body
//	    headers: {X-Toolgate-Session: s-1}  # request headers (agent, session,
//	                                        # headers policies may see); optional
//	    expect:
//	      outcome: refused          # required: refused | allowed |
//	                                # needs_approval (allowed by the checks,
//	                                # then a policy asks a person's approval)
//	      code: validation          # the envelope's code (refused only)
//	      reason: schema            # the envelope's reason (refused only)
//	      message: at most 100      # a fragment of the detail or of one
//	                                # violation message (refused only)
//	      paths: [/retmax]          # exactly these violation paths, any order;
//	                                # [] for none (refused only)
//	      dry_run: looks like       # a fragment of one dry-run denial message
//	      inject: {X-Session-Id: s-1}   # headers injected upstream with these
//	                                    # values; a header whose value comes
//	                                    # from ${NAME} is written "(set)"
//	      approval:                 # needs_approval only
//	        effect: deletes         # a fragment of the effect shown
//	        summary: {doc_id: d-1}  # exactly the fields shown, values as text
//
// A case that does not match prints what it wanted and what it got:
//
//	FAIL cases/examples.cases.yaml: retmax over the bound
//	  outcome  want refused      got allowed
//	  code     want validation   got (none)
//
// docs/policies.md ("Case files") documents the same format for users.
package policytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/internal/yamlfile"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// Verdict is what the checks decide for a call, as the sidecar's
// evaluation (proxy.Evaluate) reports it.
type Verdict = policies.Verdict

// MCPTools names the tools of an MCP route for a case: a recorded
// tools/list answer.
type MCPTools struct {
	// Route is the MCP route's name; "" for the configuration's only one.
	Route string
	// List is the recorded tools/list answer.
	List []byte
}

// Config is a configuration loaded for the cases, as `toolgate run` loads
// it (offline: secrets the environment lacks are not required). Read-only.
type Config interface {
	// Evaluate runs a tool's checks on arguments exactly as the sidecar
	// does for a call, without sending anything.
	Evaluate(ctx context.Context, tool string, args map[string]any, header http.Header) (Verdict, error)
	// EvaluateMCP does the same for a tools/call of an MCP route whose
	// tools are those of a recorded tools/list answer.
	EvaluateMCP(ctx context.Context, tools MCPTools, tool string, args map[string]any, header http.Header) (Verdict, error)
	// PolicySection returns the configuration file's path and its
	// validated policies section.
	PolicySection() (path string, pc *policies.Config)
}

// Loader loads the configuration file at path for a run.
type Loader func(path string) (Config, error)

// DecodeArguments decodes a call's arguments as the sidecar decodes a JSON
// body: one object, numbers as json.Number, nothing after it.
func DecodeArguments(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("not valid JSON: %v (at byte %d)", err, se.Offset)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("not valid JSON: it ends early")
		}
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not valid JSON: data after the object (at byte %d)", dec.InputOffset())
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON object of arguments, got %s", jsonKind(v))
	}
	return obj, nil
}

// jsonKind names a decoded JSON value's type for a sentence ("an array"),
// numbers integral or not as "a number".
func jsonKind(v any) string {
	switch t := policies.JSONTypeName(v); t {
	case "null":
		return t
	case "integer", "number":
		return "a number"
	case "array", "object":
		return "an " + t
	default:
		return "a " + t
	}
}

// PrintVerdict prints a decision for people, then, for a refusal, the
// envelope exactly as a caller gets it (indented).
func PrintVerdict(out io.Writer, tool string, v Verdict) {
	row := func(k, format string, a ...any) {
		fmt.Fprintf(out, "%-12s %s\n", k, fmt.Sprintf(format, a...))
	}
	row("tool", "%s", tool)
	switch {
	case v.Allowed && v.Approval != nil:
		// As a case file's outcome: allowed by the checks, then held
		// back until a person approves it.
		row("outcome", "%s (the checks allow it; it goes upstream once a person approves it)", outcomeApproval)
	case v.Allowed:
		row("outcome", "allowed")
	default:
		row("outcome", "refused (HTTP %d)", v.Status)
		row("code", "%s", v.Code)
		row("reason", "%s", v.Reason)
		row("detail", "%s", v.Detail)
		for i, p := range v.Paths {
			row("violation", "%s: %s", pointerText(p), v.Messages[i])
		}
	}
	for _, m := range v.DryRun {
		row("dry run", "%s", m)
	}
	if v.PolicyError != "" {
		row("policy error", "%s (failed open)", v.PolicyError)
	}
	for _, k := range slices.Sorted(maps.Keys(v.Inject)) {
		val := v.Inject[k]
		if val == "" {
			val = `""`
		}
		row("inject", "%s: %s", k, val)
	}
	if v.InjectOrigin != "" {
		row("inject to", "%s", v.InjectOrigin)
	}
	if a := v.Approval; a != nil {
		row("approval", "a person must approve it first (asked by policy '%s'): %s", a.Policy, a.Effect)
		sk := make([]string, 0, len(a.Summary))
		for k := range a.Summary {
			sk = append(sk, k)
		}
		sort.Strings(sk)
		for _, k := range sk {
			row("shown", "%s: %s", k, a.Summary[k])
		}
	}
	if v.Unchecked {
		row("schema", "none checked the arguments (the sidecar records the call inspected=false)")
	}
	if v.Allowed {
		return
	}
	if v.Answer != nil {
		var buf bytes.Buffer
		if err := json.Indent(&buf, v.Answer, "", "  "); err != nil {
			buf.Reset()
			buf.Write(v.Answer)
		}
		fmt.Fprintf(out, "\nanswer (HTTP %d, X-Toolgate-Error-Code: %s; the envelope is in its _meta, under toolgate/envelope):\n%s\n", v.Status, v.Code, buf.Bytes())
		return
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, v.Envelope, "", "  "); err != nil {
		buf.Reset()
		buf.Write(v.Envelope)
	}
	fmt.Fprintf(out, "\nenvelope (HTTP %d, X-Toolgate-Error-Code: %s):\n%s\n", v.Status, v.Code, buf.Bytes())
}

// pointerText shows a JSON pointer; the empty pointer is the whole
// arguments object.
func pointerText(p string) string {
	if p == "" {
		return "(arguments)"
	}
	return p
}

// caseFile is a file of policy cases, NAME.cases.yaml, in the format the
// package documentation shows.
type caseFile struct {
	// Config is the configuration the cases run against, relative to the
	// case file. Required unless --config is given, which overrides it.
	Config string `yaml:"config"`
	// ToolsList is a recorded tools/list answer, relative to the case file,
	// that makes every case's tool a tool of an MCP route: the schemas of
	// its tools. Default: none (cases name the configuration's tools).
	ToolsList string `yaml:"tools_list"`
	// Route is the MCP route of the cases with a tools list. Default: the
	// configuration's only MCP route.
	Route string `yaml:"route"`
	// Cases are the calls, run in order.
	Cases []policyCase `yaml:"cases"`
}

// policyCase is one call and what the checks must decide for it.
type policyCase struct {
	// Name names the case in the output. Required and unique in the file.
	Name string `yaml:"name"`
	// Tool is the tool's name in the configuration, or, for a case with a
	// tools list, the MCP tool's name. Required.
	Tool string `yaml:"tool"`
	// ToolsList is the case's recorded tools/list answer, relative to the
	// case file. Default: the file's tools_list.
	ToolsList string `yaml:"tools_list"`
	// Route is the case's MCP route. Default: the file's route.
	Route string `yaml:"route"`
	// Arguments are the call's arguments. Default: none ({}).
	Arguments map[string]any `yaml:"arguments"`
	// Headers are request headers the call carries. Default: none.
	Headers map[string]string `yaml:"headers"`
	// Expect is what the checks must decide.
	Expect caseExpect `yaml:"expect"`
}

// caseExpect is what a case expects; an empty field is not checked.
type caseExpect struct {
	// Outcome is "refused" or "allowed". Required.
	Outcome string `yaml:"outcome"`
	// Code is the envelope's code, such as validation or policy.
	Code string `yaml:"code"`
	// Reason is the envelope's reason, such as policy_denied.
	Reason string `yaml:"reason"`
	// Message must appear in the detail or in one violation's message.
	Message string `yaml:"message"`
	// Paths are exactly the violations' paths, in any order; nil is not
	// checked, an empty list means no violation paths.
	Paths *[]string `yaml:"paths"`
	// DryRun must appear in one dry-run denial's message.
	DryRun string `yaml:"dry_run"`
	// Inject are headers that must be injected upstream with these values.
	Inject map[string]string `yaml:"inject"`
	// Approval is what the person deciding is shown; needs_approval only.
	Approval *approvalExpect `yaml:"approval"`
}

// approvalExpect is what a needs_approval case expects a policy's approval
// request to show; an empty field is not checked.
type approvalExpect struct {
	// Effect must appear in the request's effect.
	Effect string `yaml:"effect"`
	// Summary is exactly the argument fields shown, each value as text (a
	// number as its JSON); nil is not checked, {} means none.
	Summary *map[string]string `yaml:"summary"`
}

// Outcomes a case expects.
const (
	outcomeAllowed = "allowed"
	outcomeRefused = "refused"
	// outcomeApproval is a call the checks allow and a policy asks a
	// person to approve: it goes upstream only once approved.
	outcomeApproval = "needs_approval"
)

// CaseFileSuffix names the case files Run runs.
const CaseFileSuffix = ".cases.yaml"

// regoTestTimeout bounds one policy's unit tests.
const regoTestTimeout = 30 * time.Second

// Report counts the tests of one run.
type Report struct {
	// Passed and Failed count Rego tests and cases.
	Passed, Failed int
}

// policyTest is one run: it prints as it goes and counts.
type policyTest struct {
	out       io.Writer
	root      string // DIR as given
	configArg string // --config; "" when each case file names its own
	load      Loader
	Report
	configs map[string]loadResult // by absolute path
}

type loadResult struct {
	cfg Config
	err error
}

// ErrNotPolicyPath is Run's error for a path that is neither a folder, a
// .rego file nor a case file.
var ErrNotPolicyPath = errors.New("not a folder, a .rego file or a " + CaseFileSuffix + " file")

// Run runs everything under dir (or the one case file dir names; a .rego file
// stands for its policy, the folder holding it),
// printing one PASS or FAIL line per test on out, then "N passed, M
// failed". configArg, when not "", is the configuration of every case file
// instead of each file's config key; load loads configurations. The error
// is about the run itself: a dir that cannot be read, or ErrNotPolicyPath.
func Run(ctx context.Context, out io.Writer, dir, configArg string, load Loader) (Report, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() && strings.HasSuffix(dir, ".rego") {
		// A policy is a folder of .rego files: one of them stands for it.
		dir = filepath.Dir(dir)
	}
	regoDirs, caseFiles, err := findPolicyWork(dir)
	if err != nil {
		return Report{}, err
	}
	pt := &policyTest{out: out, root: dir, configArg: configArg, load: load, configs: map[string]loadResult{}}
	for _, d := range regoDirs {
		pt.regoTests(ctx, d)
	}
	for _, f := range caseFiles {
		pt.caseFile(ctx, f)
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", pt.Passed, pt.Failed)
	return pt.Report, nil
}

// findPolicyWork lists the policies (folders holding .rego files, each
// taking every .rego file below it) and the case files under dir, which
// may also name one .rego or case file.
func findPolicyWork(dir string) (regoDirs, caseFiles []string, err error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !info.IsDir() {
		switch {
		case strings.HasSuffix(dir, CaseFileSuffix):
			return nil, []string{dir}, nil
		case strings.HasSuffix(dir, ".rego"):
			return []string{dir}, nil, nil
		}
		return nil, nil, fmt.Errorf("%s is %w", dir, ErrNotPolicyPath)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			has, err := holdsRego(p)
			if err != nil {
				return err
			}
			if has && !slices.ContainsFunc(regoDirs, func(r string) bool { return within(r, p) }) {
				regoDirs = append(regoDirs, p)
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), CaseFileSuffix) {
			caseFiles = append(caseFiles, p)
		}
		return nil
	})
	return regoDirs, caseFiles, err
}

// holdsRego reports whether dir itself holds a .rego file.
func holdsRego(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".rego") {
			return true, nil
		}
	}
	return false, nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (pt *policyTest) pass(name string, d time.Duration) {
	pt.Passed++
	fmt.Fprintf(pt.out, "PASS %s (%s)\n", name, roundDuration(d))
}

// fail prints a FAIL line and its indented explanation.
func (pt *policyTest) fail(head string, lines ...string) {
	pt.Failed++
	fmt.Fprintf(pt.out, "FAIL %s\n", head)
	for _, l := range lines {
		for _, s := range strings.Split(strings.TrimRight(l, "\n"), "\n") {
			fmt.Fprintf(pt.out, "  %s\n", s)
		}
	}
}

// regoTests runs one policy's Rego unit tests.
func (pt *policyTest) regoTests(ctx context.Context, path string) {
	name := filepath.Base(path)
	if abs, err := filepath.Abs(path); err == nil {
		name = filepath.Base(abs)
	}
	name = strings.TrimSuffix(name, ".rego")
	pol, err := rego.Load(name, path)
	if err != nil {
		pt.fail(name+" (does not compile)", err.Error())
		return
	}
	// On the compiled engine (the default) the tests run twice: in OPA's
	// tester, and on the compiled engine. On the others, as the sidecar
	// runs them when it loads the policy: in OPA's tester.
	if pt.engineFor(path) == policies.EngineCompiled {
		if pol, err = pol.Compiled(ctx); err != nil {
			pt.fail(name+" (does not compile)", err.Error())
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, regoTestTimeout)
	defer cancel()
	results, err := pol.RunTests(ctx)
	if err != nil {
		pt.fail(name+" (tests did not run)", err.Error())
		return
	}
	pt.results(name, results)
}

// results reports the results of policy name's tests, in source order.
func (pt *policyTest) results(name string, results []policies.TestResult) {
	sortBySource(results)
	for _, r := range results {
		test := name + "/" + r.Name[strings.LastIndexByte(r.Name, '.')+1:]
		switch {
		case r.Pass:
			pt.pass(test, r.Duration)
		case r.Err != "":
			pt.fail(test+" ("+r.Location+")", r.Err)
		default:
			pt.fail(test+" ("+r.Location+")", "the rule is false or undefined")
		}
	}
}

// engineFor is the engine the configuration given with --config runs the
// policy at path on: the engine of its policies.rego entry, else the
// section's engine; compiled (the default) without --config, when the
// configuration does not load, or when no entry names path.
func (pt *policyTest) engineFor(path string) string {
	if pt.configArg == "" {
		return policies.EngineCompiled
	}
	cfg, err := pt.config(pt.configArg)
	if err != nil {
		return policies.EngineCompiled
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return policies.EngineCompiled
	}
	cfgPath, pc := cfg.PolicySection()
	dir := section.Dir(cfgPath)
	for _, rc := range pc.Rego {
		p, err := filepath.Abs(section.Resolve(dir, rc.Path))
		if err != nil || p != abs {
			continue
		}
		for _, e := range []string{rc.Engine, pc.Engine} {
			if e != "" {
				return e
			}
		}
		break
	}
	return policies.EngineCompiled
}

// sortBySource orders test results as their rules appear in the files
// (OPA's tester reports them in no fixed order).
func sortBySource(results []policies.TestResult) {
	at := func(r policies.TestResult) (string, int) {
		i := strings.LastIndexByte(r.Location, ':')
		if i < 0 {
			return r.Location, 0
		}
		n, _ := strconv.Atoi(r.Location[i+1:])
		return r.Location[:i], n
	}
	slices.SortStableFunc(results, func(a, b policies.TestResult) int {
		fa, la := at(a)
		fb, lb := at(b)
		if c := strings.Compare(fa, fb); c != 0 {
			return c
		}
		if c := la - lb; c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// caseFile runs one case file; a file that does not decode, or whose
// configuration does not load, is one failure.
func (pt *policyTest) caseFile(ctx context.Context, path string) {
	label := path
	if rel, err := filepath.Rel(pt.root, path); err == nil && rel != "." {
		label = rel
	} else {
		label = filepath.Base(path)
	}
	cf, err := ReadCaseFile(path)
	if err != nil {
		pt.fail(label, err.Error())
		return
	}
	cfgPath := pt.configArg
	if cfgPath == "" {
		if cf.Config == "" {
			pt.fail(label, path+": no configuration: set config: in the file or pass --config")
			return
		}
		cfgPath = cf.Config
		if !filepath.IsAbs(cfgPath) {
			cfgPath = filepath.Join(filepath.Dir(path), cfgPath)
		}
	}
	cfg, err := pt.config(cfgPath)
	if err != nil {
		pt.fail(label, "config: "+err.Error())
		return
	}
	for _, c := range cf.Cases {
		start := time.Now()
		var v Verdict
		for try := 1; ; try++ {
			if c.ToolsList != "" {
				var src MCPTools
				src, err = mcpSource(path, c)
				if err == nil {
					v, err = cfg.EvaluateMCP(ctx, src, c.Tool, c.JSONArguments, c.header())
				}
			} else {
				v, err = cfg.Evaluate(ctx, c.Tool, c.JSONArguments, c.header())
			}
			if err != nil || v.Reason != bucketing.ReasonPolicyTimeout || try == timeoutTries || c.Expect.Reason == bucketing.ReasonPolicyTimeout {
				break
			}
		}
		if err != nil {
			pt.fail(label+": "+c.Name, err.Error())
			continue
		}
		if diff := c.Expect.diff(v); len(diff) > 0 {
			pt.fail(label+": "+c.Name, diff...)
			continue
		}
		pt.pass(label+": "+c.Name, time.Since(start))
	}
}

// timeoutTries is how many times a case whose policy ran past its deadline
// is evaluated before the timeout counts: on a busy machine a 50 ms
// deadline can pass while the policy waits for a core, where a policy
// that is too slow runs past it every time. A case that expects
// policy_timeout counts the first.
const timeoutTries = 3

// mcpSource reads the tools list of an MCP case of the case file at path.
func mcpSource(path string, c Case) (MCPTools, error) {
	lp := c.ToolsList
	if !filepath.IsAbs(lp) {
		lp = filepath.Join(filepath.Dir(path), lp)
	}
	list, err := ReadToolsList(lp)
	if err != nil {
		return MCPTools{}, fmt.Errorf("tools_list: %w", err)
	}
	return MCPTools{Route: c.Route, List: list}, nil
}

// maxToolsListBytes bounds a recorded tools/list file; the route's
// mcp.max_message_bytes bounds it further.
const maxToolsListBytes = 64 << 20

// ReadToolsList reads a recorded tools/list answer from a file, at most
// 64 MiB of it.
func ReadToolsList(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxToolsListBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxToolsListBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxToolsListBytes)
	}
	return b, nil
}

// config loads a configuration once per run.
func (pt *policyTest) config(path string) (Config, error) {
	key, err := filepath.Abs(path)
	if err != nil {
		key = path
	}
	if r, ok := pt.configs[key]; ok {
		return r.cfg, r.err
	}
	cfg, err := pt.load(path)
	pt.configs[key] = loadResult{cfg, err}
	return cfg, err
}

// Case is a case with its arguments as a JSON body would give them.
type Case struct {
	policyCase
	// JSONArguments are the arguments as a JSON body's would decode.
	JSONArguments map[string]any
}

func (c *Case) header() http.Header {
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	return h
}

// CaseFile is a case file checked and ready to run.
type CaseFile struct {
	// Config is the file's config key, as written.
	Config string
	// Cases are its cases, in order.
	Cases []Case
}

// ReadCaseFile reads and checks a case file.
func ReadCaseFile(path string) (*CaseFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCaseFile(path, data)
}

// ParseCaseFile decodes and checks a case file's bytes; path names the
// file in errors, each of which names the line too.
func ParseCaseFile(path string, data []byte) (*CaseFile, error) {
	var cf caseFile
	if err := yamlfile.Decode(path, data, &cf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no cases", path)
		}
		return nil, err
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	at := func(field, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", path, yamlfile.LineOf(&root, field), field, fmt.Sprintf(format, a...))
	}
	if len(cf.Cases) == 0 {
		return nil, at("cases", "no cases")
	}
	out := &CaseFile{Config: cf.Config}
	seen := map[string]bool{}
	for i, c := range cf.Cases {
		p := fmt.Sprintf("cases[%d]", i)
		switch {
		case c.Name == "":
			return nil, at(p+".name", "required")
		case seen[c.Name]:
			return nil, at(p+".name", "another case is named %q", c.Name)
		case c.Tool == "":
			return nil, at(p+".tool", "required")
		}
		seen[c.Name] = true
		if c.ToolsList == "" {
			c.ToolsList = cf.ToolsList
		}
		if c.Route == "" {
			c.Route = cf.Route
		}
		if c.Route != "" && c.ToolsList == "" {
			return nil, at(p+".route", "an MCP case needs tools_list (in the case or the file)")
		}
		e := c.Expect
		switch e.Outcome {
		case outcomeRefused:
		case outcomeAllowed, outcomeApproval:
			for _, f := range []struct {
				name string
				set  bool
			}{{"code", e.Code != ""}, {"reason", e.Reason != ""}, {"message", e.Message != ""}, {"paths", e.Paths != nil}} {
				if f.set {
					return nil, at(p+".expect."+f.name, "only a refused case has one; the outcome is %s", e.Outcome)
				}
			}
		case "":
			return nil, at(p+".expect.outcome", "required: refused, allowed or needs_approval")
		default:
			return nil, at(p+".expect.outcome", "%q: expected refused, allowed or needs_approval", e.Outcome)
		}
		if e.Approval != nil && e.Outcome != outcomeApproval {
			return nil, at(p+".expect.approval", "only a needs_approval case has one; the outcome is %s", e.Outcome)
		}
		for k := range c.Headers {
			if k == "" || strings.ContainsAny(k, " \t:\r\n") {
				return nil, at(p+".headers", "%q is not a header name", k)
			}
		}
		args, err := jsonArguments(c.Arguments)
		if err != nil {
			return nil, at(p+".arguments", "%v", err)
		}
		out.Cases = append(out.Cases, Case{policyCase: c, JSONArguments: args})
	}
	return out, nil
}

// jsonArguments turns YAML arguments into what a JSON body with the same
// content decodes to: numbers become json.Number.
func jsonArguments(args map[string]any) (map[string]any, error) {
	if args == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("not expressible as JSON: %v", err)
	}
	return DecodeArguments(b)
}

// diff compares what a case wanted with what the checks decided, one line
// per mismatch; nil when everything matches.
func (e caseExpect) diff(v Verdict) []string {
	type row struct{ field, want, got string }
	var rows []row
	outcome := outcomeAllowed
	switch {
	case !v.Allowed:
		outcome = outcomeRefused
	case v.Approval != nil:
		outcome = outcomeApproval
	}
	none := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	if e.Outcome != outcome {
		rows = append(rows, row{"outcome", e.Outcome, outcome})
	}
	if e.Code != "" && e.Code != v.Code {
		rows = append(rows, row{"code", e.Code, none(v.Code)})
	}
	if e.Reason != "" && e.Reason != v.Reason {
		rows = append(rows, row{"reason", e.Reason, none(v.Reason)})
	}
	if e.Message != "" && !strings.Contains(v.Detail, e.Message) &&
		!slices.ContainsFunc(v.Messages, func(m string) bool { return strings.Contains(m, e.Message) }) {
		got := "(none)"
		if !v.Allowed {
			got = quoteAll(append([]string{v.Detail}, v.Messages...))
		}
		rows = append(rows, row{"message", fmt.Sprintf("%q", e.Message), got})
	}
	if e.Paths != nil {
		want, got := slices.Clone(*e.Paths), slices.Clone(v.Paths)
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(want, got) {
			rows = append(rows, row{"paths", quoteList(*e.Paths), quoteList(v.Paths)})
		}
	}
	if e.DryRun != "" && !slices.ContainsFunc(v.DryRun, func(m string) bool { return strings.Contains(m, e.DryRun) }) {
		rows = append(rows, row{"dry_run", fmt.Sprintf("%q", e.DryRun), none(quoteAll(v.DryRun))})
	}
	keys := make([]string, 0, len(e.Inject))
	for k := range e.Inject {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		got, ok := v.Inject[ck]
		if !ok {
			got, ok = v.Inject[k]
		}
		if !ok || got != e.Inject[k] {
			g := "(not injected)"
			if ok {
				g = fmt.Sprintf("%q", got)
			}
			rows = append(rows, row{"inject", fmt.Sprintf("%s: %q", ck, e.Inject[k]), g})
		}
	}
	if a := e.Approval; a != nil && v.Approval != nil {
		if a.Effect != "" && !strings.Contains(v.Approval.Effect, a.Effect) {
			rows = append(rows, row{"effect", fmt.Sprintf("%q", a.Effect), fmt.Sprintf("%q", v.Approval.Effect)})
		}
		if a.Summary != nil && !maps.Equal(*a.Summary, v.Approval.Summary) {
			rows = append(rows, row{"summary", summaryText(*a.Summary), summaryText(v.Approval.Summary)})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	width := 20
	for _, r := range rows {
		width = max(width, len(r.want)+2)
	}
	lines := make([]string, 0, len(rows)+1)
	for _, r := range rows {
		lines = append(lines, fmt.Sprintf("%-8s want %-*s got %s", r.field, width, r.want, r.got))
	}
	if !v.Allowed && e.Outcome != outcome {
		lines = append(lines, fmt.Sprintf("%-8s %s", "detail", v.Detail))
	}
	return lines
}

// summaryText shows an approval summary as {k: "v", ...}, keys sorted.
func summaryText(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func quoteList(ss []string) string { return "[" + quoteAll(ss) + "]" }

// roundDuration shortens a test's duration for the output: 12µs, 1.25ms.
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
