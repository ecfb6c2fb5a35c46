package policies

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/section"
)

// Config is the policies section of the configuration file: the policies
// there are, which are bound to every tool, and how long each may take.
// Tools bind further policies by name (the tools' policies field).
type Config struct {
	// Deadline bounds one policy evaluation. Default 50ms.
	Deadline time.Duration `yaml:"deadline"`
	// Headers are the request headers policies may see, by name; nothing
	// else of the request's headers reaches a policy. Default:
	// content-type, user-agent.
	Headers []string `yaml:"headers"`
	// Global names policies that decide every tool's calls, before the
	// tool's own.
	Global []string `yaml:"global"`
	// Engine is the default engine of Rego policies: "compiled" (the
	// default), "interpreter" or "wasm". See RegoConfig.Engine.
	Engine string `yaml:"engine"`
	// WasmCache is the folder of wazero's compilation cache for WASM
	// policies and Rego policies on the wasm engine, so a module compiled
	// once is not compiled again by the next process. Default "": the
	// user cache folder's toolgate/wazero (no disk cache when there is
	// none); "off": no disk cache. A relative folder is below the
	// configuration file's. Load does not read it: the WasmHost it is
	// given does.
	WasmCache string `yaml:"wasm_cache"`
	// Rego lists the Rego policies.
	Rego []RegoConfig `yaml:"rego"`
	// Wasm lists the WebAssembly policies.
	Wasm []WasmConfig `yaml:"wasm"`
	// Bundles lists OPA bundles the sidecar takes further policies from
	// (bundle.go, docs/bundles.md). Default: none.
	Bundles []BundleConfig `yaml:"bundles"`
}

// Files lists the files and folders the section reads, resolved against
// dir as Load resolves them: each Rego policy's path (a file, or a folder
// whose .rego files count) and each WASM module's. It reads only the data,
// so it answers for a section that does not load too (hot reload watches
// these paths).
func (c Config) Files(dir string) []string {
	var files []string
	for _, r := range c.Rego {
		if r.Path != "" {
			files = append(files, section.Resolve(dir, r.Path))
		}
	}
	for _, w := range c.Wasm {
		if w.Path != "" {
			files = append(files, section.Resolve(dir, w.Path))
		}
	}
	return append(files, c.bundleFiles(dir)...)
}

// Engines a Rego policy can run on.
const (
	// EngineCompiled plans the policy once with OPA's planner (the
	// intermediate representation OPA also compiles to WASM) and runs the
	// plan in Go (package irvm), on OPA's own values and builtins: every
	// builtin, strict builtin errors, the interpreter's results, several
	// times faster. The default.
	EngineCompiled = "compiled"
	// EngineInterpreter evaluates Rego with OPA's interpreter, in process:
	// every builtin, strict builtin errors (a builtin given the wrong type
	// fails the call closed).
	EngineInterpreter = "interpreter"
	// EngineWasm compiles the policy with OPA's WASM compiler once and runs
	// it in pooled wazero instances: several times faster, but only
	// builtins OPA compiles into the module are available, and a builtin
	// given the wrong type leaves its rule undefined instead of failing.
	EngineWasm = "wasm"
)

// RegoConfig is one Rego policy.
type RegoConfig struct {
	// Name identifies the policy in tools' policies lists, in errors and in
	// events. Required and unique.
	Name string `yaml:"name"`
	// Path is a .rego file or a folder of them, relative to the
	// configuration file; *_test.rego files hold its unit tests, which run
	// before the policy takes effect. Required.
	Path string `yaml:"path"`
	// Mode is "enforce" (the default), "dry_run" or "off", for every tool.
	Mode string `yaml:"mode"`
	// Engine is "compiled", "interpreter" or "wasm"; default: the
	// section's engine.
	// The policy's unit tests run in OPA's test runner (the interpreter)
	// whatever the engine.
	Engine string `yaml:"engine"`
}

