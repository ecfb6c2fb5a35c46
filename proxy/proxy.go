// Package proxy is toolgate's data path: the listeners, routing, argument
// extraction, the check pipeline, dispatch upstream, and the rewriting of
// answers into the envelope.
//
// Calls arrive on three kinds of listener, and all of them run the same
// chain: the forward proxy (HTTP_PROXY: plain requests, and CONNECT
// tunnels that are decrypted with toolgate's own CA (MITM, mitm.go) when a
// tool lives behind them), the transparent listener (connections an
// iptables rule redirected, their original destination read from the
// socket, transparent.go), and the reverse proxy (a base URL pointed at
// the sidecar). A tool may be a plain HTTP route or an MCP route, whose
// tools/call messages are checked the same way (internal/mcpcall).
//
// Every call runs the same chain, in this order, and the first step that
// refuses answers at once; a refused call never reaches upstream:
//
//  0. canonical form (internal/conf/canonical.go): method, scheme, host, port and path are
//     put in one form, which routing matches and which goes upstream; a
//     call with no one form is refused (validation/ambiguous_request);
//  1. allowlist: the call is routed to a tool; a call that matches no tool
//     is refused (policy/not_allowlisted) on a host a tool names (unless
//     hosts opens it) and, with unmatched: deny, everywhere;
//  2. extraction: arguments are read from the path, the query and the body
//     (bounded; malformed or oversized bodies are refused as validation);
//     2a. observe (internal/steps/observe.go, a tool with observe only): the arguments'
//     shape, never their values, goes in the event; it refuses nothing;
//  3. schema: arguments are coerced and validated strictly (validation),
//     or, with schema_mode: dry_run, what it would refuse is recorded;
//  4. policies: the tool's Checker (its Rego and WASM policies, in order)
//     decides the call (policy/policy_denied, or validation when every
//     deny says so; policy_error and policy_timeout when a policy fails
//     closed); dry-run denials are only recorded;
//     4a. origin: a call that would carry injected headers (configured,
//     or asked for by a policy) to another origin than the tool's is
//     refused (policy/origin_mismatch), before anyone is asked to approve
//     it;
//     4b. approval (internal/steps/approval.go): a call a policy or the approvals section
//     says needs a person's approval goes on only with a grant bound to it
//     (policy/approval_pending, approval_denied; validation/
//     revision_requested);
//  5. injection: configured headers, and headers a policy asked for, are
//     added at dispatch, after every check, so an injected value can never
//     trip one, and only to the tool's own origin (4a);
//  6. budgets (internal/steps/budget.go, with a budgets section only): an upstream in 429
//     backoff (rate_limit/upstream_backoff), the call and cost budgets
//     (policy/budget_exhausted), loop breaking (policy/loop_detected), and
//     the upstream's rate, which may wait up to its max_wait
//     (rate_limit/local_rate_limit); only calls that passed every check
//     are counted;
//  7. dispatch: the call goes upstream with the tool's timeout, and the
//     answer is bucketed, enveloped when the caller asked, and recorded;
//  8. answer steps (internal/steps/answer*.go, a plain HTTP tool with an answer section
//     only): a 2xx answer is read whole and checked before the caller sees
//     it; a refused answer becomes a 502 envelope
//     (upstream/answer_schema, answer_unreadable).
//
// The code holds this list: requestOrder (chain.go) names steps 2 to 6,
// and answerOrder (internal/steps/answer.go) step 8. Each tool's chain is
// compiled from them once, when a snapshot is put in force (Swap), so a
// tool without a schema, policies, approval, injected headers, budgets or
// answer checks has no such step. An MCP route runs the same order for
// each tools/call of a message (internal/mcpcall/steps.go). Evaluate and
// EvaluateMCP run a tool's chain without dispatch. docs/architecture.md
// draws it.
//
// The work is in four internal packages, each importing only those before
// it: conf (the proxy section validated into tools and routes, the
// canonical form, refusals, and the contracts proxy consumes), pipe (one
// call: Call, the chain type, dispatch, the answer and the event), steps
// (the request and answer steps of a plain HTTP tool) and mcpcall (a call
// on an MCP route). This package is the Server: the listeners, the
// snapshot in force and its compiled chains, and Evaluate.
//
// Every call, refused or forwarded, hands exactly one event to the Recorder.
//
// proxy declares what it consumes (Checker, Recorder, Budgeter, Tracer) and imports only
// the light packages: policies for the decision contract and the schema,
// bucketing for the vocabulary, sink for the Event. It links neither OPA
// nor clickhouse-go, nor the budget engine and its Redis client; cmd wires
// the implementations in.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/listen"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// Options are the proxy's collaborators, supplied by the composition root.
type Options struct {
	// Recorder receives the events. Required.
	Recorder pipe.Recorder
	// Logger receives operational logs; it never sees argument values.
	// Default: discard.
	Logger *slog.Logger
	// Sidecar names this instance in events. Default: the host name.
	Sidecar string
	// Tracer receives every finished call for a span. Default nil: no
	// tracing, and no cost beyond a nil check per call.
	Tracer pipe.Tracer
	// Approver is the approval step (approval.go); nil: no call needs
	// approval.
	Approver conf.Approver
	// MaxCallerConns is how many caller connections the listeners may
	// hold together: what the process's descriptor limit leaves for them
	// (each call in progress holds its caller's and its upstream's). When
	// limits.max_conns is not set it caps every listener and all of them
	// together; an explicit max_conns wins. Default 0: only max_conns.
	MaxCallerConns int
	// Events, when set, refuses calls whose events cannot be kept
	// (events.on_write_failure: refuse; see EventGate). Default nil: calls
	// are answered whatever becomes of their events.
	Events pipe.EventGate
	// EgressResolver resolves every upstream destination toolgate dials:
	// those the egress guard checks (proxy/egress), and the tool hosts it
	// dials as given. Default nil: the system resolver. Tests set it to
	// make names resolve to stand-ins; cmd never does, and no
	// configuration field reaches it.
	EgressResolver egress.Resolver
}

