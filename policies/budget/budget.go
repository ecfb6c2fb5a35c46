// Package budget keeps toolgate's budgets: how many calls (and how much
// cost) a session, an agent or a tool may spend in a window; loop
// breaking, which stops the same call repeated again and again in one
// session; and outbound rate limits per upstream, with backoff after an
// upstream's 429.
//
// By default the state is local to one process: each sidecar counts the
// calls it sees. Memory is bounded by Config.MaxKeys; counters expire with
// their window. With state.redis (UseFleet) the budgets, loop counters and
// upstream rates are kept in Redis instead, each call decided by one
// atomic script, so a fleet of sidecars counts as one (fleet.go); when
// Redis cannot answer, each limit does what its on_unavailable says. An Engine is built once per configuration and is safe for
// concurrent use; its counters are sharded, so calls for different keys
// rarely share a lock.
//
// The engine answers in toolgate's vocabulary (bucketing): a call past a
// budget is policy/budget_exhausted, a loop policy/loop_detected, a call
// over an upstream's rate rate_limit/local_rate_limit, a call during an
// upstream's backoff rate_limit/upstream_backoff, each with the time after
// which the same call may pass.
package budget

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/redisstate"
)

// Call is what the engine needs of one call. The binary fills it from
// proxy's BudgetCall (the same fields), once per admitted call; Args are
// read, never changed.
type Call struct {
	// Tool is the matched tool's name; for a tools/call on an MCP route,
	// the MCP tool's name (params.name).
	Tool string
	// Route is the configured tool of an MCP route a tools/call came
	// through ("" otherwise): the tools lists of budgets, loops and costs
	// match it as well as Tool.
	Route string
	// Agent and Session are the caller's, from the configured headers; ""
	// when the call carried none.
	Agent, Session string
	// Upstream is the host of the upstream the call goes to, written as
	// the host part of the configuration's keys (Config.Validate's
	// HostKey; IPv6 without brackets): the proxy writes both by
	// proxy.UpstreamKey's rules, so every spelling of one upstream has
	// one key ("api.example.org", "localhost").
	Upstream string
	// UpstreamPort is the call's port ("443").
	UpstreamPort string
	// UpstreamDefaultPort says UpstreamPort is its scheme's default, so an
	// upstreams entry that names no port applies to the call too.
	UpstreamDefaultPort bool
	// Args are the call's arguments, whose digest loop breaking compares.
	Args map[string]any

	admitted bool         // Admit let it through and charged it
	charged  float64      // the cost Admit charged
	start    int64        // the unix nanoseconds Admit saw
	fleet    *fleetCharge // what Admit charged in Redis (nil: local)
	skip     uint64       // limits (bit i; skipLoop) not counted locally
	skipRate bool         // the upstream's rate not applied locally
}

// Verdict is the engine's answer to one call. The zero value lets the call
// through.
type Verdict struct {
	// Refused is true when the call must not go upstream.
	Refused bool
	// Code and Reason are the refusal's, from bucketing's vocabulary.
	Code   bucketing.Code
	Reason string
	// Name is the budget (its name), "loops", or the upstream host that
	// refused.
	Name string
	// Detail is one sentence for the caller; it never holds an argument
	// value.
	Detail string
	// RetryAfter is when the same call may pass again.
	RetryAfter time.Duration
	// Limit is the budget's limit (calls, or cost when Unit is "cost"),
	// the loop's max_repeats, or the upstream's rate per second.
	Limit float64
	// Unit is what Limit counts: "calls", "cost", "repeats" or "calls/s".
	Unit string
	// Window is the budget's or the loop's window; 0 for upstreams.
	Window time.Duration
	// Waited is how long the call waited for its turn under an upstream's
	// rate before it was let through.
	Waited time.Duration
	// Scope is which counters decided the call: ScopeFleet (Redis),
	// ScopeLocal (this sidecar's), or "" when no budget, loop rule or rate
	// applied to it.
	Scope string
}

// Outcome is how an admitted call ended, for Settle.
type Outcome struct {
	// Code is the call's bucketed error code (CodeNone when it succeeded).
	Code bucketing.Code
	// RetryAfter is upstream's Retry-After (0 when none).
	RetryAfter time.Duration
	// Header is upstream's answer's header (nil when upstream never
	// answered), where a cost header is read.
	Header http.Header
}

