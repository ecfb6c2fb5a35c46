package approval

import (
	"maps"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/frontjwt"
	"github.com/toolgate/toolgate/internal/section"
)

// Defaults for Config.
const (
	DefaultPendingTTL   = 15 * time.Minute
	DefaultDecisionTTL  = 10 * time.Minute
	DefaultUses         = 1
	DefaultMaxPending   = 1000
	DefaultRetryAfter   = 5 * time.Second
	DefaultHoldTimeout  = 30 * time.Second
	DefaultMaxHeld      = 64
	DefaultPollInterval = 250 * time.Millisecond
	DefaultFile         = "toolgate-approvals.ndjson"
	// MaxHoldTimeout bounds hold_timeout: a held request keeps a
	// connection and a goroutine.
	MaxHoldTimeout = 10 * time.Minute
	// MinSecretBytes is the shortest shared secret deciders.secret_env
	// may hold.
	MinSecretBytes = 16
	// MaxNoteBytes bounds a decider's note.
	MaxNoteBytes = 1024
	// MaxDeciderBytes bounds the recorded name of who decided.
	MaxDeciderBytes = 256
	// MaxDestinationBytes bounds the destination a request shows.
	MaxDestinationBytes = 512
	// MinStateKeyBytes is the shortest key state_key_env may hold.
	MinStateKeyBytes = 32
)

// In-band settings: whether an MCP client of the 2026-07-28 revision is
// asked for approval in-band (an input_required result).
const (
	// InBandAuto (the default) asks in-band when the client declared
	// URL-mode elicitation and approvals.url is set; other clients get the
	// isError envelope.
	InBandAuto = "auto"
	// InBandOff always answers with the isError envelope.
	InBandOff = "off"
)

// Modes: what a caller whose call needs approval gets.
const (
	// ModeRetry refuses the call at once (policy/approval_pending); the
	// caller retries the same call once it is approved.
	ModeRetry = "retry"
	// ModeHold holds the request open until a person decides or
	// hold_timeout passes, for legacy callers that cannot retry.
	ModeHold = "hold"
)

// Requirements a tool's configuration may set.
const (
	// RequireAlways needs approval for every call of the tool.
	RequireAlways = "always"
	// RequireDestructive needs approval for a tools/call whose MCP tool
	// the server annotates destructiveHint: true.
	RequireDestructive = "destructive"
	// RequirePolicy (the default) needs approval only when a policy asks.
	RequirePolicy = "policy"
)

// Stores.
const (
	StoreFile       = "file"
	StoreClickHouse = "clickhouse"
)

