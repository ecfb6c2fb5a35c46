package budget

import (
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/section"
)

// Config is the budgets section of the configuration file: call and cost
// budgets, loop breaking, and outbound rate limits per upstream. Its zero
// value configures nothing, and then the proxy does no budget work at all.
type Config struct {
	// Limits are the call and cost budgets. Default: none.
	Limits []Limit `yaml:"limits"`
	// Costs are the tools' costs by tool name, which cost budgets count.
	// A tool not named costs DefaultCost (1) per call.
	Costs map[string]Cost `yaml:"costs"`
	// Loops breaks loops: the same tool with the same arguments called
	// again and again in one session. Off unless max_repeats is set.
	Loops LoopConfig `yaml:"loops"`
	// Upstreams are the outbound rate limits and the 429 backoff, per
	// upstream host. Default: none.
	Upstreams []Upstream `yaml:"upstreams"`
	// MaxKeys bounds the counters kept (one per budget and key, one per
	// session, tool and arguments for loop breaking). When it is reached,
	// expired counters are dropped first, then the counter closest to the
	// end of its window (toolgate_budget_evictions_total counts both).
	// Default DefaultMaxKeys (100000); at most MaxMaxKeys.
	MaxKeys int `yaml:"max_keys"`
}

// Limit is one budget: at most Calls calls, or Cost cost, in each Window,
// counted separately for each value of the dimensions in Per.
type Limit struct {
	// Name names the budget in refusals, events and metrics. Required,
	// unique, at most 64 bytes of letters, digits, '_', '-' and '.'.
	Name string `yaml:"name"`
	// Per lists what the budget is counted by: "session", "agent",
	// "tool", or several ("[agent, tool]": one counter per agent and
	// tool). Default: none, one counter for every call the budget
	// applies to. A budget per session (or agent) does not apply to calls
	// that carry no session (agent) header.
	Per []string `yaml:"per"`
	// Tools limits the budget to these tools. Default: every tool.
	Tools []string `yaml:"tools"`
	// Calls is the number of calls allowed in a window. Default 0: no
	// call cap (then Cost must be set).
	Calls int64 `yaml:"calls"`
	// Cost is the cost allowed in a window, the sum of the costs of the
	// calls (Config.Costs). Default 0: no cost cap.
	Cost float64 `yaml:"cost"`
	// Window is the budget's window: it starts with the first call a
	// counter sees and the counter starts over after it. Required; from
	// 1ms to MaxWindow (31 days).
	Window time.Duration `yaml:"window"`
	// OnUnavailable is what the budget does with state.redis when Redis
	// cannot answer in time (or its circuit breaker is open): "local"
	// counts the call in this sidecar's own counters, "deny" refuses it
	// (rate_limit/limit_unavailable, retryable), "allow" lets it through
	// uncounted. Default local. Without state.redis it has no effect.
	OnUnavailable string `yaml:"on_unavailable"`

	tools map[string]bool // nil: every tool
	per   dims
}

// Cost is what one call of a tool costs, for cost budgets.
type Cost struct {
	// Cost is charged when the call is let through. Default DefaultCost
	// (1); 0 makes the tool free.
	Cost *float64 `yaml:"cost"`
	// Header names a response header whose number replaces Cost once the
	// answer arrives (such as X-Usage-Cost). A missing or unreadable
	// header leaves Cost charged. Default: none.
	Header string `yaml:"header"`
}

// LoopConfig configures loop breaking.
type LoopConfig struct {
	// MaxRepeats is how many identical calls (same session, tool and
	// argument digest) pass in a window; the next one is refused as
	// policy/loop_detected. Default 0: off. Calls without a session
	// header are not counted.
	MaxRepeats int64 `yaml:"max_repeats"`
	// Window is the loop window, started by the first of the identical
	// calls. Default DefaultLoopWindow (1m).
	Window time.Duration `yaml:"window"`
	// Tools limits loop breaking to these tools. Default: every tool.
	Tools []string `yaml:"tools"`
	// OnUnavailable is what loop breaking does when state.redis cannot
	// answer: local, deny or allow, as a budget's. Default local.
	OnUnavailable string `yaml:"on_unavailable"`

	tools map[string]bool
}