// Engine decides calls against one validated Config. Build it with New;
// it is safe for concurrent use.
type Engine struct {
	cfg       *Config
	seed      maphash.Seed
	store     *store
	upstreams map[string]*hostLimits // by key host
	costs     map[string]toolCost
	metrics   *Metrics
	limitM    []*budgetMetrics // by index in cfg.Limits
	now       func() time.Time
	fleet     atomic.Pointer[redisstate.Client]
}

type toolCost struct {
	cost   float64
	header string
}

// hostLimits are the upstreams entries of one host.
type hostLimits struct {
	ports map[string]*upstream // entries with a port
	any   *upstream            // the entry without one: default ports
}

type upstream struct {
	host    string
	cfg     *Upstream
	limiter *rate.Limiter // nil: no rate
	until   atomic.Int64  // backoff until, unix nanoseconds
	m       *limiterMetrics
}

// New returns an engine for a Config that Validate accepted, or nil when
// the Config configures nothing. m receives the metrics (NewMetrics; nil:
// fresh ones).
func New(cfg *Config, m *Metrics) *Engine {
	if cfg == nil || !cfg.Configured() {
		return nil
	}
	if m == nil {
		m = NewMetrics()
	}
	e := &Engine{cfg: cfg, seed: maphash.MakeSeed(), metrics: m, now: time.Now,
		upstreams: map[string]*hostLimits{}, costs: map[string]toolCost{}}
	e.store = newStore(cfg.MaxKeys, m)
	for name, c := range cfg.Costs {
		tc := toolCost{cost: DefaultCost, header: c.Header}
		if c.Cost != nil {
			tc.cost = *c.Cost
		}
		e.costs[name] = tc
	}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		up := &upstream{host: u.Host, cfg: u, m: m.limiter(u.Host)}
		if u.Rate > 0 {
			up.limiter = rate.NewLimiter(rate.Limit(u.Rate), u.Burst)
		}
		hl := e.upstreams[u.keyHost]
		if hl == nil {
			hl = &hostLimits{ports: map[string]*upstream{}}
			e.upstreams[u.keyHost] = hl
		}
		if u.keyPort == "" {
			hl.any = up
		} else {
			hl.ports[u.keyPort] = up
		}
	}
	for i := range cfg.Limits {
		e.limitM = append(e.limitM, m.budget(cfg.Limits[i].Name))
	}
	m.mu.Lock()
	m.keys = e.store.keys
	m.mu.Unlock()
	return e
}

// Config is the engine's configuration (read-only).
func (e *Engine) Config() *Config { return e.cfg }

// Metrics is the engine's metrics.
func (e *Engine) Metrics() *Metrics { return e.metrics }

// upstreamOf is the upstreams entry that applies to c: the one naming its
// upstream's host and port, else, on its scheme's default port, the one
// naming its host without a port. nil: none.
func (e *Engine) upstreamOf(c *Call) *upstream {
	if len(e.upstreams) == 0 {
		return nil
	}
	hl := e.upstreams[c.Upstream]
	if hl == nil {
		return nil
	}
	if up := hl.ports[c.UpstreamPort]; up != nil || !c.UpstreamDefaultPort {
		return up
	}
	return hl.any
}

// costOf is what one call costs: its tool's cost, else its MCP route's.
func (e *Engine) costOf(c *Call) toolCost {
	if tc, ok := e.costs[c.Tool]; ok {
		return tc
	}
	if tc, ok := e.costs[c.Route]; ok && c.Route != "" {
		return tc
	}
	return toolCost{cost: DefaultCost}
}

// inTools reports whether a tools list (nil: every tool) covers c.
func inTools(set map[string]bool, c *Call) bool {
	return set == nil || set[c.Tool] || c.Route != "" && set[c.Route]
}

// MayApply reports whether anything the engine counts could ever apply to
// the calls of tool going to upstream host (written as Call.Upstream is;
// "" when the tool names no host and its calls may go to any): a budget
// or the loop rule over every tool or naming it, or a configured
// upstream's rate or backoff. It is asked once per tool when a chain is
// compiled: a tool it cannot apply to has no budget step, and its calls
// pay nothing for the budgets section. It answers true whenever it cannot
// tell.
func (e *Engine) MayApply(tool, host string) bool {
	c := Call{Tool: tool}
	for i := range e.cfg.Limits {
		if inTools(e.cfg.Limits[i].tools, &c) {
			return true
		}
	}
	if lp := &e.cfg.Loops; lp.MaxRepeats > 0 && inTools(lp.tools, &c) {
		return true
	}
	if len(e.upstreams) == 0 {
		return false
	}
	return host == "" || e.upstreams[host] != nil
}

