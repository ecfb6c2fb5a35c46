// Package config composes toolgate's configuration file from the sections
// each package owns (proxy, policies, events, admin, reload, tracing), decodes it
// strictly, validates every section once, and returns a ready value: the
// proxy snapshot with its compiled schemas and policy sets. Every error
// names the file, the line and the field: FILE:LINE: field: message.
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/admin"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/internal/yamlfile"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/budget"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/budgetengine"
	"github.com/toolgate/toolgate/sink/events"
	"github.com/toolgate/toolgate/sink/tracing"
)

// File is the whole configuration file: each package owns its section and
// validates it; this package only composes them.
type File struct {
	// The proxy's section sits at the top level: listen, unmatched, tools...
	proxy.Config `yaml:",inline"`
	// Admin is the admin listener (health, readiness, metrics, status).
	Admin admin.Config `yaml:"admin"`
	// Events says where events go.
	Events events.Config `yaml:"events"`
	// Policies are the Rego policies tools bind by name.
	Policies policies.Config `yaml:"policies"`
	// Reload configures hot reload.
	Reload reload.Config `yaml:"reload"`
	// Tracing exports one OpenTelemetry span per call to an OTLP
	// collector. Default off.
	Tracing tracing.Config `yaml:"tracing"`
	// Budgets are the call and cost budgets, loop breaking and outbound
	// rate limits (policies/budget). Default: none.
	Budgets budget.Config `yaml:"budgets"`
	// Approvals configures the approval step (which calls need a person's
	// approval, where requests live, who decides). Start-only.
	Approvals approval.Config `yaml:"approvals"`
	// State is where limits shared by a fleet of sidecars are kept: with
	// state.redis, budgets, loop counters, upstream rates and approval
	// grant uses are counted in Redis, once for every sidecar. Default:
	// none (each sidecar counts alone). Start-only.
	State StateConfig `yaml:"state"`
}

// StateConfig is the state section.
type StateConfig struct {
	// Redis is the Redis the fleet shares (internal/redisstate). Default:
	// none.
	Redis redisstate.Config `yaml:"redis"`
}

// Loaded is a validated configuration and where it came from: every
// section with its defaults applied and its relative paths resolved, the
// compiled policies and the proxy's snapshot.
//
// A Loaded is read-only once Load (or Parse, LoadAfter, LoadOffline)
// returns it, all of it: the sections in File, Path, Version, and what
// LoadedPolicies and Snapshot point to. The snapshot's Config points into
// it, goroutines share it (the proxy's calls, the sidecar's /status and
// reload), and no caller changes it. What would change it returns a new
// value instead (KeepStartSections); only ClosePolicies releases what it
// holds, once it is out of use.
type Loaded struct {
	File
	// Path is the configuration file.
	Path string
	// Version is a content hash of the file and its schemas.
	Version string
	// LoadedPolicies are the compiled policies (and their WASM pools).
	LoadedPolicies *policies.Loaded
	// Snapshot is what the proxy runs: the proxy section, ready, with
	// each tool's checker.
	Snapshot proxy.Snapshot
	// BudgetEngine keeps the budgets' counters; nil when the budgets
	// section configures nothing. A reload whose budgets section is
	// unchanged takes the previous engine over, counters and all.
	BudgetEngine *budget.Engine
	// Fleet is the client of state.redis, which the sidecar opens at start
	// (OpenFleet) and every reload takes over; nil without state.redis.
	Fleet *redisstate.Client

	// Bundles are the activated policy bundles (policies.bundles) whose
	// policies LoadedPolicies holds; nil before any is activated.
	Bundles []*policies.Bundle

	data    []byte // the bytes parsed, which WithBundle parses again
	offline bool   // parsed by LoadOffline
}

// Load reads, decodes and validates a configuration file. Every error
// names the file, the line and the field.
func Load(path string) (*Loaded, error) { return LoadAfter(path, nil) }

// LoadAfter is Load for a file that replaces prev (nil at start): policies
// unchanged since prev are taken over rather than compiled again.
func LoadAfter(path string, prev *Loaded) (*Loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseAfter(path, data, prev)
}

// Parse decodes and validates configuration bytes; path names the file in
// errors and is where relative files resolve.
func Parse(path string, data []byte) (*Loaded, error) {
	return ParseAfter(path, data, nil)
}

// unsetEnvRef is a ${NAME} reference, as proxy expands them.
var unsetEnvRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// LoadOffline is Load for checks that send nothing (policy test, policy
// eval): a ${NAME} in a tool's inject_headers whose variable is not set
// expands to a placeholder instead of stopping the load. Its value never
// leaves the process, and these commands show injected secrets as "(set)".
func LoadOffline(path string) (*Loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parseWith(path, data, nil, true)
}