// Server runs the listeners and the pipeline behind them.
type Server struct {
	pipe.Host       // what its calls use of it
	mcpcall.MCPHost // what its MCP routes' calls keep for the server's life
	state           atomic.Pointer[pipe.State]
	tlsm            *tlsMetrics
	connm           *listen.CapMetrics
	capLog          pipe.LogLimit                                                     // one log line a second for connections over the cap
	own             upstream.Conns                                                    // upstream connections, for loop detection
	dial            func(ctx context.Context, network, addr string) (net.Conn, error) // upstream dialer
	mitm            *listen.Interceptor                                               // nil without a CA
	tproxy          *transparent                                                      // nil when transparent mode is off
	approver        conf.Approver                                                     // nil when no call needs approval
	conns           *listen.Conns                                                     // every listener's caller connections
	// netDial connects to an address checked by the egress guard;
	// egressResolver is the guard's resolver (nil: the system's).
	netDial        upstream.DialFunc
	egressResolver egress.Resolver
	egressLog      pipe.LogLimit

	mu        sync.Mutex
	listeners []*listener
	servers   []listen.HTTPServer
}

type listener struct {
	kind string // "forward" or "reverse"
	ln   net.Listener
	h    http.Handler
}

// New returns a Server for a snapshot whose Config was validated.
func New(snap pipe.Snapshot, opts Options) (*Server, error) {
	if snap.Config == nil || (snap.Config.Compiled == nil && len(snap.Config.Tools) > 0) {
		return nil, errors.New("proxy: config was not validated")
	}
	if opts.Recorder == nil {
		return nil, errors.New("proxy: a recorder is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{approver: opts.Approver, tlsm: newTLSMetrics(), connm: listen.NewCapMetrics()}
	s.Host = pipe.Host{Rec: opts.Recorder, Tracer: opts.Tracer, Log: log, Sidecar: opts.Sidecar, Metrics: pipe.NewMetrics(), Events: opts.Events, EventsLost: pipe.NewEventsUnavailable(), MCPHandle: s.MCPHost.Handle}
	s.conns = listen.NewConns(0)
	s.Pins = mcpcall.NewMCPPins(snap.Config)
	if opts.MaxCallerConns > 0 && !snap.Config.Limits.ExplicitMaxConns {
		s.conns = listen.NewConns(opts.MaxCallerConns)
	}
	s.netDial = (&net.Dialer{Timeout: snap.Config.Upstream.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	s.egressResolver = opts.EgressResolver
	if r := opts.EgressResolver; r != nil {
		s.netDial = resolvingDial(r, s.netDial)
	}
	s.dial = s.egressDialer()
	s.Transport = upstream.NewStd(snap.Config.Upstream.MaxIdleConnsPerHost, snap.Config.TLS.Upstream(), s.dial)
	s.Upstream = upstream.New(s.Transport, s.dial)
	if ca := snap.Config.TLS.CA(); ca != nil {
		s.mitm = newInterceptor(s, ca, snap.Config.Limits)
		s.tlsm.withCA(ca)
	}
	if err := s.Swap(snap); err != nil {
		return nil, err
	}
	return s, nil
}

// Swap puts a new snapshot in force for every call that starts afterwards;
// calls under way finish with the one they started with. Listener addresses
// and transport settings are fixed at start: a snapshot that changes them is
// refused (restart to change them).
func (s *Server) Swap(snap pipe.Snapshot) error {
	cfg := snap.Config
	if cfg == nil || (cfg.Compiled == nil && len(cfg.Tools) > 0) {
		return errors.New("proxy: config was not validated")
	}
	if old := s.state.Load(); old != nil && !sameListeners(old.Cfg, cfg) {
		return errors.New("listen and upstream settings changed (or listen.server, limits.max_conns, read_header_timeout, idle_timeout): they take effect only on restart")
	} else if old != nil && !sameTLS(old.Cfg, cfg) {
		return errors.New("tls settings, their files or listen.transparent changed: they take effect only on restart")
	}
	if cfg.TLS.InsecureSkipVerify {
		s.Log.Warn("tls.insecure_skip_verify is on: upstream TLS certificates are NOT verified, so anyone on the path can read and change tool calls; use it for test rigs only")
	}
	if err := s.Pins.Load(cfg); err != nil {
		return err
	}
	st := &pipe.State{Snapshot: snap, Cfg: cfg, Names: mcpcall.NewNameWatch(cfg, snap.ServerToolNames)}
	st.UsePolicyHeaders(defaultPolicyHeaders)
	st.Chains = compileChains(cfg, &st.Snapshot, s.approver)
	for t, ch := range st.Chains {
		// A chain, not the compiled tool, holds the server's handles: the
		// configuration may be shared (another Server, Evaluate), and its
		// calls count in their own server's series.
		ch.Metrics = s.Metrics.ForTool(t.Cfg.Name)
	}
	g, err := s.newGuard(cfg)
	if err != nil {
		return err
	}
	st.Guard = g
	s.state.Store(st)
	return nil
}

// defaultPolicyHeaders are the request headers policies see when the
// snapshot names none.
var defaultPolicyHeaders = []string{"content-type", "user-agent"}

// sameListeners reports whether two configs bind the same listeners with
// the same transport.
func sameListeners(a, b *conf.Config) bool {
	if a.Listen.Forward != b.Listen.Forward || a.Listen.AllowNonLoopback != b.Listen.AllowNonLoopback ||
		a.Upstream != b.Upstream || len(a.Listen.Reverse) != len(b.Listen.Reverse) ||
		a.Limits.MaxConns != b.Limits.MaxConns || a.Limits.ReadHeaderTimeout != b.Limits.ReadHeaderTimeout ||
		a.Limits.IdleTimeout != b.Limits.IdleTimeout || a.Listen.Server != b.Listen.Server {
		return false
	}
	for i := range a.Listen.Reverse {
		if a.Listen.Reverse[i].Listen != b.Listen.Reverse[i].Listen || a.Listen.Reverse[i].Upstream != b.Listen.Reverse[i].Upstream {
			return false
		}
	}
	return true
}

// Listen binds every configured listener. It fails, binding nothing, when
// any address cannot be bound.
func (s *Server) Listen() error {
	cfg := s.state.Load().Cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	var ls []*listener
	bind := func(kind, addr string, h http.Handler) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s on %s: %w", kind, addr, err)
		}
		ls = append(ls, &listener{kind: kind, ln: s.capped(ln, kind, true), h: h})
		return nil
	}
	var err error
	if cfg.Listen.Forward != "off" {
		err = bind("forward", cfg.Listen.Forward, s.forwardHandler())
	}
	for i := 0; err == nil && i < len(cfg.Listen.Reverse); i++ {
		err = bind("reverse", cfg.Listen.Reverse[i].Listen, s.reverseHandler(i))
	}
	var tln net.Listener
	if err == nil && cfg.Listen.Transparent != "" {
		if tln, err = net.Listen("tcp", cfg.Listen.Transparent); err != nil {
			err = fmt.Errorf("listen transparent on %s: %w", cfg.Listen.Transparent, err)
		}
	}
	if err != nil {
		for _, l := range ls {
			l.ln.Close()
		}
		return err
	}
	if tln != nil {
		s.tproxy = newTransparent(s, s.capped(tln, "transparent", false))
	}
	s.listeners = ls
	for _, l := range ls {
		s.servers = append(s.servers, listen.NewHTTPServer(cfg.Listen.Server == conf.ServerNetHTTP, l.h, cfg.Limits.ReadHeaderTimeout, cfg.Limits.IdleTimeout, slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug)))
	}
	return nil
}

// capped wraps a listener in limits.max_conns; httpAnswer says whether a
// connection over the cap gets an HTTP 503 or is only closed.
func (s *Server) capped(ln net.Listener, kind string, httpAnswer bool) net.Listener {
	max := s.state.Load().Cfg.Limits.MaxConns
	if s.conns.Max() > 0 {
		max = min(max, s.conns.Max())
	}
	return listen.NewCapListener(ln, s.conns, s.connm, listen.Cap{Kind: kind, Max: max, HTTP: httpAnswer, ErrorCodeHeader: conf.HeaderErrorCode, OnCap: func() {
		s.LogLimited(&s.capLog, slog.LevelWarn, "connection refused: the listener has limits.max_conns connections open", "listener", kind, "max_conns", max)
	}})
}

// Addr returns the bound address of the first listener of kind ("forward",
// "reverse" or "transparent") after skip others of that kind, or "" when
// there is none.
func (s *Server) Addr(kind string, skip int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == "transparent" {
		if s.tproxy == nil || skip > 0 {
			return ""
		}
		return s.tproxy.Addr().String()
	}
	for _, l := range s.listeners {
		if l.kind != kind {
			continue
		}
		if skip == 0 {
			return l.ln.Addr().String()
		}
		skip--
	}
	return ""
}

// Serve serves every bound listener and returns when they have all stopped:
// nil after Shutdown, or the first listener's error. After Shutdown it
// returns at once.
func (s *Server) Serve() error {
	s.mu.Lock()
	ls, srvs := s.listeners, s.servers
	s.mu.Unlock()
	errc := make(chan error, len(ls)+2)
	for i, l := range ls {
		go func() { errc <- srvs[i].Serve(l.ln) }()
	}
	n := len(ls)
	if s.mitm != nil {
		n++
		go func() { errc <- s.mitm.Serve() }()
	}
	if s.tproxy != nil {
		n++
		go func() { errc <- s.tproxy.Serve() }()
	}
	var first error
	for range n {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
		}
	}
	return first
}

