package conf

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/listen"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultForwardListen    = "127.0.0.1:18080"
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxEnvelopeBytes = 8 << 20
	DefaultTimeout          = 30 * time.Second
	DefaultAgentHeader      = "X-Toolgate-Agent"
	DefaultSessionHeader    = "X-Toolgate-Session"
	DefaultMaxIdlePerHost   = 512
	DefaultDialTimeout      = 5 * time.Second

	DefaultMaxConns          = 1024
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxJSONDepth      = 64
	DefaultMaxCallerIDBytes  = 256
)

// Config is the proxy's section of the configuration file. It is plain data:
// Validate applies defaults, rejects conflicts and compiles what every call
// needs (path templates, schemas), after which the Config must not change.
type Config struct {
	// Listen says where the proxy accepts calls.
	Listen ListenConfig `yaml:"listen"`
	// Unmatched says what happens to calls that match no tool on a host
	// no tool names: "pass" (forwarded and recorded; the default) or "deny"
	// (refused as policy/not_allowlisted, never forwarded). A host a tool
	// names (match.host) is closed whatever this says: see Hosts.
	Unmatched string `yaml:"unmatched"`
	// Hosts opens hosts that tools name. A host a tool names is closed by
	// default: a call to it that matches no tool is refused as
	// policy/not_allowlisted. An entry here sets what happens instead.
	// Default: none (every tool host closed).
	Hosts []HostConfig `yaml:"hosts"`
	// MaxBodyBytes is the largest request body read from a caller; a larger
	// one is refused as validation/body_too_large without being read in full.
	// Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxEnvelopeBytes is the largest upstream answer rewritten into the
	// envelope; a larger answer passes through raw and its event says the
	// envelope was not applied. Default 8 MiB.
	MaxEnvelopeBytes int64 `yaml:"max_envelope_bytes"`
	// Headers names the request headers that identify the caller.
	Headers HeaderConfig `yaml:"headers"`
	// Upstream tunes the connections to upstream servers.
	Upstream TransportConfig `yaml:"upstream"`
	// Limits bound what a caller may hold: connections, time, nesting.
	Limits LimitsConfig `yaml:"limits"`
	// Tools are the routes toolgate inspects, tried most specific first.
	Tools []ToolConfig `yaml:"tools"`
	// TLS is HTTPS interception (the CA) and upstream verification.
	TLS listen.TLSConfig `yaml:"tls"`
	// Egress guards the destinations no tool names (proxy/egress): a call
	// or tunnel to one that is or resolves to a loopback, private,
	// link-local, metadata or other non-public address is refused as
	// policy/egress_denied unless egress.allow lists it. Default (also
	// when the section is absent): mode enforce, allow none, lookup_timeout
	// 5s; tools' match.host and reverse listeners' upstreams are never
	// checked.
	Egress egress.Config `yaml:"egress"`

	dir      string            // where relative schema files resolve
	Compiled []*Tool           // compiled by Validate
	digest   hash.Hash         // of every schema file read
	hostSet  map[string]string // canonical "host" and "host:port" of Hosts -> mode
	Aliases  *hostAliases
	// listenAt is each claimed listen address -> the field that claims it.
	listenAt map[string]string
}

// HostConfig says what happens to unmatched calls on one host that tools
// name.
type HostConfig struct {
	// Host is a host a tool's match.host names, with an optional port; an
	// entry with a port applies to that port only, and wins over one
	// without. Required.
	Host string `yaml:"host"`
	// Unmatched is "deny" (refused as policy/not_allowlisted; the default),
	// "pass" (forwarded unchecked and recorded, as before toolgate knew the
	// host), or "dry_run" (forwarded, and the event records the refusal
	// that deny would have made, in dry_run_denied and dry_run_violations).
	Unmatched string `yaml:"unmatched"`
}

