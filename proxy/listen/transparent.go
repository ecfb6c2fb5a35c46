package listen

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Transparent is the transparent listener's accept loop: it hands each
// redirected connection to its handler on a goroutine of its own, and
// holds the tunnels the handler opens (Track) until Close.
type Transparent struct {
	ln     net.Listener
	handle func(net.Conn)

	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{}
}

// NewTransparent returns the listener of ln, whose connections handle
// sorts.
func NewTransparent(ln net.Listener, handle func(net.Conn)) *Transparent {
	return &Transparent{ln: ln, handle: handle, tunnels: map[net.Conn]struct{}{}}
}

// Addr is the listener's address.
func (tp *Transparent) Addr() net.Addr { return tp.ln.Addr() }

// Serve accepts redirected connections until Close.
func (tp *Transparent) Serve() error {
	var backoff time.Duration
	for {
		c, err := tp.ln.Accept()
		if err != nil {
			tp.mu.Lock()
			closed := tp.closed
			tp.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		tp.wg.Add(1)
		go func() {
			defer tp.wg.Done()
			tp.handle(c)
		}()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// Close stops accepting, waits for connections being sorted, and closes
// open tunnels.
func (tp *Transparent) Close() {
	tp.mu.Lock()
	tp.closed = true
	tp.mu.Unlock()
	tp.ln.Close()
	tp.mu.Lock()
	for c := range tp.tunnels {
		c.Close()
	}
	tp.mu.Unlock()
	tp.wg.Wait()
}

// Track holds the connections of a tunnel until Untrack, so that Close
// closes them; it reports false, holding nothing, once Close has run.
func (tp *Transparent) Track(cs ...net.Conn) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.closed {
		return false
	}
	for _, c := range cs {
		tp.tunnels[c] = struct{}{}
	}
	return true
}

// Untrack lets go of connections Track holds.
func (tp *Transparent) Untrack(cs ...net.Conn) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, c := range cs {
		delete(tp.tunnels, c)
	}
}
