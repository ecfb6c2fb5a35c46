package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/sink"
)

// handle runs the pipeline for one request whose upstream URL is target and
// returns the answer for the caller. It never returns nil. A call whose
// event was not kept while an EventGate is set gets the events_unavailable
// refusal in place of its answer (a raw answer's body is cut instead, see
// passBody).
func (s *Server) handle(r *http.Request, kind string, target *url.URL) *http.Response {
	c := &call{s: &s.host, st: s.state.Load(), start: time.Now(), client: r.Context()}
	resp := c.handle(r, kind, target)
	if c.lost && c.ev.Reason != bucketing.ReasonEventsUnavailable {
		if _, passed := resp.Body.(*passBody); !passed {
			if resp.Body != nil {
				resp.Body.Close()
			}
			return c.withheld(r)
		}
	}
	return resp
}

// handle is Server.handle's pipeline.
func (c *call) handle(r *http.Request, kind string, target *url.URL) *http.Response {
	s, st := c.s, c.st
	cn, ref := st.cfg.canonicalize(r.Context(), r.Method, target)
	c.ev = s.newEvent(st, kind, cn.method, target.Host, r)
	if s.tracer != nil {
		c.traceparent = r.Header.Get("Traceparent")
	}
	if ref != nil {
		c.envelope = askedForEnvelope(r)
		return c.refuse(r, ref)
	}
	// From here on the call is its canonical form: routing matches it,
	// policies see it, and it is what goes upstream. Its context carries
	// the host it was routed as, for the dial guard.
	if ctx := st.cfg.guarded(r.Context(), cn.host, cn.port); ctx != r.Context() || r.Method != cn.method {
		r = r.WithContext(ctx)
		r.Method = cn.method
	}
	c.ev.Host = cn.authority()
	c.cn = cn
	var vars map[string]string
	c.t, vars = route(st.cfg.compiled, cn.method, cn.host, cn.port, cn.path)
	target = cn.url(c.t, target.RawQuery)

	if c.t == nil {
		c.envelope = askedForEnvelope(r)
		mode := st.cfg.hostMode(cn.host, cn.port)
		switch {
		case mode == UnmatchedDeny:
			return c.refuse(r, refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
				fmt.Sprintf("Call %s %s%s matches no tool, and tools name this host, so its other calls are refused (hosts[].unmatched opens it)", cn.method, c.ev.Host, target.EscapedPath()), nil))
		case mode == UnmatchedDryRun:
			c.noteWouldRefuse(fmt.Sprintf("call %s %s matches no tool on a host tools name (hosts[].unmatched: dry_run)", cn.method, target.EscapedPath()))
		case mode == "" && st.cfg.Unmatched == UnmatchedDeny:
			return c.refuse(r, refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
				fmt.Sprintf("Call %s %s matches no tool and unmatched calls are denied (unmatched: pass lets them through)", cn.method, c.ev.Host), nil))
		}
		return c.dispatch(r, target, r.Body, r.ContentLength, 0)
	}
	t := c.t
	c.ev.Tool = t.cfg.Name
	c.ev.PathTemplate = t.cfg.Match.Path
	c.envelope = t.wantsEnvelope(r)
	c.ch = st.chains[t]
	if t.mcp != nil {
		return c.s.mcpHandle(c, r, target)
	}
	c.ev.Inspected = true
	c.in, c.target, c.vars = r, target, vars
	c.body, c.size = r.Body, r.ContentLength
	if ref := c.ch.run(r.Context(), c); ref != nil {
		if ref == callerGone {
			return c.clientGone(r)
		}
		return c.refuse(r, ref)
	}
	return c.dispatch(r, target, c.body, c.size, t.cfg.Timeout)
}

// checkOrigin refuses a call whose tool injects headers (its own, or its
// policies') when the call goes to another origin than the tool's: the
// tool's host, its port (the scheme's default when it names none), over
// HTTPS unless the tool allows plain HTTP. On a tool without a host (which
// has no inject_headers: Validate refuses that), policy-injected headers
// follow the scheme and port rule only; the policy sees the host.
func (c *call) checkOrigin(target *url.URL) *refusal {
	t := c.t
	if len(t.inject) == 0 && len(c.inject) == 0 {
		return nil
	}
	if t.originOK(target) {
		return nil
	}
	want := "https"
	if t.cfg.InjectOverHTTP {
		want = "https or http"
	}
	port := t.port
	if port == "" {
		port = "the scheme's default port"
	}
	host := t.host
	if host == "" {
		host = "its host"
	}
	return refuse(bucketing.CodePolicy, bucketing.ReasonOriginMismatch,
		fmt.Sprintf("Tool '%s' injects headers only to its own origin (%s, %s, %s), and this call goes to %s://%s%s", t.cfg.Name, want, host, port, target.Scheme, target.Host, t.originFix(target)), nil)
}