// ListenConfig says which listeners run. Every address must be a loopback
// address unless AllowNonLoopback is set: a sidecar shares its pod's network
// namespace, and anything wider risks an open proxy.
type ListenConfig struct {
	// Forward is the HTTP forward-proxy address legacy processes name in
	// HTTP_PROXY. Default "127.0.0.1:18080"; "off" disables it.
	Forward string `yaml:"forward"`
	// Reverse lists listeners each bound to one upstream base URL.
	Reverse []ReverseConfig `yaml:"reverse"`
	// Transparent is the address of the listener for connections
	// redirected by iptables (REDIRECT), such as "127.0.0.1:15001"; Linux
	// only, and it needs tls.ca_cert. Default "" (off); "off" is the same.
	Transparent string `yaml:"transparent"`
	// AllowNonLoopback permits non-loopback listen addresses. Default false.
	AllowNonLoopback bool `yaml:"allow_non_loopback"`
	// Server is what serves the forward and reverse listeners: "loop",
	// toolgate's HTTP/1.1 loop, which answers each request on its
	// connection's goroutine and hands what it does not serve (CONNECT,
	// Upgrade, Expect, HTTP/1.0, malformed requests) to net/http; or
	// "net/http", Go's server alone. Default "loop". Restart to change.
	Server string `yaml:"server"`
}

// The values of listen.server.
const (
	ServerLoop    = "loop"
	ServerNetHTTP = "net/http"
)

// ReverseConfig is one reverse listener: calls to Listen go to Upstream.
type ReverseConfig struct {
	// Listen is the address to accept calls on, such as "127.0.0.1:18081".
	Listen string `yaml:"listen"`
	// Upstream is the base URL calls are forwarded to, such as
	// "http://eutils.ncbi.nlm.nih.gov/entrez/eutils". A request for /esearch
	// goes to the base URL's path joined with /esearch. Required.
	Upstream string `yaml:"upstream"`

	Base *url.URL
}

// HeaderConfig names caller-identifying headers.
type HeaderConfig struct {
	// Agent is the header that names the calling agent. Default "X-Toolgate-Agent".
	Agent string `yaml:"agent"`
	// Session is the header that names the caller's session. Default "X-Toolgate-Session".
	Session string `yaml:"session"`
}

// TransportConfig tunes the shared upstream transport.
type TransportConfig struct {
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// per upstream host. Go's default of 2 halves throughput under load.
	// Default 512.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// DialTimeout bounds connecting to upstream. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
}

// LimitsConfig bounds what callers may hold on every listener (forward,
// reverse, transparent, and the connections CONNECT hands to the
// interceptor). Connection-level limits take effect only on restart.
type LimitsConfig struct {
	// MaxConns caps the connections open at once on each listener. A
	// connection over the cap is answered 503 with the envelope
	// (rate_limit/too_many_connections; on the transparent listener it is
	// closed) and counted in toolgate_proxy_connections_refused_total.
	// Default 1024.
	MaxConns int `yaml:"max_conns"`
	// ExplicitMaxConns is true when the file set MaxConns (Validate then keeps
	// it whatever the descriptor budget, Options.MaxCallerConns).
	ExplicitMaxConns bool
	// ReadHeaderTimeout bounds reading a request's line and headers.
	// Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers: a body that has not arrived in full by then (a chunked body
	// that never ends, one byte every few seconds) is cut off, the call
	// refused as validation/body_timeout (408) and the connection closed.
	// Default 30s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long between
	// requests. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxJSONDepth is the deepest nesting of arrays and objects a JSON body
	// may have; a deeper one is refused as validation/malformed_body.
	// Default 64.
	MaxJSONDepth int `yaml:"max_json_depth"`
	// MaxCallerIDBytes bounds the agent and session header values recorded
	// in events and given to policies (input.caller): a longer value is cut
	// at a UTF-8 boundary and ends with "...[truncated]". Default 256.
	MaxCallerIDBytes int `yaml:"max_caller_id_bytes"`
}

// MaxConnsSet reports whether the configuration file set max_conns; when
// it did not, the descriptor budget (Options.MaxCallerConns) caps the
// listeners instead.
func (l LimitsConfig) MaxConnsSet() bool { return l.ExplicitMaxConns }

// validate applies the defaults and rejects negative limits.
func (l *LimitsConfig) validate() error {
	l.ExplicitMaxConns = l.MaxConns != 0
	ints := []struct {
		v    *int
		def  int
		name string
	}{
		{&l.MaxConns, DefaultMaxConns, "max_conns"},
		{&l.MaxJSONDepth, DefaultMaxJSONDepth, "max_json_depth"},
		{&l.MaxCallerIDBytes, DefaultMaxCallerIDBytes, "max_caller_id_bytes"},
	}
	for _, f := range ints {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 0 {
			return fieldErr("limits."+f.name, "must be positive")
		}
	}
	durs := []struct {
		v    *time.Duration
		def  time.Duration
		name string
	}{
		{&l.ReadHeaderTimeout, DefaultReadHeaderTimeout, "read_header_timeout"},
		{&l.BodyTimeout, DefaultBodyTimeout, "body_timeout"},
		{&l.IdleTimeout, DefaultIdleTimeout, "idle_timeout"},
	}
	for _, f := range durs {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 0 {
			return fieldErr("limits."+f.name, "must be positive")
		}
	}
	return nil
}

