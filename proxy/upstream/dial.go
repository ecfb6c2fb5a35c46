package upstream

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/rawconn"
)

// DialFunc connects to upstream, as net.Dialer.DialContext does.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// NewStd is the shared upstream transport: maxIdlePerHost bounds the idle
// connections kept per host (four times that in all), tlsc verifies upstream
// certificates (nil: Go's defaults), dial connects.
func NewStd(maxIdlePerHost int, tlsc *tls.Config, dial DialFunc) *http.Transport {
	if tlsc != nil {
		tlsc = tlsc.Clone()
	}
	return &http.Transport{
		Proxy:                 nil, // never chain into another proxy from the environment
		DialContext:           dial,
		TLSClientConfig:       tlsc,
		MaxIdleConns:          maxIdlePerHost * 4,
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		// Never add Accept-Encoding or decode on the caller's behalf: a raw
		// answer passes exactly as upstream encoded it for the caller.
		DisableCompression: true,
	}
}

// dialKey carries, in a request's context, the address the transport
// dials instead of the URL's host (the original destination of a
// redirected connection).
type dialKey struct{}

// WithDialAddr returns ctx naming addr as the address to dial instead of
// the one asked for (the original destination of a redirected connection).
// The fast path pools such connections apart from the others to the same
// host.
func WithDialAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, dialKey{}, addr)
}

// dialAddr is the address WithDialAddr put in ctx, "" for none.
func dialAddr(ctx context.Context) string {
	a, _ := ctx.Value(dialKey{}).(string)
	return a
}

// Guard is the dial guard: where a call or tunnel was routed, and whether
// the connection made for it may be used now that it is known where it
// landed.
type Guard interface {
	// Check returns nil when a connection that reached remote may be used,
	// and otherwise the error the dial returns (the connection is closed).
	Check(remote net.Addr) error
}

// guardKey carries a Guard in a dial's context.
type guardKey struct{}

// WithGuard returns ctx carrying g, which checks every connection dialled
// with it.
func WithGuard(ctx context.Context, g Guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// IsGuardKey reports whether key is the one WithGuard carries a Guard
// under: a context type of its own that carries one answers its Value
// with the Guard, as the context WithGuard returns does, without a
// context of WithGuard's on top.
func IsGuardKey(key any) bool {
	_, ok := key.(guardKey)
	return ok
}

// Conns are toolgate's own upstream connections by local address, so a
// redirected connection that is one of them (a routing loop) is caught.
// The zero value is ready to use.
type Conns struct {
	mu    sync.Mutex
	addrs map[string]int
}

func (o *Conns) add(addr string) {
	o.mu.Lock()
	if o.addrs == nil {
		o.addrs = map[string]int{}
	}
	o.addrs[addr]++
	o.mu.Unlock()
}

func (o *Conns) remove(addr string) {
	o.mu.Lock()
	if o.addrs[addr]--; o.addrs[addr] <= 0 {
		delete(o.addrs, addr)
	}
	o.mu.Unlock()
}

// Has reports whether addr is the local address of one of the open
// connections: a connection from it that reaches toolgate is its own
// traffic come back.
func (o *Conns) Has(addr string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.addrs[addr] > 0
}

// ownConn is an upstream connection registered in Conns until closed.
type ownConn struct {
	net.Conn
	own  *Conns
	addr string
	once sync.Once
}

func (c *ownConn) Close() error {
	c.once.Do(func() { c.own.remove(c.addr) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, so a tunnel passes on a client's
// half-close instead of cutting upstream's answer.
func (c *ownConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// CloseRead half-closes the reading side (goproxy's tunnels use both).
func (c *ownConn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}

// ReadFrom keeps the TCP connection's splice and sendfile paths.
func (c *ownConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// Dialer dials upstream with d: the address from the context when
// WithDialAddr named one, refusing a connection the context's Guard
// refuses, and registering every connection in own before any byte is
// written on it.
func Dialer(d *net.Dialer, own *Conns) DialFunc {
	return DialerFunc(d.DialContext, own)
}

// DialerFunc is Dialer connecting with dial (the egress guard's dial, in
// proxy) instead of a net.Dialer.
func DialerFunc(dial DialFunc, own *Conns) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a := dialAddr(ctx); a != "" {
			addr = a
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if g, ok := ctx.Value(guardKey{}).(Guard); ok {
			if err := g.Check(c.RemoteAddr()); err != nil {
				c.Close()
				return nil, err
			}
		}
		la := c.LocalAddr().String()
		own.add(la)
		return &ownConn{Conn: rawconn.Wrap(c), own: own, addr: la}, nil
	}
}
