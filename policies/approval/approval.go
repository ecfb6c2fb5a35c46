// Package approval is toolgate's approval step: a call that a policy (or
// the tool's configuration) says needs a person's approval is refused, or
// held, until a person approves it; the grant is bound to the whole call
// (Binding: tool, MCP route, method, canonical URL, arguments by value, an
// unread body, agent, session), used a bounded number of times, and
// expires. Requests and decisions are audit rows in a Store: a local file
// (FileStore) or ClickHouse (sink/clickhouse's ApprovalStore), shared by
// every sidecar and the dashboard.
//
// Gate satisfies the proxy's Approver; Gate.Decide is what the dashboard
// and `toolgate approvals` call.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// Store keeps approval requests and decisions. Rows are appended, never
// changed. Implementations are safe for concurrent use and may be shared
// by several processes.
type Store interface {
	// PutRequest appends a request row.
	PutRequest(ctx context.Context, r audit.ApprovalRequest) error
	// PutDecision appends a decision row.
	PutDecision(ctx context.Context, d audit.ApprovalDecision) error
	// Find returns the request with id (when id is not ""), else the
	// newest request with key, with its decisions in time order; false
	// when there is none.
	Find(ctx context.Context, id, key string) (Record, bool, error)
	// Recent returns requests made at or after since, newest first, at
	// most limit, each with its decisions.
	Recent(ctx context.Context, since time.Time, limit int) ([]Record, error)
}

// Record is one request and its decisions.
type Record struct {
	// Request is the request row.
	Request audit.ApprovalRequest `json:"request"`
	// Decisions are the decision rows for it, in time order (uses
	// included).
	Decisions []audit.ApprovalDecision `json:"decisions"`
}

// Verdict is the person's decision on the record (the first decision
// that is not a use); nil while undecided.
func (r *Record) Verdict() *audit.ApprovalDecision {
	for i := range r.Decisions {
		if r.Decisions[i].Verdict != audit.VerdictUsed {
			return &r.Decisions[i]
		}
	}
	return nil
}

// Uses counts the times a sidecar forwarded the call on the grant.
func (r *Record) Uses() int {
	n := 0
	for _, d := range r.Decisions {
		if d.Verdict == audit.VerdictUsed {
			n++
		}
	}
	return n
}

// State is the record's state at now: pending, approved, denied, revised,
// expired (undecided past its expiry, or decided more than decisionTTL
// ago) or used (approved and every use taken).
func (r *Record) State(now time.Time, decisionTTL time.Duration, uses int) string {
	v := r.Verdict()
	if v == nil {
		if !now.Before(r.Request.ExpiresAt) {
			return StateExpired
		}
		return policies.ApprovalPending
	}
	if !now.Before(v.Time.Add(decisionTTL)) {
		return StateExpired
	}
	switch v.Verdict {
	case audit.VerdictApproved:
		if r.Uses() >= uses {
			return StateUsed
		}
		return policies.ApprovalApproved
	case audit.VerdictDenied:
		return policies.ApprovalDenied
	}
	return policies.ApprovalRevised
}

// States of a Record beyond the call states in policies.
const (
	StateExpired = "expired"
	StateUsed    = "used"
)

// Gate decides, per call, whether it needs approval and whether it has
// it. It is safe for concurrent use.
type Gate struct {
	cfg     Config
	store   Store
	sidecar string
	held    chan struct{}
	now     func() time.Time
	key     []byte     // authenticates in-band tokens
	useMu   sync.Mutex // orders uses on a store that is no UseStore
}

// New returns a Gate over store for a validated configuration. sidecar
// names this instance in the audit rows.
func New(cfg Config, store Store, sidecar string) *Gate {
	key := cfg.stateKey
	if len(key) == 0 {
		key = make([]byte, MinStateKeyBytes)
		_, _ = rand.Read(key)
	}
	return &Gate{cfg: cfg, store: store, sidecar: sidecar, held: make(chan struct{}, cfg.MaxHeld), now: time.Now, key: key}
}

