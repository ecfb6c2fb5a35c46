package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
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

// connSet holds a Server's caller connections, for the shared budget and
// for finding the stalled one to cut.
type connSet struct {
	// max bounds the connections of every listener together; 0: only
	// each listener's own cap applies.
	max int64

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
	cut   atomic.Uint64 // stalled connections cut for a newcomer
	// refusing counts the refused connections being answered (capListener.refuse).
	refusing atomic.Int64
}

func newConnSet(max int) *connSet {
	return &connSet{max: int64(max), conns: map[*cappedConn]struct{}{}}
}

// admit counts c in, over the caps if need be by cutting the stalled
// connection that made no progress for longest (of c's listener when that
// listener is at its cap, else of any). It reports whether c may stay.
func (s *connSet) admit(c *cappedConn) bool {
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
func (s *connSet) stalledLocked(l *capListener, own bool) *cappedConn {
	now := time.Now().UnixNano()
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
func (s *connSet) remove(c *cappedConn) {
	s.mu.Lock()
	s.removeLocked(c)
	s.mu.Unlock()
}

func (s *connSet) removeLocked(c *cappedConn) {
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
	progress atomic.Int64 // unix nanoseconds
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
		c.progress.Store(time.Now().UnixNano())
	}
	return n, err
}

// SetReadDeadline notes whether the server waits for the caller (a
// deadline) or not (none: the call is upstream, or the answer is being
// written).
func (c *cappedConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !c.owing.Load() {
		c.progress.Store(time.Now().UnixNano())
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
