package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/redisstate"
)

// Scopes a Verdict names: which counters decided the call.
const (
	// ScopeFleet: the fleet's shared counters in Redis (state.redis).
	ScopeFleet = "fleet"
	// ScopeLocal: this sidecar's own counters: no state.redis, or Redis
	// could not answer and the limits fell back (on_unavailable).
	ScopeLocal = "local"
)

// What a limit does when Redis cannot answer in time (on_unavailable).
const (
	// UnavailableLocal counts the call in this sidecar's own counters, as
	// without state.redis (the default).
	UnavailableLocal = "local"
	// UnavailableDeny refuses the call (rate_limit/limit_unavailable,
	// retryable).
	UnavailableDeny = "deny"
	// UnavailableAllow lets the call through uncounted by this limit.
	UnavailableAllow = "allow"
)

// fleetTag is the Cluster hash tag of every budget, loop and rate key: a
// call's keys, whatever its budgets, are in one slot, so one script
// decides them all.
const fleetTag = "b"

// skipLoop is Call.skip's bit for the loop counter; bits 0 to maxLimits-1
// are the budgets'.
const skipLoop = uint64(1) << 63

// chargeScript checks every counter of a call and its upstream's rate and,
// only when all pass, charges them all: one atomic step. KEYS: the
// counters, then the rate key when ARGV[2] is 1. ARGV: n, hasRate, then per
// counter window_ms, max_calls, max_cost, cost, then rate (calls/s), burst,
// max_wait_ms. A counter is a hash {c: calls, k: cost, s: the window's
// start id}, created with a TTL of its window; the rate key holds the
// GCRA's theoretical arrival time in ms. The reply is {refused index (0:
// none; n+1: the rate), calls, cost, ms left in the window (or the wait),
// wait ms, the counters' start ids...}; numbers that may be fractions are
// strings (Lua numbers reach clients as integers).
var chargeScript = redisstate.NewScript(`
local n = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
for i = 1, n do
  local a = 2 + (i - 1) * 4
  local maxc = tonumber(ARGV[a + 2])
  local maxk = tonumber(ARGV[a + 3])
  local cost = tonumber(ARGV[a + 4])
  local v = redis.call('HMGET', KEYS[i], 'c', 'k')
  local c = tonumber(v[1]) or 0
  local k = tonumber(v[2]) or 0
  if (maxc > 0 and c + 1 > maxc) or (maxk > 0 and cost > 0 and k + cost > maxk) then
    return {i, c, tostring(k), redis.call('PTTL', KEYS[i]), '0'}
  end
end
local wait = 0
if tonumber(ARGV[2]) == 1 then
  local a = 2 + n * 4
  local interval = 1000 / tonumber(ARGV[a + 1])
  local burst = tonumber(ARGV[a + 2])
  local maxwait = tonumber(ARGV[a + 3])
  local tat = tonumber(redis.call('GET', KEYS[n + 1])) or now
  if tat < now then tat = now end
  local newtat = tat + interval
  wait = newtat - burst * interval - now
  if wait < 0 then wait = 0 end
  if wait > maxwait then
    return {n + 1, 0, '0', math.ceil(wait), tostring(wait)}
  end
  redis.call('SET', KEYS[n + 1], tostring(newtat), 'PX', math.ceil(newtat - now) + 1000)
end
local out = {0, 0, '0', 0, tostring(wait)}
local start = t[1] .. '.' .. t[2]
for i = 1, n do
  local a = 2 + (i - 1) * 4
  local cost = tonumber(ARGV[a + 4])
  redis.call('HINCRBY', KEYS[i], 'c', 1)
  if cost > 0 then redis.call('HINCRBYFLOAT', KEYS[i], 'k', ARGV[a + 4]) end
  if redis.call('HSETNX', KEYS[i], 's', start) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[a + 1])
  end
  out[5 + i] = redis.call('HGET', KEYS[i], 's')
end
return out
`)

// undoScript takes charges back (a refund) or adds a cost learned from
// the answer, to counters still in the window that was charged. KEYS: the
// counters, then the rate key when ARGV[2] is 1. ARGV: n, hasRate, then
// per counter start id, delta calls, delta cost, then the rate's interval
// in ms (its slot is given back).
var undoScript = redisstate.NewScript(`
local n = tonumber(ARGV[1])
for i = 1, n do
  local a = 2 + (i - 1) * 3
  if redis.call('HGET', KEYS[i], 's') == ARGV[a + 1] then
    if tonumber(ARGV[a + 2]) ~= 0 then
      if redis.call('HINCRBY', KEYS[i], 'c', ARGV[a + 2]) < 0 then redis.call('HSET', KEYS[i], 'c', 0) end
    end
    if tonumber(ARGV[a + 3]) ~= 0 then
      if tonumber(redis.call('HINCRBYFLOAT', KEYS[i], 'k', ARGV[a + 3])) < 0 then redis.call('HSET', KEYS[i], 'k', 0) end
    end
  end
end
if tonumber(ARGV[2]) == 1 then
  local tat = tonumber(redis.call('GET', KEYS[n + 1]))
  if tat then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
    tat = tat - tonumber(ARGV[2 + n * 3 + 1])
    if tat < now then tat = now end
    redis.call('SET', KEYS[n + 1], tostring(tat), 'KEEPTTL')
  end
end
return 0
`)