// Config is the gate's configuration.
func (g *Gate) Config() Config { return g.cfg }

// Store is the gate's store.
func (g *Gate) Store() Store { return g.store }

// Needs reports whether a call needs approval: a policy asked, or the
// tool's rule requires it (always, or destructive and the MCP server
// annotates the tool destructiveHint: true).
func (g *Gate) Needs(q *policies.ApprovalCall) bool {
	if q.Ask != nil {
		return true
	}
	r, ok := g.cfg.Tools[q.Tool]
	if !ok {
		return false
	}
	switch r.Require {
	case RequireAlways:
		return true
	case RequireDestructive:
		d, _ := q.Annotations["destructiveHint"].(bool)
		return d
	}
	return false
}

// Approve is the approval step for one call that passed the policies. A
// call that needs no approval gets ApprovalNone at the cost of a map
// lookup. Otherwise the newest request bound to the same call decides:
// approved with uses left (the use is recorded), denied, revised, or
// pending; with none (or one expired or used up) a new request is made.
// In hold mode a pending call waits, up to hold_timeout, for the decision.
// A store that fails refuses the call (fail closed).
//
// A call that carries an in-band Token is decided by the request the
// token names, once the token is verified (ApprovalInvalid when it is not
// toolgate's, was altered or lapsed; ApprovalMismatch when it binds
// another call); a token whose request expired or was used up asks anew.
// When the caller can be asked in-band, a pending outcome carries a fresh
// Token, and only a call that brought one may be held.
func (g *Gate) Approve(ctx context.Context, q *policies.ApprovalCall) policies.ApprovalOutcome {
	if !g.Needs(q) {
		return policies.ApprovalOutcome{}
	}
	rule := g.cfg.rule(q.Tool)
	bind := CallBinding(q)
	key := BindingKey(bind)
	var err error
	inBand := q.InBand && rule.InBand != InBandOff && g.cfg.URL != ""
	hold := rule.Mode == ModeHold && (!inBand || q.Token != "")
	now := g.now()
	var rec Record
	found := false
	if q.Token != "" {
		c, err := openToken(g.key, q.Token, now)
		if err != nil {
			return policies.ApprovalOutcome{State: policies.ApprovalInvalid,
				Detail: fmt.Sprintf("Tool '%s' was called with a requestState that is not a valid toolgate approval state (%s); call again without it to ask for approval", q.Tool, strings.TrimPrefix(err.Error(), ErrTokenInvalid.Error()+": "))}
		}
		if c.Key != key {
			return policies.ApprovalOutcome{State: policies.ApprovalMismatch, ID: c.ID,
				Detail: fmt.Sprintf("Tool '%s' was called with the approval state of another call (approval %s; the tool, route, method, destination, arguments, agent or session differ); arguments cannot change under an approval: call again without the state to ask for a new one", q.Tool, c.ID)}
		}
		rec, found, err = g.store.Find(ctx, c.ID, "")
		if err != nil {
			return g.unavailable("the approval store could not be read")
		}
		found = found && rec.Request.Key == key
		if found {
			switch rec.State(now, g.cfg.DecisionTTL, rule.Uses) {
			case StateExpired, StateUsed:
				found = false // the newest request for the call decides
			}
		}
	}
	if !found {
		rec, found, err = g.store.Find(ctx, "", key)
		if err != nil {
			return g.unavailable("the approval store could not be read")
		}
	}
	if found {
		switch rec.State(now, g.cfg.DecisionTTL, rule.Uses) {
		case policies.ApprovalApproved:
			if out, ok := g.use(ctx, &rec, rule.Uses); ok {
				return out
			}
			// Another call took the grant's last use first: the grant is
			// used, and the call is asked anew.
		case policies.ApprovalPending:
			if hold {
				return g.inBand(g.hold(ctx, rec.Request.ID, rule), key, inBand)
			}
			return g.inBand(g.pending(&rec.Request), key, inBand)
		case policies.ApprovalDenied, policies.ApprovalRevised:
			return g.decided(&rec)
		}
	}
	if n, err := g.pendingCount(ctx, now); err != nil {
		return g.unavailable("the approval store could not be read")
	} else if n >= g.cfg.MaxPending {
		return g.unavailable(fmt.Sprintf("%d approval requests are pending, the most approvals.max_pending allows", n))
	}
	req := audit.ApprovalRequest{
		ID: newID(), Time: now.UTC(), ExpiresAt: now.Add(g.cfg.PendingTTL).UTC(), Key: key,
		Tool: q.Tool, Method: q.Method, Destination: cutText(q.Destination, MaxDestinationBytes),
		Agent: q.Agent, Session: q.Session, ArgsDigest: bind.ArgsDigest,
		Summary: map[string]string{}, Sidecar: g.sidecar, TraceID: q.TraceID,
	}
	if q.Ask != nil {
		req.Effect, req.Policy = q.Ask.Effect, q.Ask.Policy
		for k, v := range q.Ask.Summary {
			req.Summary[k] = v
		}
	} else {
		req.Effect = fmt.Sprintf("calls tool %s (its configuration requires approval)", q.Tool)
	}
	if err := g.store.PutRequest(ctx, req); err != nil {
		return g.unavailable("the approval store could not be written")
	}
	if hold {
		return g.inBand(g.hold(ctx, req.ID, rule), key, inBand)
	}
	return g.inBand(g.pending(&req), key, inBand)
}