// Argument sources, as named in ToolConfig.Args.
const (
	SourceQuery = "query"
	SourceJSON  = "json"
	SourceForm  = "form"
	SourcePath  = "path"
)

// Envelope modes, as named in ToolConfig.Envelope.
const (
	EnvelopeOnRequest = "on_request"
	EnvelopeAlways    = "always"
	EnvelopeNever     = "never"
)

// Unmatched modes, as named in Config.Unmatched.
const (
	UnmatchedPass   = "pass"
	UnmatchedDeny   = "deny"
	UnmatchedDryRun = "dry_run" // hosts only
)

// ToolConfig is one tool: which calls it matches, where their arguments come
// from, how they are checked, and how the answer is shaped.
type ToolConfig struct {
	// Name identifies the tool in envelopes, events and metrics: lower-case
	// letters, digits, '_', '-' and '.'. Required and unique.
	Name string `yaml:"name"`
	// Match selects the calls that belong to this tool.
	Match MatchConfig `yaml:"match"`
	// Args lists where arguments come from: query, json, form, path. Default:
	// path variables, the query string, and the body by its Content-Type
	// (JSON or form). A name given by two sources is refused.
	Args []string `yaml:"args"`
	// Schema is an inline JSON Schema (draft 2020-12 or draft-07) for the
	// arguments: a mapping, or a boolean (true accepts any arguments, false
	// refuses every call). At most one of Schema and SchemaFile. Without
	// either, arguments are not validated.
	Schema any `yaml:"schema"`
	// SchemaFile is a JSON Schema file, relative to the configuration file.
	SchemaFile string `yaml:"schema_file"`
	// Strict refuses, at every depth, an argument that no schema describing
	// its location declares or evaluates: unevaluatedProperties: false at
	// every location (see docs/config.md). Default true.
	Strict *bool `yaml:"strict"`
	// UnknownFormats is what a schema's "format" that toolgate does not
	// check (a typo, or idn-email) does: "refuse" (the default) fails the
	// configuration load, naming the known formats; "ignore" loads the
	// schema and leaves that format unchecked. It applies to Schema,
	// SchemaFile and the mcp.tools schemas.
	UnknownFormats string `yaml:"unknown_formats"`
	// UnknownKeywords is what a schema keyword that the schema's draft does
	// not define (a typo such as "maxium", which would switch its check
	// off) does: "refuse" (the default) fails the configuration load,
	// naming the keyword's place and the keyword it most likely means;
	// "ignore" loads the schema and the keyword does nothing. Keywords
	// starting with "x-" are always allowed. It applies to Schema,
	// SchemaFile, the answer schema and the mcp.tools schemas.
	UnknownKeywords string `yaml:"unknown_keywords"`
	// Answer checks what upstream answers before the caller sees it
	// (answer_schema.go). Default: answers are not checked.
	Answer AnswerConfig `yaml:"answer"`
	// Timeout bounds the upstream exchange, answer body included. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// Envelope is when the caller gets the envelope: "on_request" (when the
	// request asks, the default), "always", or "never". Refusals always do.
	Envelope string `yaml:"envelope"`
	// InjectHeaders are set on the upstream request after all checks passed,
	// so they never trip a check. "${NAME}" in a value expands to the
	// environment variable NAME when the configuration loads; a missing
	// variable is an error. They go only to the tool's own origin: the
	// host of match.host (required with inject_headers), its port (or the
	// scheme's default port when match.host names none), over HTTPS unless
	// InjectOverHTTP is set. A call routed to the tool but sent elsewhere
	// (another port, plain HTTP) is refused as policy/origin_mismatch.
	InjectHeaders map[string]string `yaml:"inject_headers"`
	// InjectOverHTTP lets InjectHeaders (and headers the tool's policies
	// inject) go over plain HTTP, where anyone on the path reads them.
	// Default false: injection over HTTPS only.
	InjectOverHTTP bool `yaml:"inject_over_http"`
	// Rules override the status table for this tool, first match wins.
	Rules bucketing.Rules `yaml:"rules"`
	// Policies names the policies (from the policies section) that decide
	// this tool's calls after the schema, run after the global ones.
	Policies []string `yaml:"policies"`
	// PolicyMode applies to every policy of this tool: "enforce" (the
	// default), "dry_run" (evaluate, forward anyway, record the would-be
	// denial) or "off". The stricter of the tool's and a policy's own mode
	// loses: either one in dry_run means dry run.
	PolicyMode string `yaml:"policy_mode"`
	// SchemaMode is what the tool's schema does with a call it would
	// refuse: "enforce" (the default: refuse it) or "dry_run" (forward it
	// anyway and record each violation in the event's dry_run_violations,
	// prefixed "schema: "), to try a schema on live traffic before it
	// refuses anything. An mcp route's schemas take mcp.dry_run instead.
	SchemaMode string `yaml:"schema_mode"`
	// Observe records the shape of each call's arguments (never their
	// values) in its event, for toolgate schema suggest; it refuses
	// nothing. true, or a mapping of options (ObserveConfig). Default off.
	Observe ObserveConfig `yaml:"observe"`
	// FailOpen lets a call through when a policy fails or runs past its
	// deadline; the event records the failure. Default false: such calls
	// are refused as policy/policy_error or policy/policy_timeout.
	FailOpen bool `yaml:"fail_open"`
	// Protocol is what the matched calls speak: "http" (the default: plain
	// HTTP calls whose arguments come from Args) or "mcp" (Model Context
	// Protocol JSON-RPC over streamable HTTP; see MCP and docs/mcp.md).
	Protocol string `yaml:"protocol"`
	// MCP configures a route whose protocol is "mcp". Default: learned
	// schemas, strict, enforced, unknown tools fetched.
	MCP MCPConfig `yaml:"mcp"`
}