// Shutdown stops accepting calls and waits for calls under way to finish, or
// for ctx to end. It also closes listeners that were bound but never
// served, so a start that failed halfway leaves nothing bound.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	ls, srvs := s.listeners, s.servers
	s.mu.Unlock()
	var first error
	if s.tproxy != nil {
		s.tproxy.Close()
	}
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	if s.mitm != nil { // after the forward listener: no CONNECT hands it more
		if err := s.mitm.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	for _, l := range ls {
		l.ln.Close() // a no-op error for listeners Serve already closed
	}
	s.Upstream.Close() // and the transport's idle connections
	return first
}

// forwardHandler is the HTTP forward proxy (listen.NewForward).
// Absolute-form plain-HTTP calls run the pipeline and are answered by
// writeResponse, exactly like reverse calls; a CONNECT to a host with tool
// routes goes to the interceptor (mitm.go), and otherwise is tunnelled
// untouched or refused (decideConnect), recorded as such.
func (s *Server) forwardHandler() http.Handler {
	return listen.NewForward(listen.Forward{
		Transport: s.Transport,
		Dial: func(req *http.Request, network, addr string) (net.Conn, error) {
			return s.dial(req.Context(), network, addr)
		},
		Tunnelled: func(req *http.Request, host string, err error) {
			s.tunnelled(s.state.Load(), "connect", req, host, err)
		},
		Decide: func(req *http.Request, host string) (listen.ConnectAction, *http.Response) {
			st := s.state.Load()
			action, ref := s.decideConnect(req.Context(), st, host)
			switch {
			case action == listen.ConnectRefuse:
				return action, s.connect(st, req, host, ref)
			case action == listen.ConnectTunnel && namesHosts(st.Cfg):
				return listen.ConnectSniff, nil
			}
			return action, nil
		},
		Intercept: s.interceptConnect,
		Sniff:     s.sniffConnect,
		Call: func(w http.ResponseWriter, r *http.Request) {
			listen.BodyDeadline(w, r, s.state.Load().Cfg.Limits.BodyTimeout)
			writeResponse(w, s.Handle(r, "forward", r.URL))
		},
		ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
	})
}