// inBand adds a fresh in-band token to a pending (or held past its
// timeout) outcome when the caller is asked in-band. The token lapses
// when a grant made now would: pending_ttl plus decision_ttl from now.
func (g *Gate) inBand(out policies.ApprovalOutcome, key string, inBand bool) policies.ApprovalOutcome {
	if !inBand || out.ID == "" || (out.State != policies.ApprovalPending && out.State != policies.ApprovalHeldTimeout) {
		return out
	}
	out.Token = issueToken(g.key, out.ID, key, g.now().Add(g.cfg.PendingTTL+g.cfg.DecisionTTL))
	return out
}

// pendingCount counts undecided, unexpired requests.
func (g *Gate) pendingCount(ctx context.Context, now time.Time) (int, error) {
	return countPending(ctx, g.store, now.Add(-g.cfg.PendingTTL), now, g.cfg.MaxPending)
}

// PendingCounter is a Store that counts its pending requests itself,
// without handing every recent record over (FileStore; FleetStore when
// the store it wraps is one). A new approval request is counted against
// approvals.max_pending each time, so the count must not cost in
// proportion to the decided records still kept.
type PendingCounter interface {
	// CountPending counts requests made at or after since that are
	// undecided and unexpired at now, stopping at limit.
	CountPending(ctx context.Context, since, now time.Time, limit int) (int, error)
}

// countPending is s's CountPending, else countRecent.
func countPending(ctx context.Context, s Store, since, now time.Time, limit int) (int, error) {
	if pc, ok := s.(PendingCounter); ok {
		return pc.CountPending(ctx, since, now, limit)
	}
	return countRecent(ctx, s, since, now, limit)
}

// countRecent counts the undecided requests unexpired at now among the
// newest limit+1 made since since: exact only while fewer than limit+1
// requests were made since since.
func countRecent(ctx context.Context, s Store, since, now time.Time, limit int) (int, error) {
	recs, err := s.Recent(ctx, since, limit+1)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range recs {
		if recs[i].Verdict() == nil && now.Before(recs[i].Request.ExpiresAt) {
			n++
		}
	}
	return n, nil
}

// UseStore is a Store that decides a grant's use in one step: it appends
// the use row d only when the request has fewer than uses uses, under a
// lock every writer of the store honours, and reports whether it did.
// FileStore is one (flock on the file); the ClickHouse store is not, and
// its check and use are two steps (docs/approvals.md).
type UseStore interface {
	Use(ctx context.Context, d audit.ApprovalDecision, uses int) (bool, error)
}