// originFix names the setting that would let a call to u carry the
// tool's injected headers, for the origin_mismatch refusal: the operator
// reads it, and the refusal says what to change rather than only what
// differs.
func (t *tool) originFix(u *url.URL) string {
	var fixes []string
	if u.Scheme == "http" && !t.cfg.InjectOverHTTP {
		fixes = append(fixes, "set inject_over_http: true on the tool to send them over plain HTTP")
	}
	_, port := splitHostPort(u)
	if port != t.originPort(u.Scheme) && t.host != "" {
		fixes = append(fixes, fmt.Sprintf("name the port in match.host (%s) to send them to port %s", net.JoinHostPort(t.host, port), port))
	}
	if len(fixes) == 0 {
		return ""
	}
	return "; " + strings.Join(fixes, ", and ")
}

// originOK reports whether a canonical upstream URL is the tool's origin.
func (t *tool) originOK(u *url.URL) bool {
	if u.Scheme != "https" && !(u.Scheme == "http" && t.cfg.InjectOverHTTP) {
		return false
	}
	host, port := splitHostPort(u)
	if t.host != "" && host != t.host {
		return false
	}
	return port == t.originPort(u.Scheme)
}

// originPort is the port of the tool's origin for scheme: the one
// match.host names, else the scheme's default.
func (t *tool) originPort(scheme string) string {
	if t.port != "" {
		return t.port
	}
	return canonical.DefaultPort(scheme)
}

// routed is the dial guard of a call or tunnel: the host it was routed
// as, and the config whose tools the guard checks.
type routed struct {
	host, port string
	cfg        *Config // whose tools the guard checks
}

// Check refuses a connection that landed on a loopback tool host under
// another name (landsOnLoopbackTool).
func (rt routed) Check(remote net.Addr) error {
	if rt.cfg.landsOnLoopbackTool(rt.host, rt.port, remote) {
		return fmt.Errorf("%w: %s reached %s", errOtherName, rt.host, remote)
	}
	return nil
}

// guarded returns ctx carrying the host and port a call or tunnel was
// routed as, for the egress guard (egressDial), and the dial guard when
// tools name a loopback host.
func (c *Config) guarded(ctx context.Context, host, port string) context.Context {
	ctx = context.WithValue(ctx, egressRouteKey{}, &egressRoute{host: host, port: port, cfg: c})
	if len(c.aliases.loopback) == 0 {
		return ctx
	}
	return upstream.WithGuard(ctx, routed{host: host, port: port, cfg: c})
}

// landsOnLoopbackTool is the dial guard: it reports whether a connection
// made for a call routed as host (not a tool host) reached a loopback
// address on a port a loopback tool host covers. Such a call used another
// name (one that resolves to loopback) for a tool's host, and would
// otherwise skip the tool's checks.
func (c *Config) landsOnLoopbackTool(host, port string, remote net.Addr) bool {
	if c.isToolHost(host) {
		return false
	}
	ta, ok := remote.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return false
	}
	for _, t := range c.compiled {
		if t.host != "" && isLoopback(t.host) && (t.port == "" || t.port == port) {
			return true
		}
	}
	return false
}

// input builds the document policies see.
func (c *call) input() *policies.Input {
	r, target := c.in, c.target
	h := make(map[string]string, len(c.st.PolicyHeaders))
	for _, name := range c.st.PolicyHeaders {
		if vs := r.Header.Values(name); len(vs) > 0 {
			h[name] = strings.Join(vs, ", ")
		}
	}
	var q url.Values
	if target.RawQuery != "" {
		q, _ = url.ParseQuery(target.RawQuery)
	}
	in := &policies.Input{
		Tool:      c.t.cfg.Name,
		Arguments: c.args,
		Request: policies.Request{
			Method: r.Method, Host: target.Host, Path: target.EscapedPath(),
			PathVars: c.vars, Query: q, Headers: h,
		},
		Caller:   policies.Caller{Agent: c.ev.Agent, Session: c.ev.Session},
		TraceID:  c.ev.TraceID,
		Protocol: ProtocolHTTP,
		Budget:   c.budgetInput(),
	}
	if c.mcp != nil {
		c.mcp.policyInput(in)
	}
	return in
}

