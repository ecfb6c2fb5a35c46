package pipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/headtext"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/sink"
)

// Handle is Server.handle's pipeline.
func (c *Call) Handle(r *http.Request, kind string, target *url.URL) *http.Response {
	s, st := c.Host, c.State
	cn, ref := st.Cfg.Canonicalize(r.Context(), r.Method, target)
	c.Event = s.NewEvent(st, kind, cn.Method, target.Host, r, c.Start)
	if s.Tracer != nil {
		c.Traceparent = headtext.Get(r.Header, "Traceparent")
	}
	if ref != nil {
		c.envelope = conf.AskedForEnvelope(r)
		return c.Refuse(r, ref)
	}
	// From here on the call is its canonical form: routing matches it,
	// policies see it, and it is what goes upstream. Its context carries
	// the host it was routed as, for the dial guard.
	var ctx context.Context
	if c.take(ownRouteCtx) {
		ctx = st.Cfg.GuardedIn(&c.routeCtx, r.Context(), cn.Host, cn.Port)
	} else {
		ctx = st.Cfg.Guarded(r.Context(), cn.Host, cn.Port)
	}
	if ctx != r.Context() || r.Method != cn.Method {
		r = r.WithContext(ctx)
		r.Method = cn.Method
	}
	c.Canon = cn
	var vars map[string]string
	c.Tool, vars = conf.Route(st.Cfg.Compiled, cn.Method, cn.Host, cn.Port, cn.Path)
	if c.take(ownTargetURL) {
		target = cn.URLInto(&c.targetURL, c.Tool, target.RawQuery)
	} else {
		target = cn.URL(c.Tool, target.RawQuery)
	}
	c.Event.Host = target.Host // cn.Authority(), made once

	if c.Tool == nil {
		c.envelope = conf.AskedForEnvelope(r)
		mode := st.Cfg.HostMode(cn.Host, cn.Port)
		switch {
		case mode == conf.UnmatchedDeny:
			return c.Refuse(r, conf.Refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
				fmt.Sprintf("Call %s %s%s matches no tool, and tools name this host, so its other calls are refused (hosts[].unmatched opens it)", cn.Method, c.Event.Host, target.EscapedPath()), nil))
		case mode == conf.UnmatchedDryRun:
			c.noteWouldRefuse(fmt.Sprintf("call %s %s matches no tool on a host tools name (hosts[].unmatched: dry_run)", cn.Method, target.EscapedPath()))
		case mode == "" && st.Cfg.Unmatched == conf.UnmatchedDeny:
			return c.Refuse(r, conf.Refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
				fmt.Sprintf("Call %s %s matches no tool and unmatched calls are denied (unmatched: pass lets them through)", cn.Method, c.Event.Host), nil))
		}
		return c.Dispatch(r, target, r.Body, r.ContentLength, 0)
	}
	t := c.Tool
	c.Event.Tool = t.Cfg.Name
	c.Event.PathTemplate = t.Cfg.Match.Path
	c.envelope = t.WantsEnvelope(r)
	c.Chain = st.Chains[t]
	if t.MCP != nil {
		return c.Host.MCPHandle(c, r, target)
	}
	c.Event.Inspected = true
	c.In, c.Target, c.Vars = r, target, vars
	c.body, c.size = r.Body, r.ContentLength
	if ref := c.Chain.Run(r.Context(), c); ref != nil {
		if ref == CallerGone {
			return c.ClientGone(r)
		}
		return c.Refuse(r, ref)
	}
	return c.Dispatch(r, target, c.body, c.size, t.Cfg.Timeout)
}