// ParseAfter is Parse for a configuration that replaces prev.
func ParseAfter(path string, data []byte, prev *Loaded) (*Loaded, error) {
	return parseWith(path, data, prev, false)
}

// parseWith is ParseAfter; offline is LoadOffline's.
func parseWith(path string, data []byte, prev *Loaded, offline bool) (lc *Loaded, err error) {
	lc = &Loaded{Path: path, Version: section.Version(data), data: data, offline: offline}
	if err := yamlfile.Decode(path, data, &lc.File); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if offline {
		for i := range lc.Tools {
			for k, v := range lc.Tools[i].InjectHeaders {
				lc.Tools[i].InjectHeaders[k] = unsetEnvRef.ReplaceAllStringFunc(v, func(m string) string {
					if val, ok := os.LookupEnv(m[2 : len(m)-1]); ok && val != "" {
						return m
					}
					return "placeholder-for-unset-" + m[2:len(m)-1]
				})
			}
		}
	}
	if err := lc.File.validate(path, data); err != nil {
		return nil, err
	}
	var before *policies.Loaded
	if prev != nil {
		// The bundles activated so far stay in force across a reload.
		before, lc.Bundles = prev.LoadedPolicies, prev.Bundles
	}
	lc.Version = section.Version(append([]byte(lc.Version), lc.Config.SchemaDigest()...))
	lc.bindBudgets(prev)
	if err := lc.bindPolicies(section.Dir(path), before); err != nil {
		return nil, locate(path, data, err)
	}
	if lc.BudgetEngine != nil {
		lc.Snapshot.Budgets = budgetengine.Adapt(lc.BudgetEngine)
	}
	lc.Snapshot.ServerToolNames = serverToolNames(&lc.Config, &lc.Approvals)
	return lc, nil
}

// Files returns the files the configuration file at path, holding data,
// depends on, itself first: what each section lists (proxy.Config.Files,
// policies.Config.Files). data is decoded leniently, so a file that does
// not validate, or does not decode whole, still names what it can.
func Files(path string, data []byte) []string {
	var f File
	_ = yaml.Unmarshal(data, &f)
	dir := section.Dir(path)
	files := []string{path}
	files = append(files, f.Config.Files(dir)...)
	return append(files, f.Policies.Files(dir)...)
}

// wasmCacheDir resolves policies.wasm_cache: "" and "off" as they are, a
// relative folder below dir.
func wasmCacheDir(dir, cache string) string {
	if cache == "off" {
		return cache
	}
	return section.Resolve(dir, cache)
}

// LoadApprovals reads a configuration file as LoadEvents does and
// validates its events and approvals sections only, for the commands that
// decide approvals (`toolgate approvals`, the dashboard).
func LoadApprovals(path string) (events.Config, approval.Config, error) {
	f, err := loadSections(path, "events", "approvals")
	if err != nil {
		return events.Config{}, approval.Config{}, err
	}
	return f.Events, f.Approvals, nil
}

// LoadEvents reads and decodes a configuration file as Load does (strictly:
// an unknown key anywhere is an error) but validates only its events
// section: no schema or policy is read, compiled or tested. Commands that
// only read the events' destination (the dashboard) use it.
func LoadEvents(path string) (events.Config, error) {
	f, err := loadSections(path, "events")
	if err != nil {
		return events.Config{}, err
	}
	return f.Events, nil
}