// MatchConfig selects calls by host, method and path template.
type MatchConfig struct {
	// Host is the upstream host, with or without a port. Without a port it
	// matches any port. "" matches any host. It is compared in canonical
	// form (lower case, IP literals in one spelling, loopback names as one
	// host; docs/config.md, "Matching"). A host named here is closed: see
	// Config.Hosts.
	Host string `yaml:"host"`
	// Method is the HTTP method, compared upper-cased. "" matches any
	// method.
	Method string `yaml:"method"`
	// Path is a path template: literal segments and {name} variables, a
	// variable taking one whole segment or the part between a literal prefix
	// and suffix, as in "/v1/structure/{uniprot_id}" or
	// "/v1/documents/{doc_id}:batchUpdate". Required. Literals must be in
	// canonical form (no dot or empty segments, no escapes of unreserved
	// characters). A trailing slash is ignored in matching ("/v1/tools/"
	// calls match "/v1/tools"); the path goes upstream with a trailing
	// slash exactly when the template has one.
	Path string `yaml:"path"`
}

// fieldErr is a configuration error at one field, named by its path in the
// file ("tools[2].match.path") so the loader can point at the line.
func fieldErr(path, format string, args ...any) error {
	return section.Errorf(path, format, args...)
}

var toolName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,127}$`)

// ClaimListen records that the field at path listens on addr, or reports
// that another listener already does. Addresses ending in ":0" (a port the
// kernel picks) never collide. Validate claims the proxy's own listeners;
// the loader claims the others in the file (the admin listener) after it.
func (c *Config) ClaimListen(path, addr string) error {
	if c.listenAt == nil {
		c.listenAt = map[string]string{}
	}
	if strings.HasSuffix(addr, ":0") || addr == "off" {
		return nil
	}
	if other, dup := c.listenAt[addr]; dup {
		return fieldErr(path, "address %s is already used by %s", addr, other)
	}
	c.listenAt[addr] = path
	return nil
}

// Validate applies defaults, rejects conflicts and compiles the tools. dir is
// the folder relative schema files resolve against (the config file's).
func (c *Config) Validate(dir string) error {
	c.dir = dir
	c.digest = sha256.New()
	if c.Listen.Forward == "" {
		c.Listen.Forward = DefaultForwardListen
	}
	if err := c.checkListen("listen.forward", c.Listen.Forward); err != nil {
		return err
	}
	c.listenAt = map[string]string{}
	if err := c.ClaimListen("listen.forward", c.Listen.Forward); err != nil {
		return err
	}
	for i := range c.Listen.Reverse {
		rc := &c.Listen.Reverse[i]
		p := fmt.Sprintf("listen.reverse[%d]", i)
		if rc.Listen == "" {
			return fieldErr(p+".listen", "required")
		}
		if err := c.checkListen(p+".listen", rc.Listen); err != nil {
			return err
		}
		if err := c.ClaimListen(p+".listen", rc.Listen); err != nil {
			return err
		}
		u, err := url.Parse(rc.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldErr(p+".upstream", "must be an absolute http or https URL")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return fieldErr(p+".upstream", "must not carry a query or fragment")
		}
		rc.Base = u
	}
	if c.Listen.Transparent == "off" {
		c.Listen.Transparent = ""
	}
	if c.Listen.Transparent != "" {
		if err := c.checkListen("listen.transparent", c.Listen.Transparent); err != nil {
			return err
		}
		if err := c.ClaimListen("listen.transparent", c.Listen.Transparent); err != nil {
			return err
		}
	}
	switch c.Listen.Server {
	case "":
		c.Listen.Server = ServerLoop
	case ServerLoop, ServerNetHTTP:
	default:
		return fieldErr("listen.server", "unknown server %q; expected loop or net/http", c.Listen.Server)
	}
	if c.Listen.Forward == "off" && len(c.Listen.Reverse) == 0 && c.Listen.Transparent == "" {
		return fieldErr("listen", "no listener: the forward proxy is off and there are no reverse or transparent listeners")
	}
	switch c.Unmatched {
	case "":
		c.Unmatched = UnmatchedPass
	case UnmatchedPass, UnmatchedDeny:
	default:
		return fieldErr("unmatched", "unknown mode %q; expected pass or deny", c.Unmatched)
	}
	if err := c.Egress.Validate(); err != nil {
		return section.Under("egress", err)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytes < 0 {
		return fieldErr("max_body_bytes", "must be positive")
	}
	if c.MaxEnvelopeBytes == 0 {
		c.MaxEnvelopeBytes = DefaultMaxEnvelopeBytes
	}
	if c.MaxEnvelopeBytes < 0 {
		return fieldErr("max_envelope_bytes", "must be positive")
	}
	if c.Headers.Agent == "" {
		c.Headers.Agent = DefaultAgentHeader
	}
	if c.Headers.Session == "" {
		c.Headers.Session = DefaultSessionHeader
	}
	if c.Upstream.MaxIdleConnsPerHost == 0 {
		c.Upstream.MaxIdleConnsPerHost = DefaultMaxIdlePerHost
	}
	if c.Upstream.MaxIdleConnsPerHost < 0 {
		return fieldErr("upstream.max_idle_conns_per_host", "must be positive")
	}
	if c.Upstream.DialTimeout == 0 {
		c.Upstream.DialTimeout = DefaultDialTimeout
	}
	if c.Upstream.DialTimeout < 0 {
		return fieldErr("upstream.dial_timeout", "must be positive")
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	c.Compiled = c.Compiled[:0]
	names := map[string]int{}
	routes := map[string]int{}
	for i := range c.Tools {
		t, err := c.compileTool(i)
		if err != nil {
			return err
		}
		p := fmt.Sprintf("tools[%d]", i)
		if j, dup := names[t.Cfg.Name]; dup {
			return fieldErr(p+".name", "tool %q is already defined by tools[%d]", t.Cfg.Name, j)
		}
		names[t.Cfg.Name] = i
		key := t.Host + ":" + t.Port + " " + t.Cfg.Match.Method + " " + t.Tmpl.shape()
		if j, dup := routes[key]; dup {
			return fieldErr(p+".match", "matches exactly the same calls as tools[%d] (%s)", j, c.Tools[j].Name)
		}
		routes[key] = i
		c.Compiled = append(c.Compiled, t)
	}
	if err := c.checkLoopbackSpelling(); err != nil {
		return err
	}
	if err := c.validateHosts(); err != nil {
		return err
	}
	c.Aliases = newHostAliases(c.Compiled)
	return c.validateTLS()
}

// parseHostField parses a host with an optional port, as match.host and
// hosts[].host give it, into canonical form.
func parseHostField(s string) (host, port string, err error) {
	if strings.ContainsAny(s, "/ ") {
		return "", "", fmt.Errorf("%q is a URL or has spaces; give a host name, with an optional port", s)
	}
	h := s
	if hh, pp, err := net.SplitHostPort(s); err == nil {
		h = hh
		p, ok := canonical.Port(pp, "")
		if !ok || pp == "" {
			return "", "", fmt.Errorf("%q has an invalid port", s)
		}
		port = p
	}
	host, ok := canonical.Host(h)
	if !ok {
		return "", "", fmt.Errorf("%q is not a host name or IP address that toolgate can match unambiguously", s)
	}
	return host, port, nil
}

// validateHosts checks the hosts section: each entry names a tool host
// once, with a known mode.
func (c *Config) validateHosts() error {
	c.hostSet = map[string]string{}
	for i := range c.Hosts {
		hc := &c.Hosts[i]
		p := fmt.Sprintf("hosts[%d]", i)
		if hc.Host == "" {
			return fieldErr(p+".host", "required")
		}
		h, port, err := parseHostField(hc.Host)
		if err != nil {
			return fieldErr(p+".host", "%v", err)
		}
		if lb := c.loopbackToolHost(); lb != "" && IsLoopback(h) {
			h = lb // every loopback name is the one loopback host tools name
		}
		switch hc.Unmatched {
		case "":
			hc.Unmatched = UnmatchedDeny
		case UnmatchedDeny, UnmatchedPass, UnmatchedDryRun:
		default:
			return fieldErr(p+".unmatched", "unknown mode %q; expected deny, pass or dry_run", hc.Unmatched)
		}
		named := false
		for _, t := range c.Compiled {
			if t.Host == h && (port == "" || t.Port == "" || t.Port == port) {
				named = true
				break
			}
		}
		if !named {
			return fieldErr(p+".host", "no tool's match.host names %s; hosts opens hosts that tools close", hc.Host)
		}
		key := h
		if port != "" {
			key = net.JoinHostPort(h, port)
		}
		if _, dup := c.hostSet[key]; dup {
			return fieldErr(p+".host", "%s is listed twice", hc.Host)
		}
		c.hostSet[key] = hc.Unmatched
	}
	return nil
}

// checkLoopbackSpelling refuses tools that name the loopback host two ways
// (localhost and 127.0.0.1, say). Calls route every loopback name as the
// one loopback host tools name (canonical.go); with two, a call could take
// the one name on the other's port, match no tool and skip the checks of
// the tool it reaches.
func (c *Config) checkLoopbackSpelling() error {
	first := -1
	for i, t := range c.Compiled {
		if t.Host == "" || !IsLoopback(t.Host) {
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		if f := c.Compiled[first]; t.Host != f.Host {
			return fieldErr(fmt.Sprintf("tools[%d].match.host", i),
				"%s is the loopback host that tools[%d] (%s) names as %s; toolgate routes every loopback name as one host, so name it one way in every tool",
				c.Tools[i].Match.Host, first, f.Cfg.Name, c.Tools[first].Match.Host)
		}
	}
	return nil
}

// loopbackToolHost is the loopback host the tools name ("" for none).
func (c *Config) loopbackToolHost() string {
	for _, t := range c.Compiled {
		if t.Host != "" && IsLoopback(t.Host) {
			return t.Host
		}
	}
	return ""
}

// IsToolHost reports whether a tool names the canonical host h.
func (c *Config) IsToolHost(h string) bool {
	for _, t := range c.Compiled {
		if t.Host == h {
			return true
		}
	}
	return false
}

// HostMode returns what happens to an unmatched call to host:port: ""
// when no tool names it (Config.Unmatched decides), else the host's mode.
func (c *Config) HostMode(host, port string) string {
	named := false
	for _, t := range c.Compiled {
		if t.Host == host && (t.Port == "" || t.Port == port) {
			named = true
			break
		}
	}
	if !named {
		return ""
	}
	if m, ok := c.hostSet[net.JoinHostPort(host, port)]; ok {
		return m
	}
	if m, ok := c.hostSet[host]; ok {
		return m
	}
	return UnmatchedDeny
}

func (c *Config) checkListen(path, addr string) error {
	if addr == "off" && path == "listen.forward" {
		return nil
	}
	if err := CheckListenAddr(addr, c.Listen.AllowNonLoopback); err != nil {
		return section.At(path, err)
	}
	return nil
}

// CheckListenAddr checks a listen address: host:port with a port, and a
// loopback host unless allowWide. The admin listener shares the rule.
func CheckListenAddr(addr string, allowWide bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not a host:port address: %v", err)
	}
	if port == "" {
		return fmt.Errorf("missing port")
	}
	if allowWide || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		if host == "" {
			host = "an empty host (every interface)"
		}
		return fmt.Errorf("%s is not a loopback address; set listen.allow_non_loopback to listen wider", host)
	}
	return nil
}

func (c *Config) compileTool(i int) (*Tool, error) {
	tc := c.Tools[i]
	p := fmt.Sprintf("tools[%d]", i)
	if !toolName.MatchString(tc.Name) {
		return nil, fieldErr(p+".name", "%q is not a valid tool name (lower-case letters, digits, '_', '-', '.')", tc.Name)
	}
	tc.Match.Method = strings.ToUpper(tc.Match.Method)
	if tc.Match.Path == "" {
		return nil, fieldErr(p+".match.path", "required")
	}
	tmpl, err := parseTemplate(tc.Match.Path)
	if err != nil {
		return nil, fieldErr(p+".match.path", "%v", err)
	}
	t := &Tool{Cfg: tc, Tmpl: tmpl}
	if tc.Match.Host != "" {
		h, port, err := parseHostField(tc.Match.Host)
		if err != nil {
			return nil, fieldErr(p+".match.host", "%v", err)
		}
		t.Host, t.Port = h, port
		if h != "" && port != "" {
			t.hostPort = net.JoinHostPort(h, port)
		}
	}
	for j, s := range tc.Args {
		switch s {
		case SourceQuery, SourceJSON, SourceForm, SourcePath:
		default:
			return nil, fieldErr(fmt.Sprintf("%s.args[%d]", p, j), "unknown source %q; expected query, json, form or path", s)
		}
		t.Sources |= sourceBit(s)
	}
	if t.Sources&(BitJSON|BitForm) == BitJSON|BitForm {
		return nil, fieldErr(p+".args", "json and form both read the body; choose one")
	}
	if tc.Timeout == 0 {
		t.Cfg.Timeout = DefaultTimeout
	}
	if t.Cfg.Timeout < 0 {
		return nil, fieldErr(p+".timeout", "must be positive")
	}
	switch tc.Envelope {
	case "":
		t.Cfg.Envelope = EnvelopeOnRequest
	case EnvelopeOnRequest, EnvelopeAlways, EnvelopeNever:
	default:
		return nil, fieldErr(p+".envelope", "unknown mode %q; expected on_request, always or never", tc.Envelope)
	}
	switch tc.PolicyMode {
	case "":
		t.Cfg.PolicyMode = policies.ModeEnforce
	case policies.ModeEnforce, policies.ModeDryRun, policies.ModeOff:
	default:
		return nil, fieldErr(p+".policy_mode", "unknown mode %q; expected enforce, dry_run or off", tc.PolicyMode)
	}
	switch tc.SchemaMode {
	case "":
		t.Cfg.SchemaMode = policies.ModeEnforce
	case policies.ModeEnforce, policies.ModeDryRun:
	default:
		return nil, fieldErr(p+".schema_mode", "unknown mode %q; expected enforce or dry_run", tc.SchemaMode)
	}
	if err := tc.Rules.Validate(); err != nil {
		var re *bucketing.RuleError
		if errors.As(err, &re) {
			return nil, fieldErr(fmt.Sprintf("%s.rules[%d]", p, re.Index), "%s", re.Problem)
		}
		return nil, section.At(p+".rules", err)
	}
	t.Inject = make(map[string]string, len(tc.InjectHeaders))
	for k, v := range tc.InjectHeaders {
		val, err := expandEnv(v)
		if err != nil {
			return nil, fieldErr(p+".inject_headers."+k, "%v", err)
		}
		t.Inject[canonicalHeader(k)] = val
	}
	if len(tc.InjectHeaders) > 0 && t.Host == "" {
		return nil, fieldErr(p+".inject_headers", "needs match.host: injected headers go only to the tool's own origin, and a tool without a host would send them to any host a caller names")
	}
	switch tc.UnknownFormats {
	case "", policies.FormatsRefuse, policies.FormatsIgnore:
	default:
		return nil, fieldErr(p+".unknown_formats", "unknown mode %q; expected %s or %s", tc.UnknownFormats, policies.FormatsRefuse, policies.FormatsIgnore)
	}
	switch tc.UnknownKeywords {
	case "", policies.KeywordsRefuse, policies.KeywordsIgnore:
	default:
		return nil, fieldErr(p+".unknown_keywords", "unknown mode %q; expected %s or %s", tc.UnknownKeywords, policies.KeywordsRefuse, policies.KeywordsIgnore)
	}
	strict := tc.Strict == nil || *tc.Strict
	sch, err := c.loadSchema(p, tc.Name, tc.Schema, tc.SchemaFile, schemaOpts{strict: strict, unknownFormats: tc.UnknownFormats, unknownKeywords: tc.UnknownKeywords})
	if err != nil {
		return nil, err
	}
	t.Schema = sch
	if err := c.compileMCP(t, p); err != nil {
		return nil, err
	}
	if err := t.validateObserve(p); err != nil {
		return nil, err
	}
	if err := c.compileAnswer(t, p); err != nil {
		return nil, err
	}
	return t, nil
}

// schemaOpts are a tool's settings for compiling its schemas.
type schemaOpts struct {
	strict          bool
	unknownFormats  string
	unknownKeywords string
}

// loadSchema compiles a tool's schema, given inline (a mapping or a
// boolean) or as a file (at most one), and adds a file's bytes to the
// schema digest. p is the field path of the schema's owner, for errors. No
// schema gives nil.
func (c *Config) loadSchema(p, tool string, inline any, file string, o schemaOpts) (*policies.Schema, error) {
	var doc []byte
	var dir string
	switch {
	case inline != nil && file != "":
		return nil, fieldErr(p+".schema_file", "schema and schema_file are both set; choose one")
	case inline != nil:
		b, err := jsonOf(inline)
		if err != nil {
			return nil, fieldErr(p+".schema", "not representable as JSON: %v", err)
		}
		doc, dir = b, c.dir
	case file != "":
		f := section.Resolve(c.dir, file)
		b, err := readLimited(f, policies.MaxSchemaFileBytes)
		if err != nil {
			return nil, fieldErr(p+".schema_file", "%v", err)
		}
		doc, dir = b, filepath.Dir(f)
		fmt.Fprintf(c.digest, "%s\x00%d\x00", f, len(b))
		c.digest.Write(b)
	default:
		return nil, nil
	}
	s, err := policies.CompileSchema(doc, policies.SchemaOptions{Tool: tool, Strict: o.strict, Dir: dir, UnknownFormats: o.unknownFormats,
		UnknownKeywords: o.unknownKeywords, Limits: policies.FileSchemaLimits})
	if err != nil {
		path := p + ".schema"
		if file != "" {
			path = p + ".schema_file"
		}
		return nil, section.At(path, err)
	}
	return s, nil
}

// readLimited reads a whole file of at most max bytes.
func readLimited(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := ReadUpTo(f, -1, max)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	return b, nil
}

// Files lists the files the section reads besides the configuration file,
// resolved against dir as Validate resolves them: each tool's schema_file
// and each MCP route's mcp.pin.lock_file.
// It reads only the data, so it answers for a section that does not
// validate too (hot reload watches these files).
func (c *Config) Files(dir string) []string {
	var files []string
	for _, t := range c.Tools {
		if t.SchemaFile != "" {
			files = append(files, section.Resolve(dir, t.SchemaFile))
		}
		if t.MCP.Pin.LockFile != "" {
			files = append(files, section.Resolve(dir, t.MCP.Pin.LockFile))
		}
	}
	return files
}

// SchemaDigest is a hash of every schema file Validate read, so a change to
// a schema file changes the configuration's version.
func (c *Config) SchemaDigest() []byte {
	if c.digest == nil {
		return nil
	}
	return c.digest.Sum(nil)
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} with the environment variable NAME; a variable
// that is not set is an error, so a missing secret is caught at start.
func expandEnv(v string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(v, func(m string) string {
		name := m[2 : len(m)-1]
		val, ok := os.LookupEnv(name)
		if !ok || val == "" {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set or empty", strings.Join(missing, ", "))
	}
	return out, nil
}