// policyOutcome records what the policies said in the event and returns
// the refusal, if they refused.
func (c *call) policyOutcome(d policies.Decision) *refusal {
	for _, v := range d.DryRun {
		c.noteWouldRefuse(v.Message)
	}
	if len(d.FailedOpen) > 0 {
		c.ev.PolicyError = strings.Join(d.FailedOpen, "; ")
	}
	if !d.Allow {
		return refuse(d.Code, d.Reason, d.Detail, d.Violations)
	}
	c.inject = d.Inject
	c.ask = d.Approval
	return nil
}

// dispatch sends the call upstream and shapes the answer.
func (c *call) dispatch(r *http.Request, target *url.URL, body io.Reader, size int64, timeout time.Duration) *http.Response {
	if resp := c.eventsGate(r); resp != nil {
		return resp
	}
	ctx := r.Context()
	var cancel context.CancelFunc = func() {}
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	c.cancel = cancel
	out := r.Clone(ctx)
	out.URL = target
	out.Method = r.Method
	out.Host = ""
	out.RequestURI = ""
	var streamed *callerBody // the caller's body, streamed unread
	if rc, ok := body.(io.ReadCloser); ok && body == io.Reader(r.Body) && r.Body != nil && r.Body != http.NoBody {
		if size > 0 && size <= upstream.MaxHeldBody {
			// A small body of a declared length is read first, as a
			// checked call's is, so that the call goes upstream on this
			// goroutine (upstream.Transport's fast path) rather than
			// through net/http's transport, whose reader and writer
			// goroutines a call wakes in turn: a lone passthrough call
			// cost about twice a checked one's CPU that way
			// (docs/performance.md). Nothing has gone upstream if it
			// does not arrive.
			raw, err := readBody(r, size)
			if err != nil {
				cancel()
				if errors.Is(err, errBodyTimeout) {
					return c.refuse(r, bodyTimeoutRefusal(c.subject(), c.st.cfg.Limits.BodyTimeout))
				}
				return c.clientGone(r)
			}
			c.ev.RequestBytes = int64(len(raw))
			body = bytesBody(raw)
		} else {
			streamed = &callerBody{rc: rc}
		}
	}
	out.Body = readCloserOf(body)
	if streamed != nil {
		out.Body = streamed
	}
	out.ContentLength = size
	if size == 0 {
		out.Body = nil
	}
	if streamed == nil {
		// A body toolgate read goes upstream as exactly the bytes checked,
		// with a length: no chunked trailers ride along.
		out.Trailer = nil
	}
	// An answer toolgate reads (to envelope it, or for the answer steps)
	// must arrive decoded.
	checksAnswer := c.ch != nil && len(c.ch.answers) > 0
	cleanRequestHeaders(out.Header, c.envelope || checksAnswer || (c.mcp != nil && c.mcp.holds()))
	// Injected headers go only to the tool's own origin (checkOrigin
	// refused a plain call that goes elsewhere; an MCP call just goes
	// without them).
	if c.t != nil && (len(c.t.inject) > 0 || len(c.inject) > 0) && c.t.originOK(target) {
		for k, v := range c.t.inject {
			out.Header[k] = []string{v}
		}
		for k, v := range c.inject {
			out.Header[k] = []string{v}
		}
	}
	var held *bytes.Reader // a body toolgate read, which can be sent again
	if br, ok := body.(*bytes.Reader); ok && out.Body != nil {
		held = br
	}
	c.upStart = time.Now()
	resp, err := c.s.upstream.RoundTripHeld(out, held)
	if err != nil {
		cancel()
		// A body that stalled also ends the request's context (net/http
		// cancels it on a read error): tell it apart first.
		if streamed != nil {
			if berr := streamed.failed(); isTimeout(berr) {
				// Part of the body may have reached upstream: a failure, not a refusal.
				res := bucketing.Result{Code: bucketing.CodeValidation, Class: bucketing.ClassUser, Reason: bucketing.ReasonBodyTimeout,
					Detail: fmt.Sprintf("the body did not arrive within %s (limits.body_timeout)", c.st.cfg.Limits.BodyTimeout)}
				return c.fail(r, res, nil, http.StatusRequestTimeout)
			} else if berr != nil {
				return c.clientGone(r)
			}
		}
		if r.Context().Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return c.clientGone(r)
		}
		if de := (*egress.DeniedError)(nil); errors.As(err, &de) {
			c.upStart = time.Time{}
			return c.refuse(r, refuse(de.Code(), de.Reason(), de.Detail(), nil))
		}
		if errors.Is(err, errOtherName) {
			c.upStart = time.Time{}
			return c.refuse(r, refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
				fmt.Sprintf("Call to %s refused: the name leads to a loopback host that tools name, so its calls must use that host's name", c.ev.Host), nil))
		}
		res := bucketing.Classify(bucketing.Outcome{Err: err}, c.rules(), time.Now())
		if res.Reason == bucketing.ReasonTLS {
			// The verifier's own words (names on the certificate, never
			// the call's arguments), for the operator; the caller and the
			// event get res.Detail.
			c.s.log.Debug("upstream TLS certificate refused", "tool", c.ev.Tool, "host", c.ev.Host, "err", err.Error())
		}
		return c.fail(r, res, nil, statusForTransport(res))
	}
	if de := egressNoted(r.Context()); de != nil {
		c.noteWouldRefuse("egress: " + de.Detail())
	}
	removeHopHeaders(resp.Header)
	removeOwnHeaders(resp.Header)
	c.upProto = resp.Proto
	if c.bud != nil {
		c.upHeader = resp.Header
	}
	if checksAnswer && c.ch.answerChecked(r, resp) {
		if a := c.runAnswers(ctx, r, resp); a != nil {
			return a
		}
	}
	if c.envelope && envelopable(r, resp) {
		return c.envelopeAnswer(r, resp)
	}
	return c.passAnswer(r, resp)
}

