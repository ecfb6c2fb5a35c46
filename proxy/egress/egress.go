// Package egress is toolgate's egress guard: every destination toolgate
// connects to that no tool names is resolved, and refused when any of its
// addresses is loopback, private, link-local, a cloud metadata address or
// any other non-public address (Classify), unless egress.allow lists it.
// The connection is then made to the very addresses that were checked, so
// a name that answers differently on a second lookup (DNS rebinding)
// cannot steer it elsewhere.
//
// The package is a leaf: it imports the standard library and bucketing's
// vocabulary only. proxy wires a Guard into its upstream dialer; the hosts
// tools name are passed in (Options.ToolHosts) and never checked, since a
// tool's own checks govern its calls.
package egress

import (
	"time"

	"github.com/toolgate/toolgate/internal/section"
)

// Modes, as named in Config.Mode.
const (
	// ModeEnforce refuses a forbidden destination (policy/egress_denied).
	ModeEnforce = "enforce"
	// ModeRecord connects anyway and reports what enforce would have
	// refused (Options.Report), for a trial before enforcing.
	ModeRecord = "record"
)

const (
	// DefaultLookupTimeout bounds resolving one destination when the
	// call's own deadline is later or absent.
	DefaultLookupTimeout = 5 * time.Second
	// MaxAllowEntries bounds egress.allow.
	MaxAllowEntries = 4096
	// MaxDialAddrs is how many of a destination's checked addresses a
	// dial tries, in the resolver's order, before it gives up.
	MaxDialAddrs = 8
)

// Config is the egress section of the configuration file (egress:). Its
// zero value is the default, and it is what toolgate runs with when the
// file has no egress section: enforce, nothing allowed beyond the hosts
// tools name. Validate prepares it; after that it must not change.
//
// Why enforce without a section: the guarantee (a pass-through
// call never reaches a metadata or private address) holds only if it is on
// by default, and the deployments it protects are exactly the legacy ones
// with unmatched: pass, whose operators will not have read about a new
// section. The cost falls on a legacy service that reaches internal
// services through toolgate without naming them as tools: its calls are
// refused loudly (policy/egress_denied, with the host and the class), and
// one line (allow: [10.0.0.0/8], or mode: record for a trial) restores
// them. A silent default of record would protect no one who did not opt in.
type Config struct {
	// Mode is enforce (refuse forbidden destinations) or record (connect,
	// and report what enforce would refuse). Default: enforce.
	Mode string `yaml:"mode"`
	// Allow lists destinations the guard lets through although they are
	// not public. Each entry is one of: an IP address (10.1.2.3, fd00::1),
	// a CIDR prefix (10.0.0.0/8, fd00::/8), an IP address with a port
	// (10.1.2.3:8080, [fd00::1]:443), a host name (db.internal), a host
	// name with a port (db.internal:5432), or a wildcard name
	// (*.corp.example, which matches names below corp.example but not
	// corp.example itself). A name matches the host toolgate dials, before
	// resolution, and lets it through whatever it resolves to (it is still
	// resolved once and dialled at the addresses found); a transparently
	// redirected connection dials an address, so only address entries
	// apply to it. An address or prefix matches the resolved addresses.
	// Default: none.
	Allow []string `yaml:"allow"`
	// LookupTimeout bounds resolving one destination; the call's own
	// deadline bounds it too when it is sooner. Default: 5s
	// (DefaultLookupTimeout).
	LookupTimeout time.Duration `yaml:"lookup_timeout"`

	allow     *allowList // compiled by Validate
	validated bool
}

// Validate applies the defaults, checks every field and compiles the
// allow list. Its errors name the field ("allow[2]") and the bad entry.
func (c *Config) Validate() error {
	switch c.Mode {
	case "":
		c.Mode = ModeEnforce
	case ModeEnforce, ModeRecord:
	default:
		return section.Errorf("mode", "unknown mode %q; expected enforce or record", c.Mode)
	}
	switch {
	case c.LookupTimeout == 0:
		c.LookupTimeout = DefaultLookupTimeout
	case c.LookupTimeout < 0:
		return section.Errorf("lookup_timeout", "must be positive, got %s", c.LookupTimeout)
	}
	if len(c.Allow) > MaxAllowEntries {
		return section.Errorf("allow", "has %d entries; at most %d are allowed", len(c.Allow), MaxAllowEntries)
	}
	al, err := parseAllow(c.Allow, "allow")
	if err != nil {
		return err
	}
	c.allow, c.validated = al, true
	return nil
}