// CheckOrigin refuses a call whose tool injects headers (its own, or its
// policies') when the call goes to another origin than the tool's: the
// tool's host, its port (the scheme's default when it names none), over
// HTTPS unless the tool allows plain HTTP. On a tool without a host (which
// has no inject_headers: Validate refuses that), policy-injected headers
// follow the scheme and port rule only; the policy sees the host.
func (c *Call) CheckOrigin(target *url.URL) *conf.Refusal {
	t := c.Tool
	if len(t.Inject) == 0 && len(c.Inject) == 0 {
		return nil
	}
	if OriginOK(t, target) {
		return nil
	}
	want := "https"
	if t.Cfg.InjectOverHTTP {
		want = "https or http"
	}
	port := t.Port
	if port == "" {
		port = "the scheme's default port"
	}
	host := t.Host
	if host == "" {
		host = "its host"
	}
	return conf.Refuse(bucketing.CodePolicy, bucketing.ReasonOriginMismatch,
		fmt.Sprintf("Tool '%s' injects headers only to its own origin (%s, %s, %s), and this call goes to %s://%s%s", t.Cfg.Name, want, host, port, target.Scheme, target.Host, originFix(t, target)), nil)
}

// originFix names the setting that would let a call to u carry the
// tool's injected headers, for the origin_mismatch refusal: the operator
// reads it, and the refusal says what to change rather than only what
// differs.
func originFix(t *conf.Tool, u *url.URL) string {
	var fixes []string
	if u.Scheme == "http" && !t.Cfg.InjectOverHTTP {
		fixes = append(fixes, "set inject_over_http: true on the tool to send them over plain HTTP")
	}
	_, port := SplitHostPort(u)
	if port != originPort(t, u.Scheme) && t.Host != "" {
		fixes = append(fixes, fmt.Sprintf("name the port in match.host (%s) to send them to port %s", net.JoinHostPort(t.Host, port), port))
	}
	if len(fixes) == 0 {
		return ""
	}
	return "; " + strings.Join(fixes, ", and ")
}

// OriginOK reports whether a canonical upstream URL is the tool's origin.
func OriginOK(t *conf.Tool, u *url.URL) bool {
	if u.Scheme != "https" && !(u.Scheme == "http" && t.Cfg.InjectOverHTTP) {
		return false
	}
	host, port := SplitHostPort(u)
	if t.Host != "" && host != t.Host {
		return false
	}
	return port == originPort(t, u.Scheme)
}

// originPort is the port of the tool's origin for scheme: the one
// match.host names, else the scheme's default.
func originPort(t *conf.Tool, scheme string) string {
	if t.Port != "" {
		return t.Port
	}
	return canonical.DefaultPort(scheme)
}

// Input builds the document policies see.
func (c *Call) Input() *policies.Input {
	r, target := c.In, c.Target
	h := make(map[string]string, len(c.State.PolicyHeaders))
	for i, key := range c.State.policyKeys {
		if vs := r.Header[key]; len(vs) > 0 {
			h[c.State.PolicyHeaders[i]] = strings.Join(vs, ", ")
		}
	}
	var q url.Values
	if target.RawQuery != "" {
		q, _ = url.ParseQuery(target.RawQuery)
	}
	// The first input is the call's own storage; any later one (the
	// answer policies') is a new value, so none changes another.
	in := &c.input
	if !c.take(ownInput) {
		in = new(policies.Input)
	}
	*in = policies.Input{
		Tool:      c.Tool.Cfg.Name,
		Arguments: c.Args,
		ArgsDepth: c.ArgsDepth(),
		Request: policies.Request{
			Method: r.Method, Host: target.Host, Path: target.EscapedPath(),
			PathVars: c.Vars, Query: q, Headers: h,
		},
		Caller:   policies.Caller{Agent: c.Event.Agent, Session: c.Event.Session},
		TraceID:  c.Event.TraceID,
		Protocol: conf.ProtocolHTTP,
		Budget:   c.budgetInput(),
	}
	if c.MCP != nil {
		c.MCP.PolicyInput(in)
	}
	return in
}

// PolicyOutcome records what the policies said in the event and returns
// the refusal, if they refused.
func (c *Call) PolicyOutcome(d policies.Decision) *conf.Refusal {
	for _, v := range d.DryRun {
		c.noteWouldRefuse(v.Message)
	}
	if len(d.FailedOpen) > 0 {
		c.Event.PolicyError = strings.Join(d.FailedOpen, "; ")
	}
	if !d.Allow {
		return conf.Refuse(d.Code, d.Reason, d.Detail, d.Violations)
	}
	c.Inject = d.Inject
	c.Ask = d.Approval
	return nil
}