// Upstream is one upstream's outbound limit and backoff.
type Upstream struct {
	// Host is the upstream: a host name or IP address, with an optional
	// port (api.example.com, 10.0.0.7:8443, localhost:8080). It is read
	// as calls are (proxy.UpstreamKey): any spelling of one host names it
	// (LOCALHOST., 127.1, [::ffff:127.0.0.1] and localhost are one
	// loopback host), and without a port it applies to calls on their
	// scheme's default port (80, 443). Required; no two entries may name
	// one upstream.
	Host string `yaml:"host"`
	// Rate is the sustained rate, in calls per second, of a token bucket.
	// Default 0: no rate limit (backoff only).
	Rate float64 `yaml:"rate"`
	// Burst is the bucket's size: how many calls may go at once after a
	// quiet spell. Default: Rate rounded up, at least 1.
	Burst int `yaml:"burst"`
	// MaxWait is how long a call over the rate may wait for its turn; a
	// call that would wait longer is refused at once as
	// rate_limit/local_rate_limit with retry_after_ms. Default 0: never
	// wait, refuse at once. At most MaxMaxWait (1m).
	MaxWait time.Duration `yaml:"max_wait"`
	// Backoff answers calls to this upstream at once with
	// rate_limit/upstream_backoff while the wait of an upstream 429's
	// Retry-After (or a rule's rate_limit with one) runs, instead of
	// adding load. Default true.
	Backoff *bool `yaml:"backoff"`
	// MaxBackoff bounds the wait taken from a Retry-After. Default
	// DefaultMaxBackoff (5m).
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// OnUnavailable is what the rate limit does when state.redis cannot
	// answer: local (this sidecar's own token bucket), deny or allow, as a
	// budget's. Default local. The 429 backoff is this sidecar's in every
	// mode.
	OnUnavailable string `yaml:"on_unavailable"`

	key              string // Host's key (HostKey)
	keyHost, keyPort string // key split: IPv6 without brackets; "" for no port
}

// HostKey returns the key of an upstream the configuration names, by the
// rules calls are keyed by (Call.Upstream), or an error saying why it is
// not a host with an optional port. The proxy's is proxy.UpstreamKey.
type HostKey func(hostport string) (string, error)

// Defaults and bounds of the section.
const (
	DefaultMaxKeys    = 100000
	MaxMaxKeys        = 10000000
	DefaultCost       = 1.0
	DefaultLoopWindow = time.Minute
	MaxWindow         = 31 * 24 * time.Hour
	MaxMaxWait        = time.Minute
	DefaultMaxBackoff = 5 * time.Minute
	maxNameBytes      = 64
	maxLimits         = 64
)

// The dimensions a budget is counted by.
const (
	PerSession = "session"
	PerAgent   = "agent"
	PerTool    = "tool"
)

type dims uint8

const (
	dimSession dims = 1 << iota
	dimAgent
	dimTool
)

// Configured reports whether the section configures anything.
func (c *Config) Configured() bool {
	return len(c.Limits) > 0 || c.Loops.MaxRepeats > 0 || len(c.Upstreams) > 0
}