// Admit decides a call that passed every other check and charges it: an
// upstream in backoff, then the budgets and loop breaking, then the
// upstream's rate (which may wait up to its max_wait, or until ctx ends).
// A refused call is not charged.
func (e *Engine) Admit(ctx context.Context, c *Call) Verdict {
	v := e.admit(ctx, c)
	if v.Scope == "" && e.applies(c) {
		v.Scope = ScopeLocal
	}
	return v
}

// applies reports whether a budget, the loop rule or an upstream's rate
// applies to c.
func (e *Engine) applies(c *Call) bool {
	for i := range e.cfg.Limits {
		if _, ok := e.limitKey(i, &e.cfg.Limits[i], c); ok {
			return true
		}
	}
	if lp := &e.cfg.Loops; lp.MaxRepeats > 0 && c.Session != "" && inTools(lp.tools, c) {
		return true
	}
	up := e.upstreamOf(c)
	return up != nil && up.limiter != nil
}

func (e *Engine) admit(ctx context.Context, c *Call) Verdict {
	now := e.now()
	c.start = now.UnixNano()
	c.fleet, c.skip, c.skipRate = nil, 0, false
	up := e.upstreamOf(c)
	if up != nil && *up.cfg.Backoff {
		if until := up.until.Load(); until > c.start {
			up.m.backoff.Inc()
			wait := time.Duration(until - c.start)
			return Verdict{Refused: true, Code: bucketing.CodeRateLimit, Reason: bucketing.ReasonUpstreamBackoff,
				Name: up.host, RetryAfter: wait, Unit: "calls/s", Limit: up.cfg.Rate,
				Detail: fmt.Sprintf("Upstream %s asked for a pause (429 with Retry-After); calls to it are answered here for %s more", up.host, roundMS(wait))}
		}
	}
	tc := e.costOf(c)
	if f := e.fleet.Load(); f != nil {
		if v, handled := e.admitFleet(ctx, f, c, up, tc.cost); handled {
			return v
		}
		now = e.now() // the fallback goes on locally, after the timeout
	}
	if v := e.charge(c, tc.cost, c.start); v.Refused {
		return v
	}
	c.admitted, c.charged = true, tc.cost
	if up == nil || up.limiter == nil || c.skipRate {
		return Verdict{}
	}
	r := up.limiter.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if !r.OK() || delay > up.cfg.MaxWait {
		r.CancelAt(now)
		e.refund(c)
		up.m.refused.Inc()
		if !r.OK() {
			delay = time.Second
		}
		return Verdict{Refused: true, Code: bucketing.CodeRateLimit, Reason: bucketing.ReasonLocalRateLimit,
			Name: up.host, RetryAfter: delay, Limit: up.cfg.Rate, Unit: "calls/s",
			Detail: fmt.Sprintf("Calls to %s are over the local rate limit of %s a second (burst %d); retry in %s", up.host, formatNum(up.cfg.Rate), up.cfg.Burst, roundMS(delay))}
	}
	if delay <= 0 {
		up.m.passed.Inc()
		return Verdict{}
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		up.m.waited.Inc()
		up.m.waitSeconds.Add(delay.Seconds())
		return Verdict{Waited: delay}
	case <-ctx.Done():
		r.Cancel()
		e.refund(c)
		// The caller went away (or its deadline passed) while it waited:
		// the proxy records that as the caller's, not as a refusal.
		return Verdict{Refused: true, Code: bucketing.CodeRateLimit, Reason: bucketing.ReasonLocalRateLimit,
			Name: up.host, RetryAfter: delay, Limit: up.cfg.Rate, Unit: "calls/s",
			Detail: fmt.Sprintf("The call ended while it waited for its turn under the rate limit of %s", up.host)}
	}
}