// cloneRequest is r.Clone(ctx) but for the URL, which Dispatch replaces
// with the target at once (cloning it cost an allocation per call), with
// the header cleaned for upstream as CleanRequestHeaders(h, decoded)
// cleans it. The header and trailer are copied, as Clone copies them (the
// trailer before the body fills r's); a request with anything else Clone
// would copy (a parsed form, transfer codings) is cloned whole.
// The header's values take vals (the call's own array) when they fit;
// spare is what they left of it.
//
// last says that nothing reads r's header after this (no answer step, no
// MCP exchange re-reads the call): the header is then cleaned where it
// is and goes upstream itself, not a copy; r's trailer must be nil.
func cloneRequest(ctx context.Context, r *http.Request, vals []string, decoded, last bool) (out *http.Request, spare []string) {
	if r.Form != nil || r.PostForm != nil || r.MultipartForm != nil || r.TransferEncoding != nil {
		out = r.Clone(ctx)
		CleanRequestHeaders(out.Header, decoded)
		return out, vals
	}
	out = r.WithContext(ctx)
	if last && r.Trailer == nil && r.Header != nil {
		CleanRequestHeaders(out.Header, decoded)
		return out, vals
	}
	out.Header, spare = upstreamHeader(r.Header, vals, decoded)
	out.Trailer = r.Trailer.Clone()
	return out, spare
}

// cloneHeader is h.Clone(), its values in vals when they fit (the call's
// own array, which no other request shares). It returns what is left of
// vals.
func cloneHeader(h http.Header, vals []string) (http.Header, []string) {
	return cloneHeaderIf(h, vals, 0, nil)
}

// cloneHeaderIf is cloneHeader of the names keep keeps (all when keep is
// nil), with room for extra names more.
func cloneHeaderIf(h http.Header, vals []string, extra int, keep func(string) bool) (http.Header, []string) {
	if h == nil {
		return nil, vals
	}
	nv, nk := 0, 0
	for k, vv := range h {
		if keep == nil || keep(k) {
			nv += len(vv)
			nk++
		}
	}
	if vals == nil || nv > len(vals) {
		vals = make([]string, nv)
	}
	sv := vals[:nv:nv]
	h2 := make(http.Header, nk+extra)
	for k, vv := range h {
		if keep != nil && !keep(k) {
			continue
		}
		if vv == nil {
			// Preserve nil values (Clone does).
			h2[k] = nil
			continue
		}
		n := copy(sv, vv)
		h2[k] = sv[:n:n]
		sv = sv[n:]
	}
	return h2, vals[nv:]
}

// upstreamHeader is CleanRequestHeaders(cloneHeader(h, vals), decoded) in
// one pass: what the cleaning deletes is never copied. FuzzUpstreamHeader
// holds the two to the same header.
func upstreamHeader(h http.Header, vals []string, decoded bool) (http.Header, []string) {
	var dropArr [8]string
	drop := connectionNames(h, dropArr[:0])
	h2, spare := cloneHeaderIf(h, vals, 1, func(k string) bool { return upstreamKeeps(k, decoded, drop) })
	if h2 == nil {
		h2 = http.Header{}
	}
	cleanAccept(h2)
	noClientUserAgent(h2)
	return h2, spare
}

