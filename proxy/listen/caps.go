package listen

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/monoclock"
	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// Caller connections under pressure. Every caller connection holds a file
// descriptor, and a call in progress holds a second, its upstream
// connection. When a listener is at its cap (limits.max_conns) or all the
// listeners together are at the budget the process's descriptor limit
// leaves for callers (Options.MaxCallerConns), a new connection does not
// simply wait or get a 503: the connection that has held its place longest
// without progress (one whose caller owes bytes, a request's headers or
// body, or is idle between requests, and sent none for stallAfter) is cut
// to make room. Only when no connection is stalled is the new one refused.
// So a flood of connections that stop mid-body cannot keep a valid call
// from being served.

// stallAfter is how long a connection whose caller owes bytes may send
// none before it counts as stalled, and may be cut for a newcomer.
const stallAfter = time.Second

// Conns holds a server's caller connections, every capped listener's, for
// the shared budget and for finding the stalled one to cut.
type Conns struct {
	// max bounds the connections of every listener together; 0: only
	// each listener's own cap applies.
	max int64

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
	cut   atomic.Uint64 // stalled connections cut for a newcomer
	// refusing counts the refused connections being answered (capListener.refuse).
	refusing atomic.Int64
}

// NewConns returns an empty set whose listeners together hold at most max
// connections; 0: only each listener's own cap applies.
func NewConns(max int) *Conns {
	return &Conns{max: int64(max), conns: map[*cappedConn]struct{}{}}
}

// Max is the bound of every listener's connections together; 0 for none.
func (s *Conns) Max() int { return int(s.max) }

// admit counts c in, over the caps if need be by cutting the stalled
// connection that made no progress for longest (of c's listener when that
// listener is at its cap, else of any). It reports whether c may stay.
func (s *Conns) admit(c *cappedConn) bool {
	l := c.l
	s.mu.Lock()
	overListener := l.open.Load() >= l.max
	overAll := s.max > 0 && int64(len(s.conns)) >= s.max
	var victim *cappedConn
	if overListener || overAll {
		victim = s.stalledLocked(l, overListener)
		if victim == nil {
			s.mu.Unlock()
			return false
		}
		s.removeLocked(victim)
	}
	s.conns[c] = struct{}{}
	l.open.Add(1)
	s.mu.Unlock()
	if victim != nil {
		s.cut.Add(1)
		l.m.cut.WithLabelValues(victim.l.kind).Inc()
		victim.Conn.Close() // its server sees the read fail, and Closes it (a no-op by then)
	}
	return true
}

// stalledLocked returns the connection stalled longest, of l only when
// own is set, or nil. The caller holds mu.
func (s *Conns) stalledLocked(l *capListener, own bool) *cappedConn {
	now := monoclock.Now()
	var (
		victim *cappedConn
		oldest int64
	)
	for c := range s.conns {
		if own && c.l != l {
			continue
		}
		p, ok := c.stalledSince(now)
		if ok && (victim == nil || p < oldest) {
			victim, oldest = c, p
		}
	}
	return victim
}

// remove counts c out, once.
func (s *Conns) remove(c *cappedConn) {
	s.mu.Lock()
	s.removeLocked(c)
	s.mu.Unlock()
}

func (s *Conns) removeLocked(c *cappedConn) {
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	c.l.open.Add(-1)
	c.l.m.open.WithLabelValues(c.l.kind).Dec()
}

// progress tracking on a capped connection: owing is set while a read
// deadline is (the server waits for the caller: a request's headers, its
// body, or the next request), reading while a Read is under way, and
// progress is when the last bytes came (or the wait began).
type connProgress struct {
	owing    atomic.Bool
	reading  atomic.Bool
	progress atomic.Int64 // monoclock.Now()
}

// stalledSince reports, for a connection whose caller owes bytes and that
// waits for them in a Read, since when it made no progress, and whether
// that is longer than stallAfter before now.
func (c *cappedConn) stalledSince(now int64) (int64, bool) {
	if !c.owing.Load() || !c.reading.Load() {
		return 0, false
	}
	p := c.progress.Load()
	return p, now-p >= int64(stallAfter)
}