func (c *call) rules() bucketing.Rules {
	if c.t == nil {
		return nil
	}
	return c.t.cfg.Rules
}

// finish completes the event from a bucketed result and hands it on. A
// call whose caller went away is not a failure of the tool: it gets no
// error code, reason client_closed, and its own metric label.
func (c *call) finish(res bucketing.Result, status int, respBytes int64) {
	now := time.Now()
	if res.Reason == bucketing.ReasonCanceled && c.client.Err() != nil {
		c.gone = true
	}
	ev := &c.ev
	if c.gone {
		res = bucketing.Result{}
		ev.Reason, ev.Detail = reasonClientClosed, ""
	}
	ev.UpstreamStatus = status
	ev.OK = res.OK() && !c.gone
	ev.ErrorCode = string(res.Code)
	ev.ErrorClass = string(res.Class)
	if ev.Reason == "" {
		ev.Reason = res.Reason
	}
	if !ev.OK && ev.Detail == "" && res.Detail != "" {
		ev.Detail = c.prefix() + res.Detail
	}
	if res.RetryAfterMS != nil {
		ev.RetryAfterMS = *res.RetryAfterMS
	}
	if c.bud != nil && c.st.Budgets != nil {
		c.settleBudget(res)
	}
	ev.ResponseBytes = respBytes
	ev.TotalUS = now.Sub(c.start).Microseconds()
	var up time.Duration
	if !c.upStart.IsZero() {
		up = now.Sub(c.upStart)
		ev.UpstreamUS = up.Microseconds()
	}
	label := ev.ErrorCode
	if c.gone {
		label = reasonClientClosed
	}
	if c.ch != nil && c.ch.metrics != nil {
		c.ch.metrics.observe(label, now.Sub(c.start), up)
	} else {
		c.s.metrics.call("", label, now.Sub(c.start))
	}
	if !c.s.rec.Record(*ev) && c.s.events != nil {
		c.lost = true
	}
	if c.s.tracer != nil {
		c.s.tracer.TraceCall(ev, c.spanFacts())
	}
}

// reasonClientClosed is the event reason of a call whose caller went away.
const reasonClientClosed = "client_closed"