// Dispatch sends the call upstream and shapes the answer.
func (c *Call) Dispatch(r *http.Request, target *url.URL, body io.Reader, size int64, timeout time.Duration) *http.Response {
	if resp := c.eventsGate(r); resp != nil {
		return resp
	}
	ctx := r.Context()
	// One clock reading serves the deadline and the upstream's start (the
	// header copy between them takes a microsecond or two; a caller's body
	// read between them reads the clock again).
	now := time.Now()
	if timeout > 0 {
		// The transport keeps the deadline on its fast path; it is armed
		// below for anything that waits on the context itself.
		if c.take(ownUpCtx) {
			c.upCtx = upstream.NewCallContextIn(&c.upCtxStore, ctx, now.Add(timeout))
		} else {
			c.upCtx = upstream.NewCallContext(ctx, now.Add(timeout))
		}
		ctx = c.upCtx
	}
	var vals []string // nil: the header's values get an array of their own
	if c.take(ownHeaderVals) {
		vals = c.headerVals[:]
	}
	// An answer toolgate reads (to envelope it, or for the answer steps)
	// must arrive decoded.
	checksAnswer := c.Chain != nil && len(c.Chain.Answers) > 0
	// Answer steps read the call again (their policies' input.request),
	// and so may an MCP exchange: for them the caller's header stays as
	// it came.
	last := !checksAnswer && c.MCP == nil
	out, spare := cloneRequest(ctx, r, vals, c.envelope || checksAnswer || (c.MCP != nil && c.MCP.Holds()), last)
	out.URL = target
	out.Method = r.Method
	out.Host = ""
	out.RequestURI = ""
	var streamed *conf.CallerBody // the caller's body, streamed unread
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
			raw, err := conf.ReadBody(r, size)
			if err != nil {
				c.Cancel()
				if errors.Is(err, conf.ErrBodyTimeout) {
					return c.Refuse(r, conf.BodyTimeoutRefusal(c.Subject(), c.State.Cfg.Limits.BodyTimeout))
				}
				return c.ClientGone(r)
			}
			c.Event.RequestBytes = int64(len(raw))
			body = c.holdBody(raw)
			now = time.Now() // the caller's body took its time: upstream starts now
		} else {
			streamed = &conf.CallerBody{Body: rc}
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
	// Injected headers go only to the tool's own origin (CheckOrigin
	// refused a plain call that goes elsewhere; an MCP call just goes
	// without them).
	if c.Tool != nil && (len(c.Tool.Inject) > 0 || len(c.Inject) > 0) && OriginOK(c.Tool, target) {
		// Their values take what cloneRequest left of the call's array.
		for k, v := range c.Tool.Inject {
			out.Header[k], spare = oneValue(v, spare)
		}
		for k, v := range c.Inject {
			out.Header[k], spare = oneValue(v, spare)
		}
	}
	var held *bytes.Reader // a body toolgate read, which can be sent again
	if bb, ok := body.(*bytesBody); ok && out.Body != nil {
		held = &bb.Reader
	}
	if c.upCtx != nil && (checksAnswer || c.MCP != nil) {
		// Answer steps and MCP's hold get a context that ends at the
		// deadline.
		c.upCtx.Arm()
	}
	c.upStart = now
	resp, err := c.Host.Upstream.RoundTripHeld(out, held)
	if err != nil {
		c.Cancel()
		// A body that stalled also ends the request's context (net/http
		// cancels it on a read error): tell it apart first.
		if streamed != nil {
			if berr := streamed.Failed(); conf.IsTimeout(berr) {
				// Part of the body may have reached upstream: a failure, not a refusal.
				res := bucketing.Result{Code: bucketing.CodeValidation, Class: bucketing.ClassUser, Reason: bucketing.ReasonBodyTimeout,
					Detail: fmt.Sprintf("the body did not arrive within %s (limits.body_timeout)", c.State.Cfg.Limits.BodyTimeout)}
				return c.fail(r, res, nil, http.StatusRequestTimeout)
			} else if berr != nil {
				return c.ClientGone(r)
			}
		}
		if r.Context().Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return c.ClientGone(r)
		}
		if de := (*egress.DeniedError)(nil); errors.As(err, &de) {
			c.upStart = time.Time{}
			return c.Refuse(r, conf.Refuse(de.Code(), de.Reason(), de.Detail(), nil))
		}
		if errors.Is(err, conf.ErrOtherName) {
			c.upStart = time.Time{}
			return c.Refuse(r, conf.Refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
				fmt.Sprintf("Call to %s refused: the name leads to a loopback host that tools name, so its calls must use that host's name", c.Event.Host), nil))
		}
		res := bucketing.Classify(bucketing.Outcome{Err: err}, c.rules(), time.Now())
		if res.Reason == bucketing.ReasonTLS {
			// The verifier's own words (names on the certificate, never
			// the call's arguments), for the operator; the caller and the
			// event get res.Detail.
			c.Host.Log.Debug("upstream TLS certificate refused", "tool", c.Event.Tool, "host", c.Event.Host, "err", err.Error())
		}
		return c.fail(r, res, nil, statusForTransport(res))
	}
	if de := conf.EgressNoted(r.Context()); de != nil {
		c.noteWouldRefuse("egress: " + de.Detail())
	}
	removeAnswerHeaders(resp.Header)
	c.upProto = resp.Proto
	if c.Budget != nil {
		c.upHeader = resp.Header
	}
	if checksAnswer && c.Chain.answerChecked(r, resp) {
		if a := c.runAnswers(ctx, r, resp); a != nil {
			return a
		}
	}
	if c.envelope && envelopable(r, resp) {
		return c.envelopeAnswer(r, resp)
	}
	return c.passAnswer(r, resp)
}