// tunnelled records a tunnel (a CONNECT, or a TLS connection on the
// transparent listener) whose bytes are not inspected, once dialling its
// destination succeeded (ok, reason tunnel) or failed (the transport
// failure it is: upstream/connect or upstream/timeout). r is nil on the
// transparent listener.
//
// It returns the failure to answer the caller with, or nil when the dial
// succeeded.
func (s *Server) tunnelled(st *pipe.State, kind string, r *http.Request, hostport string, dialErr error) *conf.Refusal {
	ev := s.NewEvent(st, kind, http.MethodConnect, hostport, r, time.Now())
	listener := kind
	if dialErr == nil {
		ev.OK, ev.Reason = true, "tunnel"
		s.Metrics.Call("", "", 0)
		s.tlsm.conns.WithLabelValues(listener, "tunnelled").Inc()
		s.Rec.Record(ev)
		return nil
	}
	res := bucketing.Classify(bucketing.Outcome{Err: dialErr}, nil, time.Now())
	ev.ErrorCode, ev.ErrorClass, ev.Reason = string(res.Code), string(res.Class), res.Reason
	ev.Detail = "Tunnel to " + hostport + " failed: " + res.Detail
	if de := (*egress.DeniedError)(nil); errors.As(dialErr, &de) {
		res = bucketing.Result{Code: de.Code(), Class: bucketing.ClassOf(de.Code()), Reason: de.Reason(), Detail: de.Detail()}
		ev.ErrorCode, ev.ErrorClass, ev.Reason = string(res.Code), string(res.Class), res.Reason
		ev.Detail, ev.Refused = de.Detail(), true
	}
	s.Metrics.Call("", ev.ErrorCode, 0)
	s.tlsm.conns.WithLabelValues(listener, "dial_failed").Inc()
	s.Rec.Record(ev)
	return conf.Refuse(res.Code, res.Reason, ev.Detail, nil)
}

