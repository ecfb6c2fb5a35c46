package pipe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/textproto"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// Recorder receives one event per call. The pipeline calls Record before
// the caller has the last byte of its answer: a refusal or an envelope
// before its first byte, a raw answer when upstream's body has been read
// to its end (or its declared length), before its last bytes go out. So a
// Record that returns once the event is written (sink.Queue) makes every
// answered call's event survive a crash of the process. Record may wait
// for that, but only for a bounded time, never for a destination such as
// ClickHouse; it reports whether the event was kept.
type Recorder interface {
	Record(e sink.Event) bool
}

// Checker is the policy step: it decides a call whose arguments passed the
// schema. policies.Set satisfies it.
type Checker interface {
	Check(ctx context.Context, in *policies.Input) policies.Decision
}

// Snapshot is one compiled configuration: everything a call is decided by.
// Reload swaps it whole; a call runs start to end on the snapshot it
// started with.
type Snapshot struct {
	// Config is the validated proxy configuration.
	Config *conf.Config
	// Checkers holds each tool's policy step by tool name; a tool without
	// an entry has no policies.
	Checkers map[string]Checker
	// AnswerCheckers holds each tool's answer policies (answer.policies)
	// by tool name; a tool without an entry has no answer policy step.
	AnswerCheckers map[string]AnswerChecker
	// PolicyHeaders are the request headers (lower-case names) policies may
	// see in input.request.headers. Default: content-type and user-agent.
	PolicyHeaders []string
	// Version is the content hash of the configuration and its schemas,
	// recorded in every event.
	Version string
	// PolicyVersion is the content hash of every policy loaded, recorded in
	// every event.
	PolicyVersion string
	// Budgets is the budget step (budgets, loop breaking, upstream rate
	// limits), or nil when none is configured: then calls skip it.
	Budgets conf.Budgeter
	// ServerToolNames are MCP tool names that rules outside the proxy's
	// section give (approvals.tools entries that are no HTTP tool), checked
	// against the tools MCP servers list (mcpcall/status.go). Default: none.
	ServerToolNames []string
}

// State is the snapshot in force, with per-call lookups precomputed.
type State struct {
	Snapshot
	Cfg    *conf.Config
	Names  *mcp.NameWatch        // nil: no MCP route
	Chains map[*conf.Tool]*Chain // each tool's steps, compiled for this snapshot (chain.go)
	Guard  *egress.Guard         // the egress guard of this snapshot's tool hosts and egress section
	// policyKeys are PolicyHeaders' canonical names, in their order
	// (UsePolicyHeaders): a call looks them up without canonicalizing.
	policyKeys []string
	// agentKey and sessionKey are the canonical names of Cfg's caller
	// headers (UsePolicyHeaders), for NewEvent.
	agentKey, sessionKey string
}

// UsePolicyHeaders makes PolicyHeaders defaults when the snapshot names
// none, and notes their canonical names for Input, and those of the
// caller headers for NewEvent. Each State that serves calls is made with
// it.
func (st *State) UsePolicyHeaders(defaults []string) {
	if st.PolicyHeaders == nil {
		st.PolicyHeaders = defaults
	}
	st.policyKeys = make([]string, len(st.PolicyHeaders))
	for i, name := range st.PolicyHeaders {
		st.policyKeys[i] = textproto.CanonicalMIMEHeaderKey(name)
	}
	if st.Cfg != nil {
		st.agentKey = textproto.CanonicalMIMEHeaderKey(st.Cfg.Headers.Agent)
		st.sessionKey = textproto.CanonicalMIMEHeaderKey(st.Cfg.Headers.Session)
	}
}

// callerKeys are the canonical names of the caller headers: the State's
// own, or made now for a State not made with UsePolicyHeaders.
func (st *State) callerKeys() (agent, session string) {
	if st.agentKey != "" {
		return st.agentKey, st.sessionKey
	}
	return textproto.CanonicalMIMEHeaderKey(st.Cfg.Headers.Agent), textproto.CanonicalMIMEHeaderKey(st.Cfg.Headers.Session)
}

// newTraceID returns 16 random bytes in hex, the W3C trace-id format.
// newEventID returns a random (version 4) UUID, as uuid.NewString does,
// in one allocation (uuid.NewString's reader call moves its array to the
// heap).
func newEventID() string {
	var u uuid.UUID
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return u.String()
}

func newTraceID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newEventAndTraceID returns newEventID's and newTraceID's, both parts of
// one string: one allocation, not two (an event holds both).
func newEventAndTraceID() (eventID, traceID string) {
	var r [32]byte
	rand.Read(r[:]) // one read for both
	u, t := uuid.UUID(r[:16]), r[16:]
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10
	// The UUID as uuid.UUID.String spells it, then the trace id.
	var buf [36 + 32]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], u[10:])
	hex.Encode(buf[36:], t)
	s := string(buf[:])
	return s[:36], s[36:]
}

// LogLimit lets one log line through per second; the metrics count them all.
type LogLimit struct {
	mu   sync.Mutex
	last time.Time
}

func (l *LogLimit) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.last) < time.Second {
		return false
	}
	l.last = time.Now()
	return true
}
