package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/connqueue"
)

// Transparent mode. iptables (deploy/k8s/base/toolgate-iptables.sh)
// redirects the pod's outbound TCP to ports 80 and 443 to this listener.
// Each connection's original destination comes from SO_ORIGINAL_DST; its
// first byte says what it carries:
//
//   - a TLS handshake (0x16): the ClientHello's SNI names the host (the
//     original destination's IP when there is none). When a tool may match
//     calls to that host and port, or to the original destination's
//     address (both in canonical form, canonical.go), or unmatched calls
//     are denied, the
//     connection is intercepted exactly like an intercepted CONNECT, and
//     calls go to https://SNI:port, dialled at the original destination
//     (so DNS is not consulted a second time, and the name is still what
//     upstream's certificate is verified against). Otherwise the bytes are
//     tunnelled to the original destination untouched, and recorded.
//   - anything else is read as plain HTTP: each request is routed by its
//     Host header (the port from the original destination when the header
//     has none) and dialled at the original destination.
//
// Loops. The iptables rules exempt toolgate's own uid, so its upstream
// connections are not redirected. If that rule is missing (toolgate runs
// as another uid, or the rules were written by hand), toolgate's own
// connection would come back to it and be dialled again, forever. It is
// caught: every upstream connection toolgate dials is registered by its
// local address before it carries a byte, and a redirected connection from
// one of those addresses is closed at once, logged as an error and counted
// in toolgate_proxy_loops_total. A connection whose original destination is
// the transparent listener itself (a client that connects to it directly)
// is refused the same way.

// transparent is the transparent listener.
type transparent struct {
	s  *Server
	ln net.Listener

	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{}
}

func newTransparent(s *Server, ln net.Listener) *transparent {
	return &transparent{s: s, ln: ln, tunnels: map[net.Conn]struct{}{}}
}

// serve accepts redirected connections until close.
func (tp *transparent) serve() error {
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

// close stops accepting, waits for connections being sorted, and closes
// open tunnels.
func (tp *transparent) close() {
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

// handle sorts one redirected connection.
func (tp *transparent) handle(c net.Conn) {
	m := tp.s.tlsm
	orig, err := originalDst(c)
	if err != nil {
		m.conns.WithLabelValues("transparent", "error").Inc()
		tp.s.log.Warn("transparent connection without an original destination: was it redirected by iptables?", "client", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	if la, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil && la == orig {
		tp.loop(c, "a connection straight to the transparent listener (not redirected); its destination would be toolgate itself")
		return
	}
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		c.Close()
		return
	}
	// Any byte toolgate's own connection carries was written after the
	// dialer registered it, so this check cannot miss one.
	if tp.s.own.Has(c.RemoteAddr().String()) {
		tp.loop(c, "toolgate's own upstream connection was redirected back to it; exclude toolgate's uid from the redirect (TOOLGATE_UID)")
		return
	}
	st := tp.s.state.Load()
	port := strconv.Itoa(int(orig.Port()))
	dial := orig.String()
	if first[0] != recordTypeHandshake {
		c.SetReadDeadline(time.Time{})
		m.conns.WithLabelValues("transparent", "plain").Inc()
		tp.s.mitm.hand(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(first), c)},
			&target{scheme: "http", port: port, dial: dial, kind: "transparent"})
		return
	}
	sni, hello, err := readClientHello(io.MultiReader(bytes.NewReader(first), c))
	if err != nil {
		m.conns.WithLabelValues("transparent", "error").Inc()
		tp.s.log.Info("transparent connection starts like TLS but holds no ClientHello", "client", c.RemoteAddr().String(), "dst", dial, "err", err)
		c.Close()
		return
	}
	pc := &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), c)}
	host := sni
	if host == "" {
		host = orig.Addr().Unmap().String()
	}
	// Intercepted when a tool may match the server name or the address the
	// connection really goes to, both in canonical form (canonical.go).
	sh, sp, okName := canonConnect(context.Background(), st.cfg, net.JoinHostPort(host, port))
	ah, ap, okAddr := canonConnect(context.Background(), st.cfg, dial)
	if !okName || !okAddr {
		m.conns.WithLabelValues("transparent", "refused").Inc()
		tp.s.log.Info("transparent connection refused: its server name or address is ambiguous", "client", c.RemoteAddr().String(), "dst", dial)
		c.Close()
		return
	}
	if hasRoutes(st.cfg.tools, sh, sp) || hasRoutes(st.cfg.tools, ah, ap) || st.cfg.Unmatched == UnmatchedDeny {
		tp.s.mitm.serveTLS(pc, host, &target{scheme: "https", authority: joinAuthority(host, port, "443"), dial: dial, kind: "transparent"})
		return
	}
	c.SetReadDeadline(time.Time{})
	tp.tunnel(pc, st, st.cfg.guarded(context.Background(), sh, sp), dial, joinAuthority(host, port, "443"))
}

