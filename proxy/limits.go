package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// Bounds on what a caller may hold. Every listener's connections are
// capped (capListener), each request's headers and body must arrive in
// time (limits.read_header_timeout, limits.body_timeout, set per request by
// bodyDeadline), and caller-identifying values are cut to a bounded length
// before events or policies see them (boundCallerID).

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyDeadline bounds reading r's body to d (limits.body_timeout): the
// connection's reads fail once d has passed. It is set when a request's
// handler starts (its headers just read) and cleared as soon as the body
// has been read to its end, so a call that takes longer upstream, or an
// answer that streams for minutes, is not cut when the deadline passes
// (the read in the background, net/http's or h1serve's, which watches
// for the caller going away, would end the request's context). A request without a body gets
// none; nor does a CONNECT, whose connection becomes a tunnel.
func bodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if d <= 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	ctl := http.NewResponseController(w)
	if ctl.SetReadDeadline(time.Now().Add(d)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, ctl: ctl}
}

// deadlineBody clears its connection's read deadline when it has been read
// to its end.
type deadlineBody struct {
	io.ReadCloser
	ctl     *http.ResponseController
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.cleared {
		b.cleared = true
		_ = b.ctl.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyTimeoutRefusal refuses a call whose body did not arrive in time;
// who is "Tool 'name'" or "Call to host".
func bodyTimeoutRefusal(who string, d time.Duration) *refusal {
	return refuse(bucketing.CodeValidation, bucketing.ReasonBodyTimeout,
		fmt.Sprintf("%s got a body that did not arrive within %s (limits.body_timeout)", who, d), nil)
}

// unreadQuery refuses a query string on a checked tool whose args do not
// include query: its keys would reach upstream (a Go FormValue, Flask's
// request.values) unchecked. Each key is a violation; values never appear.
func unreadQuery(tool, raw string) *refusal {
	q, _ := url.ParseQuery(raw)
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > maxDuplicateViolations {
		keys = keys[:maxDuplicateViolations]
	}
	vs := make([]policies.Violation, len(keys))
	for i, k := range keys {
		vs[i] = policies.Violation{Path: "/" + escapePointer(k), Reason: bucketing.ReasonUnknownField,
			Message: "query argument this tool does not read", Expected: "absent"}
	}
	return refuse(bucketing.CodeValidation, bucketing.ReasonUnknownField,
		fmt.Sprintf("Tool '%s' reads no arguments from the query string, and got one", tool), vs)
}

// truncatedMark ends a caller-identifying value that was cut.
const truncatedMark = "...[truncated]"

// boundCallerID cuts v to at most max bytes, at a UTF-8 boundary, and marks
// the cut, so an agent or session header cannot make events or policy
// input large. A cut value never equals an uncut one.
func boundCallerID(v string, max int) string {
	if max <= 0 || len(v) <= max {
		return v
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + truncatedMark
}

// callerBody is a caller's body streamed upstream unread; it keeps the
// first read error, so a failed exchange can be told apart from a caller
// whose body stalled or broke.
type callerBody struct {
	rc  io.ReadCloser
	mu  sync.Mutex
	err error
}

func (b *callerBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *callerBody) Close() error { return b.rc.Close() }

// failed returns the first read error, or nil.
func (b *callerBody) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// connMetrics count connections by listener.
type connMetrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	cut     *prometheus.CounterVec
}

func newConnMetrics() *connMetrics {
	return &connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "open_connections",
			Help: "Caller connections open now, by listener (forward, reverse, transparent).",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "connections_refused_total",
			Help: "Caller connections refused because their listener had limits.max_conns open (or the listeners together the descriptor budget), and none of them was stalled, by listener.",
		}, []string{"listener"}),
		cut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "stalled_connections_cut_total",
			Help: "Caller connections cut to make room for a new one at the cap: each had sent nothing for a second while its headers, its body or its next request were due, by listener.",
		}, []string{"listener"}),
	}
}

func (m *connMetrics) describe(ch chan<- *prometheus.Desc) {
	m.open.Describe(ch)
	m.refused.Describe(ch)
	m.cut.Describe(ch)
}