// subject names this call in a detail sentence: its tool, or where it
// went when no tool matched.
func (c *call) subject() string {
	if c.t == nil {
		return "Call to " + c.ev.Host
	}
	return "Tool '" + c.t.cfg.Name + "'"
}

// prefix starts a detail sentence about this call's failure.
func (c *call) prefix() string { return c.subject() + " failed: " }

// clientGone records a call whose caller went away before it was answered.
// It is not a failure of the tool: no error code, reason client_closed.
func (c *call) clientGone(r *http.Request) *http.Response {
	c.gone = true
	c.finish(bucketing.Result{}, 0, 0)
	return textResponse(r, http.StatusBadRequest, "client closed the request")
}

// newEvent starts an event with what is known on arrival.
func (s *host) newEvent(st *state, kind, method, host string, r *http.Request) sink.Event {
	ev := sink.Event{
		EventID:       uuid.NewString(),
		Time:          time.Now().UTC(),
		Sidecar:       s.sidecar,
		Listener:      kind,
		Method:        method,
		Host:          host,
		ConfigVersion: st.Version,
		PolicyVersion: st.PolicyVersion,
	}
	if r != nil {
		ev.Agent = boundCallerID(r.Header.Get(st.cfg.Headers.Agent), st.cfg.Limits.MaxCallerIDBytes)
		ev.Session = boundCallerID(r.Header.Get(st.cfg.Headers.Session), st.cfg.Limits.MaxCallerIDBytes)
		ev.TraceID = traceID(r.Header.Get("Traceparent"))
	} else {
		ev.TraceID = newTraceID()
	}
	return ev
}

// traceID takes the trace id from a W3C traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>"), or generates one.
func traceID(tp string) string {
	if len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		id := tp[3:35]
		if isHex(id) && id != "00000000000000000000000000000000" {
			return id
		}
	}
	return newTraceID()
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func splitHostPort(u *url.URL) (host, port string) {
	host = strings.ToLower(u.Hostname())
	port = u.Port()
	if port == "" {
		if u.Scheme == "https" {
			port = "443"
		} else {
			port = "80"
		}
	}
	return host, port
}

// hopHeaders are removed in both directions (RFC 9110 section 7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// removeOwnHeaders removes X-Toolgate-* headers from upstream's answer:
// only toolgate sets them, so a legacy caller never mistakes an upstream's
// own X-Toolgate-Error-Code on a raw 200 for a refusal.
func removeOwnHeaders(h http.Header) {
	for k := range h {
		if len(k) >= len(ownHeaderPrefix) && strings.EqualFold(k[:len(ownHeaderPrefix)], ownHeaderPrefix) {
			delete(h, k)
		}
	}
}

// ownHeaderPrefix starts every header toolgate sets on an answer.
const ownHeaderPrefix = "X-Toolgate-"

// cleanRequestHeaders removes hop-by-hop headers and toolgate's own
// negotiation from a request going upstream, and keeps net/http from adding
// a User-Agent of its own. An enveloped call also drops Accept-Encoding, so
// the answer arrives decoded and can be rewritten.
func cleanRequestHeaders(h http.Header, envelope bool) {
	removeHopHeaders(h)
	delete(h, HeaderEnvelope)
	if vs, ok := h["Accept"]; ok {
		kept := vs[:0:0]
		for _, v := range vs {
			if strings.Contains(v, bucketing.EnvelopeMediaType) {
				v = stripMediaType(v, bucketing.EnvelopeMediaType)
			}
			if v != "" {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			delete(h, "Accept")
		} else {
			h["Accept"] = kept
		}
	}
	if envelope {
		delete(h, "Accept-Encoding")
	}
	// The upstream gets the caller's headers, not toolgate's client's:
	// net/http (HTTP/1.1 and HTTP/2) writes its own User-Agent
	// ("Go-http-client/1.1") when the header is absent, and none when it
	// is present without a value.
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = nil
	}
}

// stripMediaType removes one media range from an Accept value.
func stripMediaType(v, mt string) string {
	parts := strings.Split(v, ",")
	kept := parts[:0]
	for _, p := range parts {
		if !strings.Contains(p, mt) {
			kept = append(kept, strings.TrimSpace(p))
		}
	}
	return strings.Join(kept, ", ")
}

func statusForTransport(res bucketing.Result) int {
	if res.Reason == bucketing.ReasonTimeout {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}