// use records one use of an approved grant and lets the call through. ok
// is false when the store decides uses in one step and another call took
// the last use first: the call is not let through.
func (g *Gate) use(ctx context.Context, rec *Record, uses int) (out policies.ApprovalOutcome, ok bool) {
	d := audit.ApprovalDecision{ID: rec.Request.ID, Time: g.now().UTC(), Verdict: audit.VerdictUsed, Decider: "sidecar:" + g.sidecar}
	if us, isUse := g.store.(UseStore); isUse {
		taken, err := us.Use(ctx, d, uses)
		if errors.Is(err, redisstate.ErrUnavailable) {
			return g.unavailable("the fleet's use counter (state.redis) could not confirm this use of the grant"), true
		}
		if err != nil {
			return g.unavailable("the approval store could not be written"), true
		}
		if !taken {
			return policies.ApprovalOutcome{}, false
		}
	} else {
		// A store without a one-step use (ClickHouse): this sidecar's uses
		// are decided one at a time, on the store's count read again, so
		// one sidecar never exceeds uses; across sidecars the read and the
		// write are two steps (docs/approvals.md).
		g.useMu.Lock()
		defer g.useMu.Unlock()
		cur, found, err := g.store.Find(ctx, rec.Request.ID, "")
		if err != nil {
			return g.unavailable("the approval store could not be read"), true
		}
		if !found || cur.Uses() >= uses {
			return policies.ApprovalOutcome{}, false
		}
		if err := g.store.PutDecision(ctx, d); err != nil {
			return g.unavailable("the approval store could not be written"), true
		}
	}
	return policies.ApprovalOutcome{State: policies.ApprovalApproved, ID: rec.Request.ID, URL: g.url(rec.Request.ID)}, true
}