// Validate applies the defaults and checks the section; tools are the
// configuration's tool names, which Limits[].tools, loops.tools and costs
// may name, and key reads upstreams[].host (nil: lower-cased as written,
// for tests that key calls the same way). Errors are section.Error values
// relative to the section.
func (c *Config) Validate(tools []string, key HostKey) error {
	known := make(map[string]bool, len(tools))
	for _, t := range tools {
		known[t] = true
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.MaxKeys < 0 || c.MaxKeys > MaxMaxKeys {
		return section.Errorf("max_keys", "%d is outside 1 to %d", c.MaxKeys, MaxMaxKeys)
	}
	if len(c.Limits) > maxLimits {
		return section.Errorf("limits", "%d budgets; at most %d", len(c.Limits), maxLimits)
	}
	names := map[string]bool{}
	for i := range c.Limits {
		l := &c.Limits[i]
		at := func(f string) string { return fmt.Sprintf("limits[%d].%s", i, f) }
		if err := checkName(l.Name); err != nil {
			return section.At(at("name"), err)
		}
		if names[l.Name] {
			return section.Errorf(at("name"), "budget %q is named twice", l.Name)
		}
		names[l.Name] = true
		l.per = 0
		for j, p := range l.Per {
			var d dims
			switch p {
			case PerSession:
				d = dimSession
			case PerAgent:
				d = dimAgent
			case PerTool:
				d = dimTool
			default:
				return section.Errorf(fmt.Sprintf("limits[%d].per[%d]", i, j), "%q is not session, agent or tool", p)
			}
			if l.per&d != 0 {
				return section.Errorf(fmt.Sprintf("limits[%d].per[%d]", i, j), "%q is named twice", p)
			}
			l.per |= d
		}
		var err error
		if l.tools, err = toolSet(l.Tools, known, at("tools")); err != nil {
			return err
		}
		if l.Calls < 0 {
			return section.Errorf(at("calls"), "must not be negative")
		}
		if l.Cost < 0 || math.IsNaN(l.Cost) || math.IsInf(l.Cost, 0) {
			return section.Errorf(at("cost"), "must be a finite number, not negative")
		}
		if l.Calls == 0 && l.Cost == 0 {
			return section.Errorf(at("calls"), "budget %q sets neither calls nor cost", l.Name)
		}
		if l.Window < time.Millisecond || l.Window > MaxWindow {
			return section.Errorf(at("window"), "%s is outside 1ms to %s", l.Window, MaxWindow)
		}
		if err := checkUnavailable(&l.OnUnavailable, at("on_unavailable")); err != nil {
			return err
		}
	}
	for name, cost := range c.Costs {
		at := "costs." + name
		if !known[name] {
			return section.Errorf(at, "names no tool")
		}
		if cost.Cost != nil && (*cost.Cost < 0 || math.IsNaN(*cost.Cost) || math.IsInf(*cost.Cost, 0)) {
			return section.Errorf(at+".cost", "must be a finite number, not negative")
		}
		if cost.Header != "" && !validHeaderName(cost.Header) {
			return section.Errorf(at+".header", "%q is not a header name", cost.Header)
		}
	}
	lp := &c.Loops
	if lp.MaxRepeats < 0 {
		return section.Errorf("loops.max_repeats", "must not be negative")
	}
	if lp.Window == 0 {
		lp.Window = DefaultLoopWindow
	}
	if lp.Window < time.Millisecond || lp.Window > MaxWindow {
		return section.Errorf("loops.window", "%s is outside 1ms to %s", lp.Window, MaxWindow)
	}
	var err error
	if lp.tools, err = toolSet(lp.Tools, known, "loops.tools"); err != nil {
		return err
	}
	if err := checkUnavailable(&lp.OnUnavailable, "loops.on_unavailable"); err != nil {
		return err
	}
	hosts := map[string]int{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		at := func(f string) string { return fmt.Sprintf("upstreams[%d].%s", i, f) }
		if key == nil {
			key = plainHostKey
		}
		k, err := key(u.Host)
		if err != nil {
			return section.At(at("host"), err)
		}
		if j, dup := hosts[k]; dup {
			return section.Errorf(at("host"), "%q names the upstream upstreams[%d] names (%q)", u.Host, j, c.Upstreams[j].Host)
		}
		hosts[k] = i
		u.key = k
		if h, p, err := net.SplitHostPort(k); err == nil {
			u.keyHost, u.keyPort = h, p
		} else {
			u.keyHost, u.keyPort = strings.TrimSuffix(strings.TrimPrefix(k, "["), "]"), ""
		}
		if u.Rate < 0 || math.IsNaN(u.Rate) || math.IsInf(u.Rate, 0) {
			return section.Errorf(at("rate"), "must be a finite number, not negative")
		}
		if u.Burst < 0 {
			return section.Errorf(at("burst"), "must not be negative")
		}
		if u.Burst == 0 {
			u.Burst = max(1, int(math.Ceil(u.Rate)))
		}
		if u.MaxWait < 0 || u.MaxWait > MaxMaxWait {
			return section.Errorf(at("max_wait"), "%s is outside 0 to %s", u.MaxWait, MaxMaxWait)
		}
		if u.Backoff == nil {
			on := true
			u.Backoff = &on
		}
		if u.MaxBackoff == 0 {
			u.MaxBackoff = DefaultMaxBackoff
		}
		if u.MaxBackoff < 0 || u.MaxBackoff > MaxWindow {
			return section.Errorf(at("max_backoff"), "%s is outside 0 to %s", u.MaxBackoff, MaxWindow)
		}
		if err := checkUnavailable(&u.OnUnavailable, at("on_unavailable")); err != nil {
			return err
		}
		if u.Rate == 0 && !*u.Backoff {
			return section.Errorf(at("rate"), "upstream %q sets no rate and no backoff", u.Host)
		}
	}
	return c.checkPortless(hosts)
}

// checkPortless refuses an entry without a port beside one naming the same
// host on port 80 or 443: on that port both would apply.
func (c *Config) checkPortless(hosts map[string]int) error {
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		for _, p := range []string{":80", ":443"} {
			if j, ok := hosts[u.key+p]; ok && !strings.HasSuffix(u.key, p) {
				return section.Errorf(fmt.Sprintf("upstreams[%d].host", j), "%q and upstreams[%d] (%q) both apply to calls on the default port %s; name the upstream once", c.Upstreams[j].Host, i, u.Host, p[1:])
			}
		}
	}
	return nil
}