// loop refuses a connection that would loop, loudly: it is a broken
// deployment, not a bad call.
func (tp *transparent) loop(c net.Conn, why string) {
	tp.s.tlsm.loops.Inc()
	tp.s.tlsm.conns.WithLabelValues("transparent", "loop").Inc()
	tp.s.logLimited(&tp.s.tlsm.loopLog, slog.LevelError, "transparent connection refused: "+errLoop.Error(),
		"why", why, "client", c.RemoteAddr().String())
	c.Close()
}

// tunnel copies a TLS connection to its original destination untouched,
// and records it like a tunnelled CONNECT.
func (tp *transparent) tunnel(c net.Conn, st *state, ctx context.Context, dial, authority string) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	up, err := tp.s.dial(ctx, "tcp", dial)
	cancel()
	tp.s.tunnelled(st, "transparent", nil, authority, err)
	if err != nil {
		tp.s.log.Info("transparent tunnel: dial failed", "dst", dial, "err", err)
		c.Close()
		return
	}
	if !tp.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	defer tp.untrack(c, up)
	splice(c, up)
}

func (tp *transparent) track(cs ...net.Conn) bool {
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

func (tp *transparent) untrack(cs ...net.Conn) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, c := range cs {
		delete(tp.tunnels, c)
	}
}

// recordTypeHandshake is the first byte of a TLS connection.
const recordTypeHandshake = 0x16

// prefixConn is a connection whose first bytes were already read; Read
// returns them again first.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the underlying TCP connection, for tunnels.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// readClientHello reads a TLS ClientHello from r (at most maxHelloBytes)
// with crypto/tls's own parser and returns its SNI ("" when the client
// sent none) and every byte it read, to be replayed.
func readClientHello(r io.Reader) (sni string, consumed []byte, err error) {
	var buf bytes.Buffer
	sc := &sniffConn{r: io.TeeReader(io.LimitReader(r, maxHelloBytes), &buf)}
	got := false
	srv := tls.Server(sc, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = h.ServerName, true
			return nil, errHelloRead
		},
	})
	herr := srv.Handshake()
	if !got {
		if herr == nil {
			herr = errors.New("no ClientHello")
		}
		return "", nil, herr
	}
	return sni, buf.Bytes(), nil
}

var errHelloRead = errors.New("ClientHello read")

// sniffConn feeds a TLS server the client's bytes and swallows whatever
// the server writes (the alert that ends the sniffing handshake).
type sniffConn struct{ r io.Reader }

func (c *sniffConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *sniffConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *sniffConn) Close() error                     { return nil }
func (c *sniffConn) LocalAddr() net.Addr              { return connqueue.Addr("intercept") }
func (c *sniffConn) RemoteAddr() net.Addr             { return connqueue.Addr("intercept") }
func (c *sniffConn) SetDeadline(time.Time) error      { return nil }
func (c *sniffConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sniffConn) SetWriteDeadline(time.Time) error { return nil }