// getScript reads counters without charging: per key {calls, cost, ms
// left}.
var getScript = redisstate.NewScript(`
local out = {}
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'c', 'k')
  out[i] = {tonumber(v[1]) or 0, v[2] or '0', redis.call('PTTL', KEYS[i])}
end
return out
`)

// fleetCharge is what Admit charged a call in Redis, for its refund.
type fleetCharge struct {
	keys    []string
	limits  []int // index in cfg.Limits, or -1 for the loop counter
	costs   []float64
	starts  []string
	rateKey string
	rate    float64
}

// UseFleet makes the engine keep its budgets, loop counters and upstream
// rates in the fleet's Redis (state.redis) instead of this process; nil
// goes back to local counters. Call it before the engine takes calls (the
// sidecar does, as it builds it).
func (e *Engine) UseFleet(c *redisstate.Client) {
	e.fleet.Store(c)
	e.metrics.mu.Lock()
	if c != nil {
		e.metrics.degraded = c.Degraded
	} else {
		e.metrics.degraded = nil
	}
	e.metrics.mu.Unlock()
}

// Fleet is the Redis the engine keeps its counters in (nil: local).
func (e *Engine) Fleet() *redisstate.Client { return e.fleet.Load() }

// fleetKeyParts are the parts a budget's key is hashed from: its name and
// the values of its dimensions, each named, so a budget per agent and one
// per session never share a key.
func fleetLimitKey(f *redisstate.Client, l *Limit, c *Call) string {
	parts := []string{l.Name}
	if l.per&dimTool != 0 {
		parts = append(parts, "t", c.Tool)
	}
	if l.per&dimAgent != 0 {
		parts = append(parts, "a", c.Agent)
	}
	if l.per&dimSession != 0 {
		parts = append(parts, "s", c.Session)
	}
	return f.Key(fleetTag, "b", parts...)
}

// fleetLoopKey is the loop counter's key: session, tool and the canonical
// arguments' SHA-256 (the same on every sidecar, unlike Digest's seeded
// hash).
func fleetLoopKey(f *redisstate.Client, c *Call) string {
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	sum := sha256.Sum256(canonjson.Append(nil, args))
	return f.Key(fleetTag, "l", c.Session, c.Tool, hex.EncodeToString(sum[:]))
}