// hold waits for the request's decision, up to hold_timeout, polling the
// store; a full hold queue answers pending at once.
func (g *Gate) hold(ctx context.Context, id string, rule ToolRule) policies.ApprovalOutcome {
	select {
	case g.held <- struct{}{}:
		defer func() { <-g.held }()
	default:
		rec, _, _ := g.store.Find(ctx, id, "")
		out := g.pending(&rec.Request)
		out.Detail += fmt.Sprintf(" (%d requests are held already, the most approvals.max_held allows)", g.cfg.MaxHeld)
		return out
	}
	deadline := time.NewTimer(g.cfg.HoldTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(g.cfg.PollInterval)
	defer tick.Stop()
	for {
		rec, found, err := g.store.Find(ctx, id, "")
		if err != nil || !found {
			return g.unavailable("the approval store could not be read")
		}
		switch rec.State(g.now(), g.cfg.DecisionTTL, rule.Uses) {
		case policies.ApprovalApproved:
			if out, ok := g.use(ctx, &rec, rule.Uses); ok {
				return out
			}
			out := g.pending(&rec.Request) // another call took the last use
			out.State = policies.ApprovalHeldTimeout
			return out
		case policies.ApprovalDenied, policies.ApprovalRevised:
			return g.decided(&rec)
		case policies.ApprovalPending:
		default: // expired or used while held
			out := g.pending(&rec.Request)
			out.State = policies.ApprovalHeldTimeout
			return out
		}
		select {
		case <-ctx.Done():
			out := g.pending(&rec.Request)
			out.State = policies.ApprovalHeldTimeout
			return out
		case <-deadline.C:
			out := g.pending(&rec.Request)
			out.State = policies.ApprovalHeldTimeout
			out.Detail = fmt.Sprintf("Tool '%s' needs a person's approval, and none was given within %s (approval %s); retry the same call once it is approved", rec.Request.Tool, g.cfg.HoldTimeout, rec.Request.ID)
			return out
		case <-tick.C:
		}
	}
}

func (g *Gate) pending(r *audit.ApprovalRequest) policies.ApprovalOutcome {
	return policies.ApprovalOutcome{
		State: policies.ApprovalPending, ID: r.ID, URL: g.url(r.ID), ExpiresAt: r.ExpiresAt,
		RetryAfter: g.cfg.RetryAfter,
		Detail:     fmt.Sprintf("Tool '%s' needs a person's approval before this call goes upstream (approval %s); retry the same call once it is approved", r.Tool, r.ID),
	}
}

func (g *Gate) decided(rec *Record) policies.ApprovalOutcome {
	v := rec.Verdict()
	out := policies.ApprovalOutcome{ID: rec.Request.ID, URL: g.url(rec.Request.ID), Note: v.Note}
	if v.Verdict == audit.VerdictDenied {
		out.State = policies.ApprovalDenied
		out.Detail = fmt.Sprintf("Tool '%s': a person denied this call (approval %s)", rec.Request.Tool, rec.Request.ID)
	} else {
		out.State = policies.ApprovalRevised
		out.Detail = fmt.Sprintf("Tool '%s': a person asked for changed arguments (approval %s)", rec.Request.Tool, rec.Request.ID)
	}
	if v.Note != "" {
		out.Detail += ": " + v.Note
	}
	return out
}

func (g *Gate) unavailable(why string) policies.ApprovalOutcome {
	return policies.ApprovalOutcome{State: policies.ApprovalUnavailable, RetryAfter: g.cfg.RetryAfter,
		Detail: "This call needs a person's approval and cannot be asked for now: " + why}
}

// url is the Approvals page's address for a request.
func (g *Gate) url(id string) string {
	if g.cfg.URL == "" {
		return ""
	}
	u, err := url.Parse(g.cfg.URL)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("id", id)
	u.RawQuery = q.Encode()
	return u.String()
}

// Decide records a person's decision (audit.VerdictApproved, VerdictDenied
// or VerdictRevised) on a pending request. who is recorded as the
// decider; note is shown to the caller on a revision or denial. It fails
// with ErrNotFound, ErrDecided or ErrExpired.
func (g *Gate) Decide(ctx context.Context, id, verdict, who, note string) (Record, error) {
	switch verdict {
	case audit.VerdictApproved, audit.VerdictDenied, audit.VerdictRevised:
	default:
		return Record{}, fmt.Errorf("%w: %q; want approved, denied or revised", ErrVerdict, verdict)
	}
	who = strings.TrimSpace(who)
	if who == "" {
		return Record{}, ErrNoDecider
	}
	if !validID(id) {
		return Record{}, ErrNotFound
	}
	rec, found, err := g.store.Find(ctx, id, "")
	if err != nil {
		return Record{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	if !found {
		return Record{}, ErrNotFound
	}
	if v := rec.Verdict(); v != nil {
		return rec, fmt.Errorf("%w: %s by %s", ErrDecided, v.Verdict, v.Decider)
	}
	now := g.now()
	if !now.Before(rec.Request.ExpiresAt) {
		return rec, ErrExpired
	}
	d := audit.ApprovalDecision{ID: id, Time: now.UTC(), Verdict: verdict,
		Decider: cutText(who, MaxDeciderBytes), Note: cutText(note, MaxNoteBytes)}
	if err := g.store.PutDecision(ctx, d); err != nil {
		return rec, fmt.Errorf("record decision on %s: %w", id, err)
	}
	rec.Decisions = append(rec.Decisions, d)
	return rec, nil
}

// List returns the requests of the last pending_ttl+decision_ttl, newest
// first, at most limit.
func (g *Gate) List(ctx context.Context, limit int) ([]Record, error) {
	return g.store.Recent(ctx, g.now().Add(-(g.cfg.PendingTTL + g.cfg.DecisionTTL)), limit)
}

// StateOf is a record's state under the gate's configuration.
func (g *Gate) StateOf(r *Record) string {
	return r.State(g.now(), g.cfg.DecisionTTL, g.cfg.rule(r.Request.Tool).Uses)
}

// ArgsDigest is the SHA-256 (hex) of the arguments' canonical JSON
// (internal/canonjson: numbers by value, so 5, 5.0, 5e0 and 50e-1 are one;
// object keys in one order; strings by their characters, whatever their
// escapes).
func ArgsDigest(args map[string]any) string {
	if args == nil {
		args = map[string]any{}
	}
	sum := sha256.Sum256(canonjson.Append(nil, args))
	return hex.EncodeToString(sum[:])
}

// Binding is everything a grant is bound to: what decides what the
// upstream does, and who asked. Two calls share a grant only when every
// field is equal.
type Binding struct {
	// Tool is the tool's name (the MCP tool's on MCP routes).
	Tool string
	// Route is the MCP route the tools/call came through ("" for HTTP).
	Route string
	// Method is the canonical method.
	Method string
	// URL is the canonical upstream URL: scheme, host, port, path, query.
	URL string
	// ArgsDigest is ArgsDigest of the arguments.
	ArgsDigest string
	// BodyDigest is the SHA-256 (hex) of a body forwarded without being
	// read as the arguments; "" when there is none.
	BodyDigest string
	// Agent and Session are the caller's.
	Agent, Session string
}

// bindingVersion starts every binding key, so that keys of an older
// binding (tool, argument digest, agent and session only) can never equal
// a new one: a grant stored under an old key no longer matches, and the
// call is asked anew.
const bindingVersion = "toolgate-approval-key.v2"

// CallBinding is the binding of one call.
func CallBinding(q *policies.ApprovalCall) Binding {
	b := Binding{Tool: q.Tool, Route: q.Route, Method: q.Method, URL: q.URL,
		ArgsDigest: ArgsDigest(q.Arguments), Agent: q.Agent, Session: q.Session}
	if q.Body != nil {
		sum := sha256.Sum256(q.Body)
		b.BodyDigest = hex.EncodeToString(sum[:])
	}
	return b
}

// BindingKey is the key that binds a grant to one call: the SHA-256 (hex)
// of the binding's fields, each length-prefixed.
func BindingKey(b Binding) string {
	h := sha256.New()
	for _, s := range []string{bindingVersion, b.Tool, b.Route, b.Method, b.URL, b.ArgsDigest, b.BodyDigest, b.Agent, b.Session} {
		fmt.Fprintf(h, "%d:%s|", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validID reports whether id has the shape of a request id.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// cutText bounds a text field and replaces control characters.
func cutText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	s = s[:n]
	return strings.ToValidUTF8(s, "")
}

// RowStore is a store that hands over rows (sink/clickhouse's
// ApprovalStore); RowsStore makes a Store of it.
type RowStore interface {
	PutRequest(ctx context.Context, r audit.ApprovalRequest) error
	PutDecision(ctx context.Context, d audit.ApprovalDecision) error
	FindRows(ctx context.Context, id, key string) (audit.ApprovalRequest, []audit.ApprovalDecision, bool, error)
	RecentRows(ctx context.Context, since time.Time, limit int) ([]audit.ApprovalRequest, map[string][]audit.ApprovalDecision, error)
}

// RowsStore is the Store over a RowStore.
func RowsStore(rs RowStore) Store { return rowsStore{rs} }

type rowsStore struct{ RowStore }

func (s rowsStore) Find(ctx context.Context, id, key string) (Record, bool, error) {
	r, ds, ok, err := s.FindRows(ctx, id, key)
	return Record{Request: r, Decisions: ds}, ok, err
}

// CountPending is the RowStore's CountPending when it has one.
func (s rowsStore) CountPending(ctx context.Context, since, now time.Time, limit int) (int, error) {
	if pc, ok := s.RowStore.(PendingCounter); ok {
		return pc.CountPending(ctx, since, now, limit)
	}
	return countRecent(ctx, s, since, now, limit)
}

func (s rowsStore) Recent(ctx context.Context, since time.Time, limit int) ([]Record, error) {
	reqs, decs, err := s.RecentRows(ctx, since, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(reqs))
	for i, r := range reqs {
		out[i] = Record{Request: r, Decisions: decs[r.ID]}
	}
	return out, nil
}