// connect records a refused CONNECT and returns the refusal to send.
func (s *Server) connect(st *pipe.State, r *http.Request, hostport string, ref *conf.Refusal) *http.Response {
	ev := s.NewEvent(st, "connect", http.MethodConnect, hostport, r, time.Now())
	defer func() { s.Rec.Record(ev) }()
	s.tlsm.conns.WithLabelValues("connect", "refused").Inc()
	ev.ErrorCode, ev.ErrorClass, ev.Reason = string(ref.Code), string(bucketing.ClassOf(ref.Code)), ref.Reason
	ev.Detail, ev.Refused = ref.Detail, true
	s.Metrics.Call("", ev.ErrorCode, 0)
	body := bucketing.Refusal(ref.Code, ref.Reason, ref.Detail, nil).Marshal()
	return pipe.EnvelopeResponse(r, conf.RefusalStatus(ref), string(ref.Code), nil, body)
}

func (s *Server) reverseHandler(i int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cfg := s.state.Load().Cfg
		listen.BodyDeadline(w, r, cfg.Limits.BodyTimeout)
		rc := cfg.Listen.Reverse[i]
		target := *rc.Base
		target.Path = joinPath(rc.Base.Path, r.URL.Path)
		target.RawPath = ""
		if rc.Base.RawPath != "" || r.URL.RawPath != "" {
			target.RawPath = joinPath(rc.Base.EscapedPath(), r.URL.EscapedPath())
		}
		target.RawQuery = r.URL.RawQuery
		writeResponse(w, s.Handle(r, "reverse", &target))
	})
}