// admitFleet is Admit with state.redis: every counter and the rate in one
// script call. When Redis cannot answer, each limit falls back as its
// on_unavailable says: handled reports false and Admit goes on locally
// with c.skip set (or the verdict refuses the call at once).
func (e *Engine) admitFleet(ctx context.Context, f *redisstate.Client, c *Call, up *upstream, cost float64) (v Verdict, handled bool) {
	fc := &fleetCharge{}
	var argv []any
	argv = append(argv, 0, 0)
	for i := range e.cfg.Limits {
		l := &e.cfg.Limits[i]
		if _, ok := e.limitKey(i, l, c); !ok {
			continue
		}
		cc := cost
		if l.Cost == 0 {
			cc = 0
		}
		fc.keys = append(fc.keys, fleetLimitKey(f, l, c))
		fc.limits = append(fc.limits, i)
		fc.costs = append(fc.costs, cc)
		argv = append(argv, l.Window.Milliseconds(), l.Calls, fmtF(l.Cost), fmtF(cc))
	}
	lp := &e.cfg.Loops
	if lp.MaxRepeats > 0 && c.Session != "" && inTools(lp.tools, c) {
		fc.keys = append(fc.keys, fleetLoopKey(f, c))
		fc.limits = append(fc.limits, -1)
		fc.costs = append(fc.costs, 0)
		argv = append(argv, lp.Window.Milliseconds(), lp.MaxRepeats, "0", "0")
	}
	n := len(fc.keys)
	keys := fc.keys
	rated := up != nil && up.limiter != nil
	if rated {
		fc.rateKey = f.Key(fleetTag, "r", up.cfg.key)
		fc.rate = up.cfg.Rate
		keys = append(keys[:n:n], fc.rateKey)
		argv = append(argv, fmtF(up.cfg.Rate), up.cfg.Burst, up.cfg.MaxWait.Milliseconds())
		argv[1] = 1
	}
	if n == 0 && !rated {
		return Verdict{}, true
	}
	argv[0] = n
	reply, err := f.Run(ctx, chargeScript, keys, argv...)
	if err != nil {
		e.metrics.fleetUnavailable.Inc()
		return e.fleetFallback(c, up, rated)
	}
	r, _ := reply.([]any)
	if len(r) < 5 {
		e.metrics.fleetUnavailable.Inc()
		return e.fleetFallback(c, up, rated)
	}
	e.metrics.fleetDecided.Inc()
	idx := int(redisstate.Int(r[0]))
	calls := redisstate.Int(r[1])
	left := time.Duration(max(0, redisstate.Int(r[3]))) * time.Millisecond
	wait := time.Duration(redisstate.Float(r[4]) * float64(time.Millisecond))
	switch {
	case idx == 0:
	case idx == n+1:
		up.m.refused.Inc()
		wait = max(wait, time.Millisecond)
		return Verdict{Refused: true, Code: bucketing.CodeRateLimit, Reason: bucketing.ReasonLocalRateLimit, Scope: ScopeFleet,
			Name: up.host, RetryAfter: wait, Limit: up.cfg.Rate, Unit: "calls/s",
			Detail: fmt.Sprintf("Calls to %s are over the fleet's rate limit of %s a second (burst %d); retry in %s", up.host, formatNum(up.cfg.Rate), up.cfg.Burst, roundMS(wait))}, true
	case fc.limits[idx-1] < 0:
		e.metrics.loops.Inc()
		return Verdict{Refused: true, Code: bucketing.CodePolicy, Reason: bucketing.ReasonLoopDetected, Scope: ScopeFleet,
			Name: "loops", RetryAfter: left, Window: lp.Window, Limit: float64(lp.MaxRepeats), Unit: "repeats",
			Detail: fmt.Sprintf("Tool '%s' was called %d times with the same arguments in this session within %s (loops.max_repeats %d); change the call or stop (retry in %s)", c.Tool, calls, lp.Window, lp.MaxRepeats, roundMS(left))}, true
	default:
		i := fc.limits[idx-1]
		l := &e.cfg.Limits[i]
		e.limitM[i].refused.Inc()
		v := Verdict{Refused: true, Code: bucketing.CodePolicy, Reason: bucketing.ReasonBudgetExhausted, Scope: ScopeFleet,
			Name: l.Name, RetryAfter: left, Window: l.Window}
		if l.Calls > 0 && calls+1 > l.Calls {
			v.Limit, v.Unit = float64(l.Calls), "calls"
		} else {
			v.Limit, v.Unit = l.Cost, "cost"
		}
		v.Detail = fmt.Sprintf("Budget '%s' (%s %s per %s%s) is exhausted; it frees up in %s", l.Name, formatNum(v.Limit), v.Unit, l.Window, perWords(l.per), roundMS(left))
		return v, true
	}
	for j := 0; j < n && 5+j < len(r); j++ {
		s, _ := r[5+j].(string)
		fc.starts = append(fc.starts, s)
		if i := fc.limits[j]; i >= 0 {
			e.limitM[i].admitted.Inc()
		}
	}
	c.admitted, c.charged, c.fleet = true, cost, fc
	if !rated {
		return Verdict{Scope: ScopeFleet}, true
	}
	if wait <= 0 {
		up.m.passed.Inc()
		return Verdict{Scope: ScopeFleet}, true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		up.m.waited.Inc()
		up.m.waitSeconds.Add(wait.Seconds())
		return Verdict{Waited: wait, Scope: ScopeFleet}, true
	case <-ctx.Done():
		e.refund(c)
		return Verdict{Refused: true, Code: bucketing.CodeRateLimit, Reason: bucketing.ReasonLocalRateLimit, Scope: ScopeFleet,
			Name: up.host, RetryAfter: wait, Limit: up.cfg.Rate, Unit: "calls/s",
			Detail: fmt.Sprintf("The call ended while it waited for its turn under the rate limit of %s", up.host)}, true
	}
}