// WasmConfig is one WebAssembly policy module.
type WasmConfig struct {
	// Name identifies the policy, as for Rego policies. Required and unique
	// across both lists.
	Name string `yaml:"name"`
	// Path is a module: a .wasm file with toolgate's ABI (docs/wasm-abi.md)
	// or OPA's (opa build -t wasm), or an OPA bundle (.tar.gz) holding
	// /policy.wasm; relative to the configuration file. Required.
	Path string `yaml:"path"`
	// Mode is "enforce" (the default), "dry_run" or "off".
	Mode string `yaml:"mode"`
	// MemoryLimitMiB caps each instance's linear memory. Default 16.
	MemoryLimitMiB int `yaml:"memory_limit_mib"`
	// Deadline bounds one call into the module; the instance is thrown
	// away when it runs over. Default 10ms. The section's deadline still
	// applies when it is shorter.
	Deadline time.Duration `yaml:"deadline"`
	// PoolSize is how many idle instances are kept: as many as calls may
	// be deciding at once. Default 64.
	PoolSize int `yaml:"pool_size"`
}

// WasmOptions are the limits a WASM policy runs under; zero values take the
// host's defaults (16 MiB, 10ms, 64 instances).
type WasmOptions struct {
	MemoryLimit uint32        // bytes per instance
	Deadline    time.Duration // per call
	PoolSize    int           // idle instances kept
}

// WasmHost compiles and runs WebAssembly policies. Package wasm provides
// it; the policies package only declares what it needs.
type WasmHost interface {
	// LoadWasm loads a module file (toolgate's ABI, OPA's, or an OPA
	// bundle) as a policy.
	LoadWasm(ctx context.Context, name, path string, o WasmOptions) (Evaluator, error)
	// CompileRego compiles a Rego policy (file name to source; test files
	// are left out) to WASM and loads it.
	CompileRego(ctx context.Context, name string, files map[string][]byte, o WasmOptions) (Evaluator, error)
}

// LoadOptions are what Load needs beyond the section itself.
type LoadOptions struct {
	// Rego reads and compiles Rego policies (package policies/rego's
	// Host); without it, configuring a Rego policy is an error.
	Rego RegoHost
	// Wasm runs WASM policies and Rego policies on the wasm engine; without
	// it, configuring either is an error.
	Wasm WasmHost
	// Bundles are the activated bundles whose policies join the
	// section's, each named in the section's bundles; nil before any is.
	Bundles []*Bundle
	// Previous is the configuration being replaced, if any: policies whose
	// files, engine and limits are unchanged are taken over from it instead
	// of being compiled again.
	Previous *Loaded
}

// closer is implemented by evaluators that hold resources (WASM pools).
type closer interface {
	Close(ctx context.Context) error
}

// loadedPolicy is one compiled policy and what it was made from.
type loadedPolicy struct {
	eval   Evaluator
	rego   RegoPolicy // Rego's compilation (its unit tests run on it); for wasm, the interpreter's
	kind   string     // "rego" or "wasm"
	engine string     // compiled, interpreter or wasm
	key    string     // kind, engine, content version and limits: equal keys are interchangeable
}

// Loaded is a validated policies section with every policy compiled.
type Loaded struct {
	cfg     Config
	byName  map[string]*loadedPolicy
	modes   map[string]string
	order   []string
	version string
	// bound lists, by tool, the bundle policies bundles bind to it.
	bound map[string][]string
	// global lists the bundle policies bundles bind to every tool.
	global []string
	// revisions are the bundles in force, by name: their revisions.
	revisions map[string]string
}

