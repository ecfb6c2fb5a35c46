package policies

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"
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
	// Rego lists the Rego policies.
	Rego []RegoConfig `yaml:"rego"`
}

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
}

// Loaded is a validated policies section with every policy compiled.
type Loaded struct {
	cfg     Config
	byName  map[string]*Rego
	modes   map[string]string
	order   []string
	version string
}

// FieldError is an error at one field of the policies section, named by
// its path below the section ("rego[1].path").
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Load applies defaults, validates the section and compiles every policy;
// dir is where relative paths resolve.
func (c Config) Load(dir string) (*Loaded, error) {
	if c.Deadline < 0 {
		return nil, &FieldError{"deadline", fmt.Errorf("must be positive")}
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	if c.Headers == nil {
		c.Headers = []string{"content-type", "user-agent"}
	}
	for i, h := range c.Headers {
		if !validHeaderName(h) {
			return nil, &FieldError{fmt.Sprintf("headers[%d]", i), fmt.Errorf("%q is not a header name", h)}
		}
		c.Headers[i] = strings.ToLower(h)
	}
	l := &Loaded{cfg: c, byName: map[string]*Rego{}, modes: map[string]string{}}
	h := sha256.New()
	for i, rc := range c.Rego {
		p := fmt.Sprintf("rego[%d]", i)
		if rc.Name == "" {
			return nil, &FieldError{p + ".name", fmt.Errorf("required")}
		}
		if _, dup := l.byName[rc.Name]; dup {
			return nil, &FieldError{p + ".name", fmt.Errorf("policy %q is defined twice", rc.Name)}
		}
		switch rc.Mode {
		case "":
			rc.Mode = ModeEnforce
		case ModeEnforce, ModeDryRun, ModeOff:
		default:
			return nil, &FieldError{p + ".mode", fmt.Errorf("unknown mode %q; expected enforce, dry_run or off", rc.Mode)}
		}
		if rc.Path == "" {
			return nil, &FieldError{p + ".path", fmt.Errorf("required")}
		}
		path := rc.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		pol, err := LoadRego(rc.Name, path)
		if err != nil {
			return nil, &FieldError{p + ".path", err}
		}
		l.byName[rc.Name] = pol
		l.modes[rc.Name] = rc.Mode
		l.order = append(l.order, rc.Name)
		fmt.Fprintf(h, "%s=%s:%s;", rc.Name, rc.Mode, pol.Version())
	}
	for i, name := range c.Global {
		if _, ok := l.byName[name]; !ok {
			return nil, &FieldError{fmt.Sprintf("global[%d]", i), fmt.Errorf("no policy named %q; defined: %s", name, strings.Join(l.order, ", "))}
		}
		fmt.Fprintf(h, "global=%s;", name)
	}
	if len(l.order) > 0 {
		l.version = hex.EncodeToString(h.Sum(nil))[:12]
	}
	return l, nil
}

// Version is a content hash of every policy, its mode and the global
// bindings; "" when there are no policies.
func (l *Loaded) Version() string { return l.version }

// Headers are the request headers policies may see.
func (l *Loaded) Headers() []string { return l.cfg.Headers }

// Names lists the policies in configuration order.
func (l *Loaded) Names() []string { return l.order }

// Policy returns a policy by name.
func (l *Loaded) Policy(name string) (*Rego, bool) {
	p, ok := l.byName[name]
	return p, ok
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
		bound = append(bound, Bound{Policy: l.byName[name], Mode: lenient(toolMode, l.modes[name])})
	}
	for _, name := range l.cfg.Global {
		add(name)
	}
	for i, name := range names {
		if _, ok := l.byName[name]; !ok {
			return nil, &FieldError{fmt.Sprintf("policies[%d]", i), fmt.Errorf("no policy named %q; defined: %s", name, strings.Join(l.order, ", "))}
		}
		add(name)
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
		res, err := l.byName[name].RunTests(ctx)
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