// Settle completes an admitted call: a cost header's number replaces the
// configured cost, and an upstream 429 (or a rule's rate_limit) with a
// Retry-After starts the upstream's backoff.
func (e *Engine) Settle(c *Call, o Outcome) {
	if !c.admitted {
		return
	}
	if tc := e.costOf(c); tc.header != "" && o.Header != nil {
		if v := o.Header.Get(tc.header); v != "" {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
				e.adjustCost(c, f-c.charged)
				c.charged = f
			}
		}
	}
	if o.Code == bucketing.CodeRateLimit && o.RetryAfter > 0 {
		if up := e.upstreamOf(c); up != nil && *up.cfg.Backoff {
			wait := min(o.RetryAfter, up.cfg.MaxBackoff)
			until := e.now().Add(wait).UnixNano()
			for {
				old := up.until.Load()
				if old >= until || up.until.CompareAndSwap(old, until) {
					break
				}
			}
			up.m.backoffsStarted.Inc()
		}
	}
}

// charge checks every budget and the loop rule that apply to c, and
// charges them; on a refusal, what was charged is refunded.
func (e *Engine) charge(c *Call, cost float64, now int64) Verdict {
	for i := range e.cfg.Limits {
		l := &e.cfg.Limits[i]
		key, ok := e.limitKey(i, l, c)
		if !ok || c.skip&(1<<uint(i)) != 0 {
			continue
		}
		cc := cost
		if l.Cost == 0 {
			cc = 0
		}
		calls, _, until, ok := e.store.add(key, now, int64(l.Window), 1, cc, l.Calls, l.Cost)
		if !ok {
			e.refundUpTo(c, i, cost)
			e.limitM[i].refused.Inc()
			wait := time.Duration(until - now)
			v := Verdict{Refused: true, Code: bucketing.CodePolicy, Reason: bucketing.ReasonBudgetExhausted,
				Name: l.Name, RetryAfter: wait, Window: l.Window}
			if l.Calls > 0 && calls+1 > l.Calls {
				v.Limit, v.Unit = float64(l.Calls), "calls"
			} else {
				v.Limit, v.Unit = l.Cost, "cost"
			}
			v.Detail = fmt.Sprintf("Budget '%s' (%s %s per %s%s) is exhausted; it frees up in %s", l.Name, formatNum(v.Limit), v.Unit, l.Window, perWords(l.per), roundMS(wait))
			return v
		}
		e.limitM[i].admitted.Inc()
	}
	lp := &e.cfg.Loops
	if lp.MaxRepeats > 0 && c.Session != "" && inTools(lp.tools, c) && c.skip&skipLoop == 0 {
		key := e.loopKey(c)
		n, _, until, ok := e.store.add(key, now, int64(lp.Window), 1, 0, lp.MaxRepeats, 0)
		if !ok {
			e.refundUpTo(c, len(e.cfg.Limits), cost)
			e.metrics.loops.Inc()
			wait := time.Duration(until - now)
			return Verdict{Refused: true, Code: bucketing.CodePolicy, Reason: bucketing.ReasonLoopDetected,
				Name: "loops", RetryAfter: wait, Window: lp.Window, Limit: float64(lp.MaxRepeats), Unit: "repeats",
				Detail: fmt.Sprintf("Tool '%s' was called %d times with the same arguments in this session within %s (loops.max_repeats %d); change the call or stop (retry in %s)", c.Tool, n, lp.Window, lp.MaxRepeats, roundMS(wait))}
		}
	}
	return Verdict{}
}

// Refund takes back what Admit charged a call it let through that will
// not go upstream after all (another call of its MCP batch was refused).
func (e *Engine) Refund(c *Call) { e.refund(c) }

// refund takes back what Admit charged c.
func (e *Engine) refund(c *Call) {
	if !c.admitted {
		return
	}
	c.admitted = false
	if c.fleet != nil {
		e.undoFleet(c.fleet, true, 0)
		return
	}
	e.refundUpTo(c, len(e.cfg.Limits)+1, c.charged)
}

// refundUpTo takes back one call and cost from the budgets before index n
// (n past the budgets includes the loop counter).
func (e *Engine) refundUpTo(c *Call, n int, cost float64) {
	for i := 0; i < n && i < len(e.cfg.Limits); i++ {
		l := &e.cfg.Limits[i]
		if key, ok := e.limitKey(i, l, c); ok && c.skip&(1<<uint(i)) == 0 {
			cc := cost
			if l.Cost == 0 {
				cc = 0
			}
			e.store.undo(key, c.start, -1, -cc)
		}
	}
	lp := &e.cfg.Loops
	if n > len(e.cfg.Limits) && lp.MaxRepeats > 0 && c.Session != "" && inTools(lp.tools, c) && c.skip&skipLoop == 0 {
		e.store.undo(e.loopKey(c), c.start, -1, 0)
	}
}

