package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// fileConfig is the whole configuration file: each package owns its section
// and validates it; this file only composes them.
type fileConfig struct {
	// The proxy's section sits at the top level: listen, unmatched, tools...
	proxy.Config `yaml:",inline"`
	// Admin is the admin listener (health, readiness, metrics, status).
	Admin adminConfig `yaml:"admin"`
	// Events says where events go.
	Events eventsConfig `yaml:"events"`
	// Policies are the Rego policies tools bind by name.
	Policies policies.Config `yaml:"policies"`
	// Reload configures hot reload.
	Reload reloadSection `yaml:"reload"`
}

// reloadSection configures hot reload. It takes effect at start; a reload
// that changes it says a restart is needed.
type reloadSection struct {
	// Settle is how long the configuration file and every file it names
	// must read the same before a reload reads them, so a file still being
	// written is never loaded half-written. It applies to reloads asked for
	// by a file change, SIGHUP and POST /reload alike. Default
	// defaultReloadSettle (250ms); at most maxReloadSettle (1m).
	Settle time.Duration `yaml:"settle"`
}

const (
	// defaultReloadSettle is reload.settle's default.
	defaultReloadSettle = 250 * time.Millisecond
	// maxReloadSettle bounds reload.settle.
	maxReloadSettle = time.Minute
)

// adminConfig configures the admin listener.
type adminConfig struct {
	// Listen is the admin address. Default "127.0.0.1:18090"; "off" disables it.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiler (net/http/pprof) under /debug/pprof/ on the
	// admin listener, for profiling a running sidecar in place. Default
	// false. It needs a loopback admin.listen, whatever
	// listen.allow_non_loopback says, and answers loopback callers only.
	Pprof bool `yaml:"pprof"`
}

const defaultAdminListen = "127.0.0.1:18090"

// eventsConfig configures the event path.
type eventsConfig struct {
	// Sidecar names this instance in events. Default: the host name.
	Sidecar string `yaml:"sidecar"`
	// Queue bounds the in-memory queue between calls and the destination.
	Queue sink.QueueConfig `yaml:"queue"`
	// File is the NDJSON destination, used unless ClickHouse is configured.
	File sink.FileConfig `yaml:"file"`
	// ClickHouse sends events to ClickHouse, through the spool, when its
	// addr is set.
	ClickHouse sink.ClickHouseConfig `yaml:"clickhouse"`
	// Spool is the disk spool in front of ClickHouse: events are written
	// there first and deleted only once ClickHouse has them.
	Spool sink.SpoolConfig `yaml:"spool"`
}

// loadedConfig is a validated configuration and where it came from.
type loadedConfig struct {
	fileConfig
	path     string
	version  string // content hash of the file and its schemas
	policies *policies.Loaded
	snapshot proxy.Snapshot
}

// loadConfig reads, decodes and validates a configuration file. Every error
// names the file, the line and the field.
func loadConfig(path string) (*loadedConfig, error) { return loadConfigAfter(path, nil) }

// loadConfigAfter is loadConfig for a file that replaces prev (nil at start):
// policies unchanged since prev are taken over rather than compiled again.
func loadConfigAfter(path string, prev *loadedConfig) (*loadedConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parseConfigAfter(path, data, prev)
}

// parseConfig decodes and validates configuration bytes; path names the
// file in errors and is where relative files resolve.
func parseConfig(path string, data []byte) (*loadedConfig, error) {
	return parseConfigAfter(path, data, nil)
}