// oneValue is []string{v}, in spare's first element when it has one; it
// returns what is left of spare.
func oneValue(v string, spare []string) ([]string, []string) {
	if len(spare) == 0 {
		return []string{v}, nil
	}
	spare[0] = v
	return spare[:1:1], spare[1:]
}

func (c *Call) rules() bucketing.Rules {
	if c.Tool == nil {
		return nil
	}
	return c.Tool.Cfg.Rules
}

// Finish completes the event from a bucketed result and hands it on. A
// call whose caller went away is not a failure of the tool: it gets no
// error code, reason client_closed, and its own metric label.
func (c *Call) Finish(res bucketing.Result, status int, respBytes int64) {
	c.FinishAt(res, status, respBytes, time.Now())
}

// FinishAt is Finish at now, a clock reading the caller already took.
func (c *Call) FinishAt(res bucketing.Result, status int, respBytes int64, now time.Time) {
	if res.Reason == bucketing.ReasonCanceled && c.Client.Err() != nil {
		c.gone = true
	}
	ev := &c.Event
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
	if c.Budget != nil && c.State.Budgets != nil {
		c.SettleBudget(res)
	}
	ev.ResponseBytes = respBytes
	ev.TotalUS = now.Sub(c.Start).Microseconds()
	var up time.Duration
	if !c.upStart.IsZero() {
		up = now.Sub(c.upStart)
		ev.UpstreamUS = up.Microseconds()
	}
	label := ev.ErrorCode
	if c.gone {
		label = reasonClientClosed
	}
	if c.Chain != nil && c.Chain.Metrics != nil {
		c.Chain.Metrics.observe(label, now.Sub(c.Start), up)
	} else {
		c.Host.Metrics.Call("", label, now.Sub(c.Start))
	}
	if !c.Host.Rec.Record(*ev) && c.Host.Events != nil {
		c.Lost = true
	}
	if c.Host.Tracer != nil {
		c.Host.Tracer.TraceCall(ev, c.spanFacts())
	}
}

// reasonClientClosed is the event reason of a call whose caller went away.
const reasonClientClosed = "client_closed"

// Subject names this call in a detail sentence: its tool, or where it
// went when no tool matched.
func (c *Call) Subject() string {
	if c.Tool == nil {
		return "Call to " + c.Event.Host
	}
	return "Tool '" + c.Tool.Cfg.Name + "'"
}

// prefix starts a detail sentence about this call's failure.
func (c *Call) prefix() string { return c.Subject() + " failed: " }

// ClientGone records a call whose caller went away before it was answered.
// It is not a failure of the tool: no error code, reason client_closed.
func (c *Call) ClientGone(r *http.Request) *http.Response {
	c.gone = true
	c.Finish(bucketing.Result{}, 0, 0)
	return textResponse(r, http.StatusBadRequest, "client closed the request")
}