// adjustCost adds delta to the cost budgets c was charged to.
func (e *Engine) adjustCost(c *Call, delta float64) {
	if delta == 0 {
		return
	}
	if c.fleet != nil {
		e.undoFleet(c.fleet, false, delta)
		return
	}
	for i := range e.cfg.Limits {
		l := &e.cfg.Limits[i]
		if l.Cost == 0 {
			continue
		}
		if key, ok := e.limitKey(i, l, c); ok && c.skip&(1<<uint(i)) == 0 {
			e.store.undo(key, c.start, 0, delta)
		}
	}
}

// limitKey is the counter key of budget i for c, and whether the budget
// applies to c at all.
func (e *Engine) limitKey(i int, l *Limit, c *Call) (uint64, bool) {
	if !inTools(l.tools, c) {
		return 0, false
	}
	if l.per&dimSession != 0 && c.Session == "" || l.per&dimAgent != 0 && c.Agent == "" {
		return 0, false
	}
	var h maphash.Hash
	h.SetSeed(e.seed)
	h.WriteByte(byte(i))
	if l.per&dimTool != 0 {
		h.WriteString(c.Tool)
		h.WriteByte(0)
	}
	if l.per&dimAgent != 0 {
		h.WriteString(c.Agent)
		h.WriteByte(0)
	}
	if l.per&dimSession != 0 {
		h.WriteString(c.Session)
		h.WriteByte(0)
	}
	return h.Sum64(), true
}

// loopKey is the loop counter's key: session, tool and argument digest.
func (e *Engine) loopKey(c *Call) uint64 {
	var h maphash.Hash
	h.SetSeed(e.seed)
	h.WriteByte(0xff)
	h.WriteString(c.Session)
	h.WriteByte(0)
	h.WriteString(c.Tool)
	h.WriteByte(0)
	var b [8]byte
	d := Digest(e.seed, c.Args)
	for i := range b {
		b[i] = byte(d >> (8 * i))
	}
	h.Write(b[:])
	return h.Sum64()
}

// Counters is what policies see as input.budget: for each budget that
// applies to c, its counter in the current window (calls, cost, limits,
// window_ms, resets_in_ms), and the number of identical calls in the loop
// window (repeats). It reads without charging.
//
// With state.redis the counters are the fleet's, read in one round trip
// (the local ones when Redis cannot answer).
func (e *Engine) Counters(c *Call) map[string]any {
	if f := e.fleet.Load(); f != nil {
		if out, ok := e.countersFleet(f, c); ok {
			return out
		}
	}
	now := e.now().UnixNano()
	limits := make(map[string]any, len(e.cfg.Limits))
	for i := range e.cfg.Limits {
		l := &e.cfg.Limits[i]
		key, ok := e.limitKey(i, l, c)
		if !ok {
			continue
		}
		calls, cost, until := e.store.get(key, now)
		resets := int64(0)
		if until > now {
			resets = (until - now) / int64(time.Millisecond)
		}
		limits[l.Name] = map[string]any{
			"calls": calls, "cost": cost, "limit_calls": l.Calls, "limit_cost": l.Cost,
			"window_ms": l.Window.Milliseconds(), "resets_in_ms": resets,
		}
	}
	out := map[string]any{"limits": limits, "repeats": int64(0)}
	if lp := &e.cfg.Loops; lp.MaxRepeats > 0 && c.Session != "" {
		n, _, _ := e.store.get(e.loopKey(c), now)
		out["repeats"] = n
	}
	return out
}

func perWords(d dims) string {
	var parts []string
	if d&dimSession != 0 {
		parts = append(parts, PerSession)
	}
	if d&dimAgent != 0 {
		parts = append(parts, PerAgent)
	}
	if d&dimTool != 0 {
		parts = append(parts, PerTool)
	}
	if len(parts) == 0 {
		return ""
	}
	return ", per " + strings.Join(parts, " and ")
}

func formatNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func roundMS(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d.Round(time.Millisecond)
}