// parseConfigAfter is parseConfig for a configuration that replaces prev.
func parseConfigAfter(path string, data []byte, prev *loadedConfig) (lc *loadedConfig, err error) {
	lc = &loadedConfig{path: path, version: contentVersion(data)}
	if err := decodeYAML(path, data, &lc.fileConfig); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	where := func(err error) error {
		var fe *proxy.FieldError
		var pe *policies.FieldError
		field := ""
		switch {
		case errors.As(err, &fe):
			field = fe.Path
		case errors.As(err, &pe):
			field = pe.Path
		}
		if line := lineOf(&root, field); line > 0 {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := lc.Config.Validate(filepath.Dir(path)); err != nil {
		return nil, where(err)
	}
	if lc.Admin.Listen == "" {
		lc.Admin.Listen = defaultAdminListen
	}
	if lc.Admin.Listen != "off" {
		if err := proxy.CheckListenAddr(lc.Admin.Listen, lc.Listen.AllowNonLoopback); err != nil {
			return nil, where(&proxy.FieldError{Path: "admin.listen", Err: err})
		}
		if !strings.HasSuffix(lc.Admin.Listen, ":0") {
			taken := map[string]string{lc.Listen.Forward: "listen.forward"}
			if lc.Listen.Transparent != "" {
				taken[lc.Listen.Transparent] = "listen.transparent"
			}
			for i, r := range lc.Listen.Reverse {
				taken[r.Listen] = fmt.Sprintf("listen.reverse[%d].listen", i)
			}
			if other, ok := taken[lc.Admin.Listen]; ok {
				return nil, where(&proxy.FieldError{Path: "admin.listen", Err: fmt.Errorf("address %s is already used by %s", lc.Admin.Listen, other)})
			}
		}
	}
	if lc.Admin.Pprof {
		if lc.Admin.Listen == "off" {
			return nil, where(&proxy.FieldError{Path: "admin.pprof", Err: errors.New("needs the admin listener (admin.listen is off)")})
		}
		if err := proxy.CheckListenAddr(lc.Admin.Listen, false); err != nil {
			return nil, where(&proxy.FieldError{Path: "admin.pprof", Err: fmt.Errorf("serves on a loopback admin.listen only: %w", err)})
		}
	}
	switch s := lc.Reload.Settle; {
	case s == 0:
		lc.Reload.Settle = defaultReloadSettle
	case s < 0 || s > maxReloadSettle:
		return nil, where(&proxy.FieldError{Path: "reload.settle", Err: fmt.Errorf("%s is outside 0 to %s", s, maxReloadSettle)})
	}
	if err := validateEvents(&lc.Events, filepath.Dir(path)); err != nil {
		return nil, where(sectionError("events", err))
	}
	var before *policies.Loaded
	if prev != nil {
		before = prev.policies
	}
	if err := lc.bindPolicies(filepath.Dir(path), before); err != nil {
		return nil, where(err)
	}
	if lc.Events.Sidecar == "" {
		lc.Events.Sidecar, _ = os.Hostname()
	}
	return lc, nil
}

// bindPolicies compiles the policies section, runs every policy's unit
// tests (a policy whose tests fail never takes effect), and builds each
// tool's policy set into the snapshot.
func (lc *loadedConfig) bindPolicies(dir string, prev *policies.Loaded) (err error) {
	pol, err := lc.Policies.Load(dir, policies.LoadOptions{Wasm: wasmHost(), Previous: prev})
	if err != nil {
		var pe *policies.FieldError
		if errors.As(err, &pe) {
			return &policies.FieldError{Path: "policies." + pe.Path, Err: pe.Err}
		}
		return err
	}
	defer func() {
		if err != nil {
			_ = pol.Close(context.Background(), prev)
		}
	}()
	rep, err := pol.RunTests(context.Background())
	if err != nil {
		return &policies.FieldError{Path: "policies", Err: err}
	}
	if rep.Failed > 0 {
		return &policies.FieldError{Path: "policies", Err: fmt.Errorf("%d policy test(s) failed: %s", rep.Failed, failedTests(rep))}
	}
	checkers := map[string]proxy.Checker{}
	for i, t := range lc.Tools {
		set, err := pol.SetFor(t.Name, t.Policies, t.PolicyMode, t.FailOpen)
		if err != nil {
			var pe *policies.FieldError
			if errors.As(err, &pe) {
				return &policies.FieldError{Path: fmt.Sprintf("tools[%d].%s", i, pe.Path), Err: pe.Err}
			}
			return err
		}
		if set != nil {
			checkers[t.Name] = set
		}
	}
	lc.version = contentVersion(append([]byte(lc.version), lc.Config.SchemaDigest()...))
	lc.policies = pol
	lc.snapshot = proxy.Snapshot{
		Config: &lc.Config, Checkers: checkers, PolicyHeaders: pol.Headers(),
		Version: lc.version, PolicyVersion: pol.Version(),
	}
	return nil
}

// closePolicies releases the policies of lc that next does not take over
// (WASM instance pools); next may be nil. Calls still deciding with them
// finish first.
func (lc *loadedConfig) closePolicies(next *loadedConfig) {
	var keep *policies.Loaded
	if next != nil {
		keep = next.policies
	}
	_ = lc.policies.Close(context.Background(), keep)
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

// sectionError places a package's "field: message" error under its section
// of the file, so "queue.batch_size: ..." becomes events.queue.batch_size.
func sectionError(section string, err error) error {
	field, msg, ok := strings.Cut(err.Error(), ": ")
	if !ok || strings.ContainsAny(field, " ") {
		return &proxy.FieldError{Path: section, Err: err}
	}
	return &proxy.FieldError{Path: section + "." + field, Err: errors.New(msg)}
}

func contentVersion(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// decodeYAML decodes the one YAML document of a file strictly (unknown keys
// are errors) into v. Errors name the file and line; an empty file returns
// io.EOF.
func decodeYAML(path string, data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		return yamlError(path, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if extra.Line > 0 {
			return fmt.Errorf("%s:%d: the file holds more than one YAML document", path, extra.Line)
		}
		return fmt.Errorf("%s: the file holds more than one YAML document", path)
	}
	return nil
}

// yamlError rewrites a decoding error as FILE:LINE: message lines.
func yamlError(path string, data []byte, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var root yaml.Node
		_ = yaml.Unmarshal(data, &root)
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = path + ":" + typeErrorText(&root, m)
		}
		return errors.New(strings.Join(msgs, "\n"))
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", path, m[1], msg[len(m[0]):])
	}
	return fmt.Errorf("%s: %s", path, msg)
}

var (
	yamlLine      = regexp.MustCompile(`^line (\d+): `)
	unknownField  = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	wrongType     = regexp.MustCompile(`^line (\d+): cannot unmarshal !!(\w+) .* into (\S+)$`)
	yamlTypeNames = map[string]string{"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
		"map": "a mapping", "seq": "a list", "null": "null", "timestamp": "a timestamp"}
)

// typeErrorText rewrites one of yaml.v3's decoding errors ("line 7: field
// pth not found in type proxy.MatchConfig") as "7: tools[0].match.pth:
// unknown field", naming the field by its path and leaving Go types out.
func typeErrorText(root *yaml.Node, m string) string {
	if g := unknownField.FindStringSubmatch(m); g != nil {
		line, _ := strconv.Atoi(g[1])
		return g[1] + ": " + fieldAt(root, line, g[2]) + ": unknown field"
	}
	if g := wrongType.FindStringSubmatch(m); g != nil {
		line, _ := strconv.Atoi(g[1])
		got := yamlTypeNames[g[2]]
		if got == "" {
			got = g[2]
		}
		return g[1] + ": " + fieldAt(root, line, "") + ": expected " + goTypeWords(g[3]) + ", got " + got
	}
	return strings.TrimPrefix(m, "line ")
}

// goTypeWords names a Go type the way a configuration author thinks of it.
func goTypeWords(t string) string {
	switch {
	case t == "time.Duration":
		return "a duration such as 30s or 250ms"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}

// fieldAt finds the dotted path of the key (or value) at line; name, when
// given, is the key expected there. It falls back to name alone.
func fieldAt(root *yaml.Node, line int, name string) string {
	var found string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if found != "" || n == nil {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if k.Line == line && (name == "" || k.Value == name) {
					found = p
					return
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if c.Line == line && c.Kind == yaml.ScalarNode && name == "" {
					found = p
					return
				}
				walk(c, p)
			}
		}
	}
	walk(root, "")
	if found == "" {
		return name
	}
	return found
}

// lineOf finds the line of a field path such as "tools[2].match.path" in a
// decoded YAML document, falling back to the deepest ancestor found.
func lineOf(root *yaml.Node, field string) int {
	if root == nil || len(root.Content) == 0 {
		return 0
	}
	n := root.Content[0]
	line := n.Line
	if field == "" {
		return 0
	}
	for _, part := range splitField(field) {
		if idx, err := strconv.Atoi(part); err == nil && n.Kind == yaml.SequenceNode {
			if idx < 0 || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
			continue
		}
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				line = n.Content[i].Line
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// splitField splits "tools[2].match.path" into tools, 2, match, path.
func splitField(field string) []string {
	field = strings.NewReplacer("[", ".", "]", "").Replace(field)
	return strings.Split(field, ".")
}