// Config is the approvals section (YAML `approvals:`). Its zero value
// asks no approval unless a policy does, refuses such calls at once, and
// keeps requests in a local file.
type Config struct {
	// Store is where requests and decisions live: "file" (one NDJSON
	// file, for one host) or "clickhouse" (events.clickhouse's server,
	// shared by every sidecar and the dashboard). Default: clickhouse
	// when events.clickhouse.addr is set, else file.
	Store string `yaml:"store"`
	// File is the file store's path, relative to the configuration file.
	// Default "toolgate-approvals.ndjson".
	File string `yaml:"file"`
	// URL is the Approvals page a refused caller is pointed at; the
	// request's id is added as ?id=. Default: none (the envelope carries
	// the id only).
	URL string `yaml:"url"`
	// Mode is retry or hold, for tools that set none. Default retry.
	Mode string `yaml:"mode"`
	// Tools sets, by tool name (an MCP tool's own name on MCP routes),
	// when its calls need approval and how callers wait. A tool not listed
	// needs approval only when a policy asks.
	Tools map[string]ToolRule `yaml:"tools"`
	// PendingTTL is how long a request waits for a decision before it
	// lapses (a retry then asks anew). Default 15m.
	PendingTTL time.Duration `yaml:"pending_ttl"`
	// DecisionTTL is how long a decision holds: an approval's grant can be
	// used, a denial or revision request answers retries, for this long
	// after the decision. Default 10m.
	DecisionTTL time.Duration `yaml:"decision_ttl"`
	// Uses is how many times an approved call may go upstream: exactly, by
	// any number of sidecars sharing the file store on one host, or by any
	// number anywhere with state.redis (FleetStore); per sidecar with the
	// ClickHouse store alone. Default 1.
	Uses int `yaml:"uses"`
	// MaxPending bounds the undecided requests; past it, calls that need
	// approval are refused (policy/approval_unavailable). Default 1000.
	MaxPending int `yaml:"max_pending"`
	// RetryAfter is the retry_after_ms a pending caller gets. Default 5s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// HoldTimeout bounds how long hold mode holds a request. Default 30s;
	// at most 10m.
	HoldTimeout time.Duration `yaml:"hold_timeout"`
	// MaxHeld bounds the requests held at once; past it, a hold-mode call
	// is refused pending as in retry mode. Default 64.
	MaxHeld int `yaml:"max_held"`
	// PollInterval is how often a held request looks for its decision in
	// the store. Default 250ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Deciders says who may decide on the dashboard's Approvals page.
	Deciders DecidersConfig `yaml:"deciders"`
	// InBand is auto or off, for tools that set none: with auto, a
	// tools/call from an MCP client of the 2026-07-28 revision that
	// declared URL-mode elicitation is asked in-band, as a Multi Round-Trip
	// input_required result whose URL-mode elicitation points at the
	// Approvals page (needs url); off answers every client with the
	// isError envelope. Default auto.
	InBand string `yaml:"in_band"`
	// StateKeyEnv names the environment variable holding the key (32 bytes
	// at least) that authenticates the requestState of an in-band ask.
	// Sidecars behind one balancer must share it, so that a retry reaching
	// another sidecar is honoured. Default: none (a random key per
	// process; a retry after a restart, or to another sidecar, is refused
	// approval_state_invalid and asked anew by calling again).
	StateKeyEnv string `yaml:"state_key_env"`

	file     string // resolved
	stateKey []byte // from StateKeyEnv; nil: random per Gate
}

// ToolRule is one tool's approval settings.
type ToolRule struct {
	// Require is always, destructive (MCP destructiveHint: true) or policy.
	// Default policy.
	Require string `yaml:"require"`
	// Mode is retry or hold. Default: approvals.mode.
	Mode string `yaml:"mode"`
	// Uses overrides approvals.uses for this tool. Default 0: the section's.
	Uses int `yaml:"uses"`
	// InBand is auto or off. Default: approvals.in_band.
	InBand string `yaml:"in_band"`
}

// DecidersConfig is the dashboard's authorisation for decisions. With
// neither set, the Approvals page is read-only.
type DecidersConfig struct {
	// SecretEnv names the environment variable holding a shared secret; a
	// decision that presents it (Authorization: Bearer SECRET) is
	// accepted and records the name the decider gives, prefixed
	// "secret:". Default: none.
	SecretEnv string `yaml:"secret_env"`
	// TrustedHeader names a request header that an authenticating front
	// (an OAuth proxy) sets to the signed-in user. Alone, it is trusted
	// only on a dashboard listening on a Unix socket that nothing but the
	// front can reach (toolgate dashboard refuses it on a TCP listener);
	// with jwt, it must name the user the front's token names. Default:
	// none.
	TrustedHeader string `yaml:"trusted_header"`
	// JWT verifies the front's signed identity (its JWT, against its JWKS);
	// a decision it verifies records "jwt:USER". Default: off.
	JWT frontjwt.Config `yaml:"jwt"`
}