func (m *connMetrics) collect(ch chan<- prometheus.Metric) {
	m.open.Collect(ch)
	m.refused.Collect(ch)
	m.cut.Collect(ch)
}

// capListener is a listener with at most max connections open at once
// (and, with its Server's, the listeners together at most connSet.max).
// At the cap, the connection stalled longest is cut to make room (see
// connSet); a connection over the cap with none stalled is accepted and
// refused at once: on an HTTP
// listener with a 503 envelope (rate_limit/too_many_connections) and
// Retry-After, on the transparent listener (whose first bytes may be TLS)
// by closing it. Accept never blocks on the cap, so the kernel's backlog
// never fills with callers waiting unseen.
type capListener struct {
	net.Listener
	kind  string
	max   int64
	http  bool         // refuse with an HTTP answer
	open  atomic.Int64 // guarded by set.mu for writes
	set   *connSet
	m     *connMetrics
	onCap func() // called for each refused connection (a limited log line)
}

func newCapListener(ln net.Listener, kind string, max int, httpAnswer bool, set *connSet, m *connMetrics, onCap func()) *capListener {
	m.open.WithLabelValues(kind).Set(0)
	m.refused.WithLabelValues(kind).Add(0)
	m.cut.WithLabelValues(kind).Add(0)
	return &capListener{Listener: ln, kind: kind, max: int64(max), http: httpAnswer, set: set, m: m, onCap: onCap}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc := &cappedConn{Conn: rawconn.Wrap(c), l: l}
		cc.progress.Store(time.Now().UnixNano())
		if !l.set.admit(cc) {
			l.m.refused.WithLabelValues(l.kind).Inc()
			if l.onCap != nil {
				l.onCap()
			}
			if l.set.refusing.Add(1) > maxRefusing {
				// Answering takes a descriptor for up to refuseTimeout:
				// past maxRefusing at once, a connection is closed unanswered.
				l.set.refusing.Add(-1)
				c.Close()
				continue
			}
			go l.refuse(c)
			continue
		}
		l.m.open.WithLabelValues(l.kind).Inc()
		return cc, nil
	}
}

// refuseTimeout bounds reading the head of, answering and draining a
// refused connection; maxRefusedHead bounds what is read of its head.
const (
	refuseTimeout  = 2 * time.Second
	maxRefusedHead = 64 << 10
)

// maxRefusing bounds the refused connections being answered at once, each
// holding its descriptor for up to refuseTimeout; more are closed at once.
const maxRefusing = 16

// refuse answers a connection over the cap and closes it. The request's
// head is read first (bounded in size and time; a client that gets an
// answer before it has sent its request takes it for a broken connection),
// then the answer is written, the sending side closed, and what else the
// caller sent drained briefly, so the caller reads the answer rather than a
// reset. The request itself goes nowhere.
func (l *capListener) refuse(c net.Conn) {
	defer l.set.refusing.Add(-1)
	defer c.Close()
	if !l.http {
		return
	}
	c.SetDeadline(time.Now().Add(refuseTimeout))
	br := bufio.NewReaderSize(io.LimitReader(c, maxRefusedHead), 4<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil || len(bytes.TrimRight(line, "\r\n")) == 0 && len(line) > 0 {
			break
		}
	}
	detail := fmt.Sprintf("toolgate's %s listener has %d connections open, its limit (limits.max_conns); retry shortly", l.kind, l.max)
	body := bucketing.Refusal(bucketing.CodeRateLimit, bucketing.ReasonTooManyConnections, detail, nil).Marshal()
	head := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n" +
		HeaderErrorCode + ": " + string(bucketing.CodeRateLimit) + "\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(c, head+string(body)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// cappedConn gives its place back when closed.
type cappedConn struct {
	net.Conn
	l *capListener
	connProgress
}

func (c *cappedConn) Close() error {
	c.l.set.remove(c)
	return c.Conn.Close()
}

// CloseWrite half-closes the connection (tunnels pass a half-close on).
func (c *cappedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// CloseRead half-closes the reading side.
func (c *cappedConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}

// NetConn returns the connection underneath (for SO_ORIGINAL_DST).
func (c *cappedConn) NetConn() net.Conn { return c.Conn }

// ReadFrom keeps the TCP connection's splice and sendfile paths.
func (c *cappedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