// NewEvent starts an event with what is known on arrival. at is when the
// call arrived: a call's Start, one clock reading for both.
func (s *Host) NewEvent(st *State, kind, method, host string, r *http.Request, at time.Time) sink.Event {
	ev := sink.Event{
		Time:          at.UTC(),
		Sidecar:       s.Sidecar,
		Listener:      kind,
		Method:        method,
		Host:          host,
		ConfigVersion: st.Version,
		PolicyVersion: st.PolicyVersion,
	}
	if r != nil {
		agent, session := st.callerKeys()
		ev.Agent = conf.BoundCallerID(headtext.Get(r.Header, agent), st.Cfg.Limits.MaxCallerIDBytes)
		ev.Session = conf.BoundCallerID(headtext.Get(r.Header, session), st.Cfg.Limits.MaxCallerIDBytes)
		if id, ok := callerTraceID(headtext.Get(r.Header, "Traceparent")); ok {
			ev.EventID, ev.TraceID = newEventID(), id
			return ev
		}
	}
	ev.EventID, ev.TraceID = newEventAndTraceID()
	return ev
}

// TraceID takes the trace id from a W3C traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>"), or generates one.
func TraceID(tp string) string {
	if id, ok := callerTraceID(tp); ok {
		return id
	}
	return newTraceID()
}

// callerTraceID is the trace id of a W3C traceparent header, if it has a
// valid one.
func callerTraceID(tp string) (string, bool) {
	if len(tp) >= 55 && tp[2] == '-' && tp[35] == '-' {
		id := tp[3:35]
		if IsHex(id) && id != "00000000000000000000000000000000" {
			return id, true
		}
	}
	return "", false
}

func IsHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func SplitHostPort(u *url.URL) (host, port string) {
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

// isHopHeader reports whether k (canonical) is a hop-by-hop header; they
// are removed in both directions (RFC 9110 section 7.6.1).
func isHopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// removeAnswerHeaders removes from upstream's answer header the
// hop-by-hop headers and the ones its Connection headers name, and the
// X-Toolgate-* headers: only toolgate sets those, so a legacy caller
// never mistakes an upstream's own X-Toolgate-Error-Code on a raw 200 for
// a refusal. It walks h's few names once rather than deleting each name
// it could hold (a hash of each: 1% of a checked call's CPU).
func removeAnswerHeaders(h http.Header) {
	var namedArr [8]string
	for _, name := range connectionNames(h, namedArr[:0]) {
		delete(h, name)
	}
	for k := range h {
		if isHopHeader(k) || isOwnHeader(k) {
			delete(h, k)
		}
	}
}

// isOwnHeader reports whether k names one of toolgate's X-Toolgate-*
// headers, in any case.
func isOwnHeader(k string) bool {
	return len(k) >= len(ownHeaderPrefix) && strings.EqualFold(k[:len(ownHeaderPrefix)], ownHeaderPrefix)
}

// ownHeaderPrefix starts every header toolgate sets on an answer.
const ownHeaderPrefix = "X-Toolgate-"

// CleanRequestHeaders removes hop-by-hop headers and toolgate's own
// negotiation from a request going upstream, and keeps net/http from adding
// a User-Agent of its own. An enveloped call also drops Accept-Encoding, so
// the answer arrives decoded and can be rewritten.
func CleanRequestHeaders(h http.Header, envelope bool) {
	var dropArr [8]string
	drop := connectionNames(h, dropArr[:0])
	for k := range h {
		if !upstreamKeeps(k, envelope, drop) {
			delete(h, k)
		}
	}
	cleanAccept(h)
	noClientUserAgent(h)
}

// connectionNames appends to names the header names h's Connection
// headers list, as Header.Del spells them (canonical).
func connectionNames(h http.Header, names []string) []string {
	for _, f := range h["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	return names
}

// upstreamKeeps reports whether a request's header k goes upstream: not a
// hop-by-hop header nor one its Connection headers name (drop), not
// toolgate's own negotiation, and not Accept-Encoding when the answer must
// arrive decoded.
func upstreamKeeps(k string, decoded bool, drop []string) bool {
	return !isHopHeader(k) && k != conf.HeaderEnvelope && !(decoded && k == "Accept-Encoding") && !slices.Contains(drop, k)
}

// cleanAccept takes the envelope's media type out of h's Accept values,
// and Accept out of h when nothing is left of them.
func cleanAccept(h http.Header) {
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
}

// noClientUserAgent keeps net/http from adding a User-Agent to h.
func noClientUserAgent(h http.Header) {
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