// fleetFallback decides a call Redis could not: a limit that applies with
// on_unavailable deny refuses it; the others are counted locally (local)
// or skipped (allow), by the local path Admit goes on with.
func (e *Engine) fleetFallback(c *Call, up *upstream, rated bool) (Verdict, bool) {
	c.skip = 0
	deny := func(name, what string) (Verdict, bool) {
		wait := e.fleet.Load().Config().BreakerCooldown
		return Verdict{Refused: true, Code: bucketing.CodeRateLimit, Reason: bucketing.ReasonLimitUnavailable, Scope: ScopeLocal,
			Name: name, RetryAfter: wait, Unit: "calls",
			Detail: fmt.Sprintf("The fleet's counters (state.redis) could not be reached to count this call against %s, which is set to refuse calls then (on_unavailable: deny); retry in %s", what, roundMS(wait))}, true
	}
	for i := range e.cfg.Limits {
		l := &e.cfg.Limits[i]
		if _, ok := e.limitKey(i, l, c); !ok {
			continue
		}
		switch l.OnUnavailable {
		case UnavailableDeny:
			e.limitM[i].refused.Inc()
			return deny(l.Name, fmt.Sprintf("budget '%s'", l.Name))
		case UnavailableAllow:
			c.skip |= 1 << uint(i)
		}
	}
	lp := &e.cfg.Loops
	if lp.MaxRepeats > 0 && c.Session != "" && inTools(lp.tools, c) {
		switch lp.OnUnavailable {
		case UnavailableDeny:
			return deny("loops", "loop breaking")
		case UnavailableAllow:
			c.skip |= skipLoop
		}
	}
	if rated {
		switch up.cfg.OnUnavailable {
		case UnavailableDeny:
			up.m.refused.Inc()
			return deny(up.host, fmt.Sprintf("the rate limit of %s", up.host))
		case UnavailableAllow:
			c.skipRate = true
		}
	}
	return Verdict{}, false
}

// undoFleet takes back what admitFleet charged c (dCalls -1 and the
// charged costs, with the rate's slot), or adds delta to its cost
// budgets (calls 0, no rate). It runs in the background of the call with
// the configured timeout; a failure leaves the charge (never a double
// count).
func (e *Engine) undoFleet(fc *fleetCharge, refund bool, delta float64) {
	f := e.fleet.Load()
	if f == nil || fc == nil {
		return
	}
	var keys []string
	argv := []any{0, 0}
	n := 0
	for j, k := range fc.keys {
		if j >= len(fc.starts) {
			break
		}
		dc, dk := int64(0), 0.0
		if refund {
			dc, dk = -1, -fc.costs[j]
		} else if fc.costs[j] > 0 || fc.limits[j] >= 0 && e.cfg.Limits[fc.limits[j]].Cost > 0 {
			dk = delta
		}
		if dc == 0 && dk == 0 {
			continue
		}
		keys = append(keys, k)
		argv = append(argv, fc.starts[j], dc, fmtF(dk))
		n++
	}
	if refund && fc.rateKey != "" {
		keys = append(keys, fc.rateKey)
		argv = append(argv, fmtF(1000/fc.rate))
		argv[1] = 1
	}
	if len(keys) == 0 {
		return
	}
	argv[0] = n
	if _, err := f.Run(context.Background(), undoScript, keys, argv...); err != nil {
		e.metrics.fleetUnavailable.Inc()
	}
}

// countersFleet is Counters read from Redis: one read. When Redis cannot
// answer, the local counters are shown.
func (e *Engine) countersFleet(f *redisstate.Client, c *Call) (map[string]any, bool) {
	var keys []string
	var idx []int
	for i := range e.cfg.Limits {
		l := &e.cfg.Limits[i]
		if _, ok := e.limitKey(i, l, c); !ok {
			continue
		}
		keys = append(keys, fleetLimitKey(f, l, c))
		idx = append(idx, i)
	}
	lp := &e.cfg.Loops
	loop := lp.MaxRepeats > 0 && c.Session != ""
	if loop {
		keys = append(keys, fleetLoopKey(f, c))
		idx = append(idx, -1)
	}
	out := map[string]any{"limits": map[string]any{}, "repeats": int64(0)}
	if len(keys) == 0 {
		return out, true
	}
	reply, err := f.Run(context.Background(), getScript, keys)
	r, _ := reply.([]any)
	if err != nil || len(r) != len(keys) {
		return nil, false
	}
	limits := out["limits"].(map[string]any)
	for j, i := range idx {
		row, _ := r[j].([]any)
		if len(row) < 3 {
			continue
		}
		calls, cost, pttl := redisstate.Int(row[0]), redisstate.Float(row[1]), max(0, redisstate.Int(row[2]))
		if i < 0 {
			out["repeats"] = calls
			continue
		}
		l := &e.cfg.Limits[i]
		limits[l.Name] = map[string]any{
			"calls": calls, "cost": cost, "limit_calls": l.Calls, "limit_cost": l.Cost,
			"window_ms": l.Window.Milliseconds(), "resets_in_ms": pttl,
		}
	}
	return out, true
}

func fmtF(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "0"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