func joinPath(base, p string) string {
	switch {
	case base == "" || base == "/":
		return p
	case len(base) > 0 && base[len(base)-1] == '/' && len(p) > 0 && p[0] == '/':
		return base + p[1:]
	}
	return base + p
}

// writeResponse copies resp to w. When upstream's body fails midway, the
// connection is aborted so the caller sees an answer cut short, exactly as it
// would have without toolgate.
func writeResponse(w http.ResponseWriter, resp *http.Response) {
	if hw, ok := w.(headerFromWriter); ok {
		hw.WriteHeaderFrom(resp.StatusCode, resp.Header)
	} else {
		h := w.Header()
		for k, vs := range resp.Header {
			h[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
	}
	var err error
	if pb, ok := resp.Body.(*pipe.PassBody); ok {
		err = pb.WriteTo(w)
	} else {
		_, err = pipe.CopyBody(w, resp.Body)
	}
	resp.Body.Close()
	if err != nil {
		// Send what arrived, then cut the connection, as upstream did.
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
}

// headerFromWriter is a ResponseWriter that writes a header the handler
// holds without copying it (the plain listeners' loop, h1serve): resp's
// header is not changed after writeResponse hands it over.
type headerFromWriter interface {
	WriteHeaderFrom(code int, h http.Header)
}

// Handle runs the pipeline for one request whose upstream URL is target and
// returns the answer for the caller. It never returns nil. A call whose
// event was not kept while an EventGate is set gets the events_unavailable
// refusal in place of its answer (a raw answer's body is cut instead, see
// PassBody).
func (s *Server) Handle(r *http.Request, kind string, target *url.URL) *http.Response {
	c := &pipe.Call{Host: &s.Host, State: s.state.Load(), Start: time.Now(), Client: r.Context()}
	resp := c.Handle(r, kind, target)
	if c.Lost && c.Event.Reason != bucketing.ReasonEventsUnavailable {
		if _, passed := resp.Body.(*pipe.PassBody); !passed {
			if resp.Body != nil {
				resp.Body.Close()
			}
			return c.Withheld(r)
		}
	}
	return resp
}

// sameTLS reports whether two validated configs intercept and verify alike.
func sameTLS(a, b *conf.Config) bool {
	return a.Listen.Transparent == b.Listen.Transparent && a.TLS.Same(&b.TLS)
}