// loadSections reads and decodes the configuration file at path strictly
// and validates only the named sections, each on its own (no check
// against another section runs).
func loadSections(path string, only ...string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var f File
	if err := yamlfile.Decode(path, data, &f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := f.validate(path, data, only...); err != nil {
		return nil, err
	}
	return &f, nil
}

// check is one step of validating the file: a section's own Validate, or
// a check of a section against others validated before it (cross).
type check struct {
	// section is the section's key in the file, under which its errors
	// are placed; "" for the proxy's section, at the top level.
	section string
	run     func() error
	cross   bool
}

// checks lists the validation of every section of f, in the order it
// runs: each section's Validate applies its defaults (stated in its own
// package), rejects conflicts and precomputes; building what the sections
// describe (budget engine, policies, snapshot) comes after all of them.
// dir is where relative paths resolve.
func (f *File) checks(dir string) []check {
	return []check{
		{section: "", run: func() error { return f.Config.Validate(dir) }},
		{section: "admin", run: func() error { return f.Admin.Validate(dir, f.Listen.AllowNonLoopback) }},
		{section: "", cross: true, run: func() error { return f.Config.ClaimListen("admin.listen", f.Admin.Listen) }},
		{section: "reload", run: f.Reload.Validate},
		{section: "events", run: func() error { return f.Events.Validate(dir) }},
		{section: "tracing", run: f.Tracing.Validate},
		{section: "approvals", run: func() error { return f.Approvals.Validate(dir, len(f.Events.ClickHouse.Addr) > 0) }},
		{section: "approvals", cross: true, run: func() error { return checkApprovalNames(&f.Config, &f.Approvals) }},
		{section: "state.redis", run: f.State.Redis.Validate},
		{section: "budgets", run: func() error { return f.Budgets.Validate(toolNames(&f.Config), proxy.UpstreamKey) }},
	}
}

// validate runs f's checks; with only, just the named sections' own. Its
// error is placed at its field's line: FILE:LINE: field: message.
func (f *File) validate(path string, data []byte, only ...string) error {
	for _, c := range f.checks(section.Dir(path)) {
		if len(only) > 0 && (c.cross || !slices.Contains(only, c.section)) {
			continue
		}
		if err := c.run(); err != nil {
			if c.section != "" {
				err = section.Under(c.section, err)
			}
			return locate(path, data, err)
		}
	}
	return nil
}

// toolNames are the names of the proxy section's tools, in order.
func toolNames(pc *proxy.Config) []string {
	names := make([]string, len(pc.Tools))
	for i, t := range pc.Tools {
		names[i] = t.Name
	}
	return names
}

// bindPolicies compiles the policies section, runs every policy's unit
// tests (a policy whose tests fail never takes effect), and builds each
// tool's policy set into the snapshot.
func (lc *Loaded) bindPolicies(dir string, prev *policies.Loaded) (err error) {
	pol, err := lc.Policies.Load(dir, policies.LoadOptions{Rego: rego.Host{}, Wasm: lazyWasmHost{cacheDir: wasmCacheDir(dir, lc.Policies.WasmCache)},
		Previous: prev, Bundles: lc.Bundles})
	if err != nil {
		return section.Under("policies", err)
	}
	defer func() {
		if err != nil {
			_ = pol.Close(context.Background(), prev)
		}
	}()
	rep, err := pol.RunTests(context.Background())
	if err != nil {
		return section.At("policies", err)
	}
	if rep.Failed > 0 {
		return section.Errorf("policies", "%d policy test(s) failed: %s", rep.Failed, failedTests(rep))
	}
	checkers := map[string]proxy.Checker{}
	for i, t := range lc.Tools {
		set, err := pol.SetFor(t.Name, t.Policies, t.PolicyMode, t.FailOpen)
		if err != nil {
			var fe *section.Error
			if errors.As(err, &fe) {
				return section.Under(fmt.Sprintf("tools[%d]", i), err)
			}
			return err
		}
		if set != nil {
			checkers[t.Name] = set
		}
	}
	answers, err := answerCheckers(pol, lc.Tools)
	if err != nil {
		return err
	}
	lc.LoadedPolicies = pol
	lc.Snapshot = proxy.Snapshot{
		Config: &lc.Config, Checkers: checkers, AnswerCheckers: answers, PolicyHeaders: pol.Headers(),
		Version: lc.Version, PolicyVersion: pol.Version(),
	}
	return nil
}

// bindBudgets builds the budgets section's engine (which parseWith puts
// in the snapshot): prev's engine when the section is unchanged (its
// counters carry on), else a new one that carries prev's metrics on.
func (lc *Loaded) bindBudgets(prev *Loaded) {
	var m *budget.Metrics
	if prev != nil && prev.BudgetEngine != nil {
		if reflect.DeepEqual(prev.Budgets, lc.Budgets) {
			lc.BudgetEngine = prev.BudgetEngine
		}
		m = prev.BudgetEngine.Metrics()
	}
	if lc.BudgetEngine == nil {
		lc.BudgetEngine = budget.New(&lc.Budgets, m)
	}
	if prev != nil && prev.Fleet != nil {
		lc.Fleet = prev.Fleet
		if lc.BudgetEngine != nil {
			lc.BudgetEngine.UseFleet(lc.Fleet)
		}
	}
}

// OpenFleet opens the client of state.redis (when configured) and puts
// the budget engine's counters in it. The sidecar calls it once, at
// start; reloads take the client over. close releases it.
func (lc *Loaded) OpenFleet() (close func() error) {
	if !lc.State.Redis.Enabled() {
		return func() error { return nil }
	}
	lc.Fleet = redisstate.New(lc.State.Redis)
	if lc.BudgetEngine != nil {
		lc.BudgetEngine.UseFleet(lc.Fleet)
	}
	return lc.Fleet.Close
}

// WithBundle returns lc with bundle b activated: a new Loaded, parsed
// again from the bytes lc was parsed from (so it shares nothing the proxy
// writes to with lc's snapshot), whose policies are the file's and every
// activated bundle's, b replacing the bundle of its name, and whose
// start-only sections are lc's. lc is not changed. Policies unchanged
// since lc are taken over, the others compiled, and every policy's unit
// tests run; on error nothing is in force that was not before. The caller
// swaps the snapshot in and closes lc's policies the result does not keep
// (ClosePolicies).
func (lc *Loaded) WithBundle(b *policies.Bundle) (*Loaded, error) {
	prev := *lc
	prev.Bundles = make([]*policies.Bundle, 0, len(lc.Bundles)+1)
	for _, have := range lc.Bundles {
		if have.Name != b.Name {
			prev.Bundles = append(prev.Bundles, have)
		}
	}
	prev.Bundles = append(prev.Bundles, b)
	next, err := parseWith(lc.Path, lc.data, &prev, lc.offline)
	if err != nil {
		return nil, err
	}
	next, _ = next.KeepStartSections(lc)
	return next, nil
}

// KeepStartSections returns lc as a reload puts it in force after
// inForce: a copy of lc whose admin, events, reload and tracing sections are
// inForce's (they take effect only at start), and the names of those
// sections lc had changed, in that order. lc is not changed;
// the copy shares lc's compiled policies and snapshot.
func (lc *Loaded) KeepStartSections(inForce *Loaded) (*Loaded, []string) {
	var changed []string
	if lc.Admin != inForce.Admin {
		changed = append(changed, "admin")
	}
	if !reflect.DeepEqual(lc.Events, inForce.Events) {
		changed = append(changed, "events")
	}
	if lc.Reload != inForce.Reload {
		changed = append(changed, "reload")
	}
	if !reflect.DeepEqual(lc.Tracing, inForce.Tracing) {
		changed = append(changed, "tracing")
	}
	if !reflect.DeepEqual(lc.Approvals, inForce.Approvals) {
		changed = append(changed, "approvals")
	}
	if !reflect.DeepEqual(lc.State, inForce.State) {
		changed = append(changed, "state")
	}
	next := *lc
	next.Admin, next.Events, next.Reload, next.Tracing, next.Approvals = inForce.Admin, inForce.Events, inForce.Reload, inForce.Tracing, inForce.Approvals
	next.State, next.Fleet = inForce.State, inForce.Fleet
	return &next, changed
}

// ClosePolicies releases the policies of lc that next does not take over
// (WASM instance pools); next may be nil. Calls still deciding with them
// finish first.
func (lc *Loaded) ClosePolicies(next *Loaded) {
	var keep *policies.Loaded
	if next != nil {
		keep = next.LoadedPolicies
	}
	_ = lc.LoadedPolicies.Close(context.Background(), keep)
}

// failedTests names the failed tests of a report, at most five.
func failedTests(rep policies.TestReport) string {
	var names []string
	for _, res := range rep.Results {
		for _, r := range res {
			if !r.Pass && len(names) < 5 {
				names = append(names, r.Name+" ("+r.Location+")")
			}
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// fieldPather is an error at one field of the file; section.Error is one.
type fieldPather interface{ FieldPath() string }

// locate prefixes err with the file and, when err names a field, the line
// of that field in data, the file's content: FILE:LINE: field: message. An
// error in an inline schema is placed at the line of the keyword its
// JSON pointer names; one in a schema file names the file and that line
// ("FILE:LINE: field: SCHEMA.json:LINE: message").
// The file was decoded already; its node tree is built here, only to place
// an error.
func locate(path string, data []byte, err error) error {
	field := ""
	var fp fieldPather
	if errors.As(err, &fp) {
		field = fp.FieldPath()
	}
	var root yaml.Node
	if field != "" {
		_ = yaml.Unmarshal(data, &root)
	}
	line := yamlfile.LineOf(&root, field)
	if l := schemaLine(&root, field, err); l > 0 {
		line = l // the offending keyword's own line in an inline schema
	}
	if f, l := schemaFileLine(&root, section.Dir(path), field, err); l > 0 {
		err = withSchemaFileLine(err, f, l) // and its line in a schema file
	}
	if line > 0 {
		return fmt.Errorf("%s:%d: %w", path, line, err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Locate places err, a *section.Error at a field of the configuration file
// at path, at the field's line: FILE:LINE: field: message. Commands that
// check a field against their own flags use it.
func Locate(path string, err error) error {
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return locate(path, data, err)
}