// plainHostKey is the HostKey of a nil key function: the host lower-cased,
// as written.
func plainHostKey(s string) (string, error) {
	s = strings.ToLower(s)
	if s == "" || strings.ContainsAny(s, "/ @?#") {
		return "", fmt.Errorf("%q is not a host (name, or name:port)", s)
	}
	if h, p, err := net.SplitHostPort(s); err == nil && (h == "" || p == "") {
		return "", fmt.Errorf("%q is not a host (name, or name:port)", s)
	}
	return s, nil
}

// toolSet checks a list of tool names and returns it as a set (nil for
// an empty list: every tool).
func toolSet(list []string, known map[string]bool, at string) (map[string]bool, error) {
	if len(list) == 0 {
		return nil, nil
	}
	set := make(map[string]bool, len(list))
	for j, t := range list {
		if !known[t] {
			return nil, section.Errorf(fmt.Sprintf("%s[%d]", at, j), "%q names no tool", t)
		}
		set[t] = true
	}
	return set, nil
}

func checkName(n string) error {
	if n == "" {
		return fmt.Errorf("is required")
	}
	if len(n) > maxNameBytes {
		return fmt.Errorf("is longer than %d bytes", maxNameBytes)
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.') {
			return fmt.Errorf("%q holds %q; use letters, digits, '_', '-' and '.'", n, b)
		}
	}
	return nil
}

func validHeaderName(h string) bool {
	if h == "" || len(h) > 256 {
		return false
	}
	for i := 0; i < len(h); i++ {
		b := h[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0) {
			return false
		}
	}
	return true
}

// checkUnavailable defaults an on_unavailable to local and checks it.
func checkUnavailable(v *string, at string) error {
	switch *v {
	case "":
		*v = UnavailableLocal
	case UnavailableLocal, UnavailableDeny, UnavailableAllow:
	default:
		return section.Errorf(at, "%q is not local, deny or allow", *v)
	}
	return nil
}