// Validate applies defaults and rejects bad values; relative paths are
// resolved against dir. Errors are *section.Error values relative to the
// section.
func (c *Config) Validate(dir string, clickhouse bool) error {
	switch c.Store {
	case "":
		c.Store = StoreFile
		if clickhouse {
			c.Store = StoreClickHouse
		}
	case StoreFile:
	case StoreClickHouse:
		if !clickhouse {
			return section.Errorf("store", "clickhouse needs events.clickhouse.addr")
		}
	default:
		return section.Errorf("store", "%q; want file or clickhouse", c.Store)
	}
	if c.File == "" {
		c.File = DefaultFile
	}
	c.file = section.Resolve(dir, c.File)
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return section.Errorf("url", "%q; want an http or https URL", c.URL)
		}
	}
	if err := checkMode("mode", &c.Mode, ModeRetry); err != nil {
		return err
	}
	if err := checkInBand("in_band", &c.InBand, InBandAuto); err != nil {
		return err
	}
	for _, n := range slices.Sorted(maps.Keys(c.Tools)) {
		r := c.Tools[n]
		switch r.Require {
		case "":
			r.Require = RequirePolicy
		case RequireAlways, RequireDestructive, RequirePolicy:
		default:
			return section.Errorf("tools."+n+".require", "%q; want always, destructive or policy", r.Require)
		}
		if err := checkMode("tools."+n+".mode", &r.Mode, c.Mode); err != nil {
			return err
		}
		if err := checkInBand("tools."+n+".in_band", &r.InBand, c.InBand); err != nil {
			return err
		}
		if r.Uses < 0 {
			return section.Errorf("tools."+n+".uses", "must be positive, got %d", r.Uses)
		}
		c.Tools[n] = r
	}
	durs := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"pending_ttl", &c.PendingTTL, DefaultPendingTTL},
		{"decision_ttl", &c.DecisionTTL, DefaultDecisionTTL},
		{"retry_after", &c.RetryAfter, DefaultRetryAfter},
		{"hold_timeout", &c.HoldTimeout, DefaultHoldTimeout},
		{"poll_interval", &c.PollInterval, DefaultPollInterval},
	}
	for _, d := range durs {
		if *d.d < 0 {
			return section.Errorf(d.name, "must be positive, got %s", *d.d)
		}
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	if c.HoldTimeout > MaxHoldTimeout {
		return section.Errorf("hold_timeout", "%s is over the %s limit", c.HoldTimeout, MaxHoldTimeout)
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"uses", &c.Uses, DefaultUses},
		{"max_pending", &c.MaxPending, DefaultMaxPending},
		{"max_held", &c.MaxHeld, DefaultMaxHeld},
	}
	for _, i := range ints {
		if *i.v < 0 {
			return section.Errorf(i.name, "must be positive, got %d", *i.v)
		}
		if *i.v == 0 {
			*i.v = i.def
		}
	}
	if c.Deciders.SecretEnv != "" {
		if v, ok := os.LookupEnv(c.Deciders.SecretEnv); !ok || len(v) < MinSecretBytes {
			return section.Errorf("deciders.secret_env", "environment variable %s is not set or shorter than %d bytes", c.Deciders.SecretEnv, MinSecretBytes)
		}
	}
	if err := section.Under("deciders.jwt", c.Deciders.JWT.Validate(dir)); err != nil {
		return err
	}
	if c.StateKeyEnv != "" {
		v, ok := os.LookupEnv(c.StateKeyEnv)
		if !ok || len(v) < MinStateKeyBytes {
			return section.Errorf("state_key_env", "environment variable %s is not set or shorter than %d bytes", c.StateKeyEnv, MinStateKeyBytes)
		}
		c.stateKey = []byte(v)
	}
	return nil
}

func checkInBand(field string, v *string, def string) error {
	switch *v {
	case "":
		*v = def
	case InBandAuto, InBandOff:
	default:
		return section.Errorf(field, "%q; want auto or off", *v)
	}
	return nil
}

func checkMode(field string, m *string, def string) error {
	switch *m {
	case "":
		*m = def
	case ModeRetry, ModeHold:
	default:
		return section.Errorf(field, "%q; want retry or hold", *m)
	}
	return nil
}

// FilePath is the file store's resolved path.
func (c *Config) FilePath() string { return c.file }

// rule is the tool's rule, with the section's defaults.
func (c *Config) rule(tool string) ToolRule {
	r, ok := c.Tools[tool]
	if !ok {
		r = ToolRule{Require: RequirePolicy, Mode: c.Mode, InBand: c.InBand}
	}
	if r.InBand == "" {
		r.InBand = c.InBand
	}
	if r.InBand == "" {
		r.InBand = InBandAuto
	}
	if r.Uses == 0 {
		r.Uses = c.Uses
	}
	return r
}