func (c *cappedConn) Read(b []byte) (int, error) {
	c.reading.Store(true)
	n, err := c.Conn.Read(b)
	c.reading.Store(false)
	if n > 0 {
		c.progress.Store(monoclock.Now())
	}
	return n, err
}

// SetReadDeadline notes whether the server waits for the caller (a
// deadline) or not (none: the call is upstream, or the answer is being
// written).
func (c *cappedConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !c.owing.Load() {
		c.progress.Store(monoclock.Now())
	}
	c.owing.Store(!t.IsZero())
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *cappedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

var _ net.Conn = (*cappedConn)(nil)

// CapMetrics count caller connections by listener: open, refused at the
// cap, and cut as stalled to make room.
type CapMetrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	cut     *prometheus.CounterVec
}

// NewCapMetrics returns the series, toolgate_proxy_open_connections,
// connections_refused_total and stalled_connections_cut_total.
func NewCapMetrics() *CapMetrics {
	return &CapMetrics{
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

// Describe sends the series' descriptions, as prometheus.Collector does.
func (m *CapMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.open.Describe(ch)
	m.refused.Describe(ch)
	m.cut.Describe(ch)
}

// Collect sends the series, as prometheus.Collector does.
func (m *CapMetrics) Collect(ch chan<- prometheus.Metric) {
	m.open.Collect(ch)
	m.refused.Collect(ch)
	m.cut.Collect(ch)
}

// capListener is a listener with at most max connections open at once
// (and, with its Conns, the listeners together at most Conns.Max).
// At the cap, the connection stalled longest is cut to make room (see
// Conns); a connection over the cap with none stalled is accepted and
// refused at once: on an HTTP
// listener with a 503 envelope (rate_limit/too_many_connections) and
// Retry-After, on the transparent listener (whose first bytes may be TLS)
// by closing it. Accept never blocks on the cap, so the kernel's backlog
// never fills with callers waiting unseen.
type capListener struct {
	net.Listener
	kind   string
	max    int64
	http   bool         // refuse with an HTTP answer
	header string       // the answer's error.code header
	open   atomic.Int64 // guarded by set.mu for writes
	set    *Conns
	m      *CapMetrics
	onCap  func() // called for each refused connection (a limited log line)
}

// Cap says how NewCapListener caps a listener.
type Cap struct {
	// Kind is the listener's name in the metrics and answers: "forward",
	// "reverse" or "transparent".
	Kind string
	// Max is how many connections the listener holds at once.
	Max int
	// HTTP says a connection over the cap is answered with an HTTP 503
	// envelope; false: it is only closed (its first bytes may be TLS).
	HTTP bool
	// ErrorCodeHeader is the header of the 503 that carries error.code
	// (proxy.HeaderErrorCode).
	ErrorCodeHeader string
	// OnCap, when not nil, is called for each refused connection (a
	// limited log line).
	OnCap func()
}

// NewCapListener wraps ln in cfg's cap, counting its connections in set
// (with every other listener's) and in m.
func NewCapListener(ln net.Listener, set *Conns, m *CapMetrics, cfg Cap) net.Listener {
	m.open.WithLabelValues(cfg.Kind).Set(0)
	m.refused.WithLabelValues(cfg.Kind).Add(0)
	m.cut.WithLabelValues(cfg.Kind).Add(0)
	return &capListener{Listener: ln, kind: cfg.Kind, max: int64(cfg.Max), http: cfg.HTTP, header: cfg.ErrorCodeHeader, set: set, m: m, onCap: cfg.OnCap}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc := &cappedConn{Conn: rawconn.Wrap(c), l: l}
		cc.progress.Store(monoclock.Now())
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
		l.header + ": " + string(bucketing.CodeRateLimit) + "\r\nRetry-After: 1\r\nConnection: close\r\n" +
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

// WriteTwo writes a then b with one writev(2) when the connection is raw
// (an answer's head and body, from the plain listeners' loop).
func (c *cappedConn) WriteTwo(a, b []byte) (int, error) { return rawconn.WriteTwo(c.Conn, a, b) }

// ReadFrom keeps the TCP connection's splice and sendfile paths.
func (c *cappedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