// Load applies defaults, validates the section and compiles every policy;
// dir is where relative paths resolve.
func (c Config) Load(dir string, o LoadOptions) (l *Loaded, err error) {
	if c.Deadline < 0 {
		return nil, section.At("deadline", fmt.Errorf("must be positive"))
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	if c.Headers == nil {
		c.Headers = []string{"content-type", "user-agent"}
	}
	for i, h := range c.Headers {
		if !validHeaderName(h) {
			return nil, section.At(fmt.Sprintf("headers[%d]", i), fmt.Errorf("%q is not a header name", h))
		}
		c.Headers[i] = strings.ToLower(h)
	}
	c.Bundles = slices.Clone(c.Bundles)
	if err := c.ValidateBundles(dir); err != nil {
		return nil, err
	}
	switch c.Engine {
	case "":
		c.Engine = EngineCompiled
	case EngineCompiled, EngineInterpreter, EngineWasm:
	default:
		return nil, section.At("engine", fmt.Errorf("unknown engine %q; expected compiled, interpreter or wasm", c.Engine))
	}
	l = &Loaded{cfg: c, byName: map[string]*loadedPolicy{}, modes: map[string]string{}}
	h := sha256.New()
	ctx := context.Background()
	defer func() {
		if err != nil {
			// Release what was built for this section, not what the
			// previous configuration still runs.
			_ = l.Close(ctx, o.Previous)
			l = nil
		}
	}()
	add := func(p, name, mode string, load func() (*loadedPolicy, error)) error {
		if name == "" {
			return section.At(p+".name", fmt.Errorf("required"))
		}
		if _, dup := l.byName[name]; dup {
			return section.At(p+".name", fmt.Errorf("policy %q is defined twice", name))
		}
		switch mode {
		case "":
			mode = ModeEnforce
		case ModeEnforce, ModeDryRun, ModeOff:
		default:
			return section.At(p+".mode", fmt.Errorf("unknown mode %q; expected enforce, dry_run or off", mode))
		}
		lp, err := load()
		if err != nil {
			return err
		}
		l.byName[name] = lp
		l.modes[name] = mode
		l.order = append(l.order, name)
		fmt.Fprintf(h, "%s=%s:%s;", name, mode, lp.key)
		return nil
	}
	resolve := func(path string) string { return section.Resolve(dir, path) }
	// loadRego compiles a Rego policy from its files for its engine; p is
	// its entry's field path, at is the field errors about its files name.
	loadRego := func(p, at, name, engine string, files map[string][]byte) (*loadedPolicy, error) {
		switch engine {
		case "":
			engine = c.Engine
		case EngineCompiled, EngineInterpreter, EngineWasm:
		default:
			return nil, section.At(p+".engine", fmt.Errorf("unknown engine %q; expected compiled, interpreter or wasm", engine))
		}
		pol, err := o.Rego.CompileRego(name, files)
		if err != nil {
			return nil, section.At(at, err)
		}
		lp := &loadedPolicy{eval: pol, rego: pol, kind: "rego", engine: engine,
			key: "rego/" + engine + "/" + pol.Version()}
		if prev := o.Previous.reusable(name, lp.key); prev != nil && engine != EngineInterpreter {
			lp.eval, lp.rego = prev.eval, prev.rego
			return lp, nil
		}
		switch engine {
		case EngineInterpreter:
			return lp, nil
		case EngineCompiled:
			c, err := pol.Compiled(ctx)
			if err != nil {
				return nil, section.At(p+".engine", err)
			}
			// A policy of many rules stays in the interpreter (see
			// maxCompiledRules): status and events name that engine.
			lp.eval, lp.rego, lp.engine = c, c, c.Engine()
			return lp, nil
		}
		if o.Wasm == nil {
			return nil, section.At(p+".engine", fmt.Errorf("the wasm engine is not available here"))
		}
		ev, err := o.Wasm.CompileRego(ctx, name, files, WasmOptions{Deadline: c.Deadline})
		if err != nil {
			return nil, section.At(p+".engine", fmt.Errorf("policy %q cannot run on the wasm engine (use engine: interpreter): %w", name, err))
		}
		lp.eval = ev
		return lp, nil
	}
	for i, rc := range c.Rego {
		p := fmt.Sprintf("rego[%d]", i)
		err := add(p, rc.Name, rc.Mode, func() (*loadedPolicy, error) {
			switch rc.Engine {
			case "", EngineCompiled, EngineInterpreter, EngineWasm:
			default:
				return nil, section.At(p+".engine", fmt.Errorf("unknown engine %q; expected compiled, interpreter or wasm", rc.Engine))
			}
			if rc.Path == "" {
				return nil, section.At(p+".path", fmt.Errorf("required"))
			}
			if o.Rego == nil {
				return nil, section.At(p+".path", fmt.Errorf("no Rego host was given to load Rego policies"))
			}
			files, err := o.Rego.ReadRego(resolve(rc.Path))
			if err != nil {
				return nil, section.At(p+".path", fmt.Errorf("policy %q: %w", rc.Name, err))
			}
			return loadRego(p, p+".path", rc.Name, rc.Engine, files)
		})
		if err != nil {
			return nil, err
		}
	}
	for i, wc := range c.Wasm {
		p := fmt.Sprintf("wasm[%d]", i)
		err := add(p, wc.Name, wc.Mode, func() (*loadedPolicy, error) {
			if wc.Path == "" {
				return nil, section.At(p+".path", fmt.Errorf("required"))
			}
			if wc.MemoryLimitMiB < 0 || wc.MemoryLimitMiB > 4096 {
				return nil, section.At(p+".memory_limit_mib", fmt.Errorf("must be between 1 and 4096"))
			}
			if wc.Deadline < 0 {
				return nil, section.At(p+".deadline", fmt.Errorf("must be positive"))
			}
			if wc.PoolSize < 0 {
				return nil, section.At(p+".pool_size", fmt.Errorf("must be positive"))
			}
			path := resolve(wc.Path)
			sum, err := fileVersion(path)
			if err != nil {
				return nil, section.At(p+".path", fmt.Errorf("policy %q: %w", wc.Name, err))
			}
			opts := WasmOptions{MemoryLimit: uint32(wc.MemoryLimitMiB) << 20, Deadline: wc.Deadline, PoolSize: wc.PoolSize}
			lp := &loadedPolicy{kind: "wasm", engine: EngineWasm,
				key: fmt.Sprintf("wasm/%s/%d/%s/%d", sum, opts.MemoryLimit, opts.Deadline, opts.PoolSize)}
			if prev := o.Previous.reusable(wc.Name, lp.key); prev != nil {
				lp.eval = prev.eval
				return lp, nil
			}
			if o.Wasm == nil {
				return nil, section.At(p+".path", fmt.Errorf("WASM policies are not available here"))
			}
			ev, err := o.Wasm.LoadWasm(ctx, wc.Name, path, opts)
			if err != nil {
				return nil, section.At(p+".path", err)
			}
			lp.eval = ev
			return lp, nil
		})
		if err != nil {
			return nil, err
		}
	}
	local := len(l.order)
	if err := l.addBundles(c, o, add, loadRego, h); err != nil {
		return nil, err
	}
	for i, name := range c.Global {
		if _, ok := l.byName[name]; !ok {
			return nil, section.At(fmt.Sprintf("global[%d]", i), fmt.Errorf("no policy named %q; %s", name, definedPolicies(l.order)))
		}
		fmt.Fprintf(h, "global=%s;", name)
	}
	if len(l.order) > 0 {
		l.version = hex.EncodeToString(h.Sum(nil))[:12]
	}
	if len(l.revisions) > 0 {
		// The bundles' revisions are the policy version; policies of the
		// file itself add their content hash after a "+".
		l.version = BundleVersion(l.revisions)
		if local > 0 {
			l.version += "+" + hex.EncodeToString(h.Sum(nil))[:12]
		}
	}
	return l, nil
}

// reusable returns the previous configuration's policy of that name when
// it was made from the same key, or nil.
func (l *Loaded) reusable(name, key string) *loadedPolicy {
	if l == nil {
		return nil
	}
	if lp, ok := l.byName[name]; ok && lp.key == key {
		return lp
	}
	return nil
}

// Close releases the evaluators (WASM instance pools) that next does not
// take over; next may be nil. Calls still deciding with them finish first.
func (l *Loaded) Close(ctx context.Context, next *Loaded) error {
	if l == nil {
		return nil
	}
	kept := map[Evaluator]bool{}
	if next != nil {
		for _, lp := range next.byName {
			kept[lp.eval] = true
		}
	}
	var errs []error
	for _, name := range l.order {
		lp := l.byName[name]
		if c, ok := lp.eval.(closer); ok && !kept[lp.eval] {
			if err := c.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("policy %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// fileVersion is a content hash of one file (section.Version).
func fileVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return section.Version(b), nil
}

// Version is a content hash of every policy, its mode and the global
// bindings; "" when there are no policies.
func (l *Loaded) Version() string { return l.version }

// Headers are the request headers policies may see.
func (l *Loaded) Headers() []string { return l.cfg.Headers }

// Names lists the policies in configuration order.
func (l *Loaded) Names() []string { return l.order }

// Policy returns a policy's evaluator by name.
func (l *Loaded) Policy(name string) (Evaluator, bool) {
	lp, ok := l.byName[name]
	if !ok {
		return nil, false
	}
	return lp.eval, true
}

// Engine names what runs a policy: "compiled", "interpreter" or "wasm".
func (l *Loaded) Engine(name string) string {
	if lp, ok := l.byName[name]; ok {
		return lp.engine
	}
	return ""
}

// FirstPass reports whether a policy runs on the compiled engine with a
// first pass over its rules (policies/rego's FirstPass).
func (l *Loaded) FirstPass(name string) bool {
	lp, ok := l.byName[name]
	if !ok {
		return false
	}
	fp, ok := lp.eval.(interface{ FirstPass() bool })
	return ok && fp.FirstPass()
}

// SetFor builds a tool's set: the global policies, then names. toolMode
// is the tool's policy_mode; the effective mode of each policy is the
// more lenient of the tool's and the policy's own (off, then dry_run). It
// returns nil when no policy would run. An unknown name is an error naming
// its index in names.
func (l *Loaded) SetFor(tool string, names []string, toolMode string, failOpen bool) (*Set, error) {
	var bound []Bound
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		bound = append(bound, Bound{Policy: l.byName[name].eval, Mode: lenient(toolMode, l.modes[name])})
	}
	for _, name := range l.cfg.Global {
		add(name)
	}
	for _, name := range l.global {
		add(name)
	}
	for i, name := range names {
		if _, ok := l.byName[name]; !ok {
			return nil, section.At(fmt.Sprintf("policies[%d]", i), fmt.Errorf("no policy named %q; %s", name, definedPolicies(l.order)))
		}
		add(name)
	}
	for _, name := range l.bound[tool] {
		add(name)
	}
	set := NewSet(tool, bound, l.cfg.Deadline, failOpen)
	if set.Len() == 0 {
		return nil, nil
	}
	return set, nil
}

// AnswerSetFor builds the set of a tool's answer policies (its
// answer.policies): only those named, in order, no global ones (they
// decide calls, not answers). Modes and fail_open are as in SetFor. It
// returns nil when no policy would run. An unknown name is an error naming
// its index in names.
func (l *Loaded) AnswerSetFor(tool string, names []string, toolMode string, failOpen bool) (*Set, error) {
	var bound []Bound
	seen := map[string]bool{}
	for i, name := range names {
		lp, ok := l.byName[name]
		if !ok {
			return nil, section.At(fmt.Sprintf("answer.policies[%d]", i), fmt.Errorf("no policy named %q; %s", name, definedPolicies(l.order)))
		}
		if !seen[name] {
			seen[name] = true
			bound = append(bound, Bound{Policy: lp.eval, Mode: lenient(toolMode, l.modes[name])})
		}
	}
	set := NewSet(tool, bound, l.cfg.Deadline, failOpen)
	if set.Len() == 0 {
		return nil, nil
	}
	return set, nil
}

func lenient(a, b string) string {
	rank := map[string]int{ModeEnforce: 0, "": 0, ModeDryRun: 1, ModeOff: 2}
	if rank[a] >= rank[b] {
		if a == "" {
			return ModeEnforce
		}
		return a
	}
	return b
}

// TestReport is the outcome of every policy's unit tests.
type TestReport struct {
	// Results holds each test, by policy name, in name order.
	Results map[string][]TestResult
	// Failed counts failed tests.
	Failed int
}

// RunTests runs every policy's unit tests.
func (l *Loaded) RunTests(ctx context.Context) (TestReport, error) {
	rep := TestReport{Results: map[string][]TestResult{}}
	names := append([]string(nil), l.order...)
	sort.Strings(names)
	for _, name := range names {
		pol := l.byName[name].rego
		if pol == nil {
			continue // WASM modules carry no Rego tests
		}
		res, err := pol.RunTests(ctx)
		if err != nil {
			return rep, err
		}
		rep.Results[name] = res
		for _, r := range res {
			if !r.Pass {
				rep.Failed++
			}
		}
	}
	return rep, nil
}

// definedPolicies ends an unknown policy name's error: the names defined,
// or that none is.
func definedPolicies(names []string) string {
	if len(names) == 0 {
		return "none is defined (policies.rego, policies.wasm)"
	}
	return "defined: " + strings.Join(names, ", ")
}
