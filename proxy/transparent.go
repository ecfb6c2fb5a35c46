package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/listen"
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

// transparent sorts the transparent listener's connections (listen.Transparent
// accepts them and holds their tunnels).
type transparent struct {
	s *Server
	*listen.Transparent
}

func newTransparent(s *Server, ln net.Listener) *transparent {
	tp := &transparent{s: s}
	tp.Transparent = listen.NewTransparent(ln, tp.Handle)
	return tp
}

// Handle sorts one redirected connection.
func (tp *transparent) Handle(c net.Conn) {
	m := tp.s.tlsm
	orig, err := listen.OriginalDst(c)
	if err != nil {
		m.conns.WithLabelValues("transparent", "error").Inc()
		tp.s.Log.Warn("transparent connection without an original destination: was it redirected by iptables?", "client", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	if la, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil && la == orig {
		tp.loop(c, "a connection straight to the transparent listener (not redirected); its destination would be toolgate itself")
		return
	}
	c.SetReadDeadline(time.Now().Add(listen.HandshakeTimeout))
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
	if first[0] != listen.RecordTypeHandshake {
		c.SetReadDeadline(time.Time{})
		m.conns.WithLabelValues("transparent", "plain").Inc()
		tp.s.mitm.Hand(listen.Prefixed(c, io.MultiReader(bytes.NewReader(first), c)),
			&listen.Target{Scheme: "http", Port: port, Dial: dial, Kind: "transparent"})
		return
	}
	sni, hello, err := listen.ReadClientHello(io.MultiReader(bytes.NewReader(first), c))
	if err != nil {
		m.conns.WithLabelValues("transparent", "error").Inc()
		tp.s.Log.Info("transparent connection starts like TLS but holds no ClientHello", "client", c.RemoteAddr().String(), "dst", dial, "err", err)
		c.Close()
		return
	}
	pc := listen.Prefixed(c, io.MultiReader(bytes.NewReader(hello), c))
	host := sni
	if host == "" {
		host = orig.Addr().Unmap().String()
	}
	// Intercepted when a tool may match the server name or the address the
	// connection really goes to, both in canonical form (canonical.go).
	sh, sp, okName := canonConnect(context.Background(), st.Cfg, net.JoinHostPort(host, port))
	ah, ap, okAddr := canonConnect(context.Background(), st.Cfg, dial)
	if !okName || !okAddr {
		m.conns.WithLabelValues("transparent", "refused").Inc()
		tp.s.Log.Info("transparent connection refused: its server name or address is ambiguous", "client", c.RemoteAddr().String(), "dst", dial)
		c.Close()
		return
	}
	if conf.HasRoutes(st.Cfg.Compiled, sh, sp) || conf.HasRoutes(st.Cfg.Compiled, ah, ap) || st.Cfg.Unmatched == conf.UnmatchedDeny {
		tp.s.mitm.ServeTLS(pc, host, &listen.Target{Scheme: "https", Authority: conf.JoinAuthority(host, port, "443"), Dial: dial, Kind: "transparent"})
		return
	}
	c.SetReadDeadline(time.Time{})
	tp.tunnel(pc, st, st.Cfg.Guarded(context.Background(), sh, sp), dial, conf.JoinAuthority(host, port, "443"))
}

// loop refuses a connection that would loop, loudly: it is a broken
// deployment, not a bad call.
func (tp *transparent) loop(c net.Conn, why string) {
	tp.s.tlsm.loops.Inc()
	tp.s.tlsm.conns.WithLabelValues("transparent", "loop").Inc()
	tp.s.LogLimited(&tp.s.tlsm.loopLog, slog.LevelError, "transparent connection refused: "+errLoop.Error(),
		"why", why, "client", c.RemoteAddr().String())
	c.Close()
}

// tunnel copies a TLS connection to its original destination untouched,
// and records it like a tunnelled CONNECT.
func (tp *transparent) tunnel(c net.Conn, st *pipe.State, ctx context.Context, dial, authority string) {
	ctx, cancel := context.WithTimeout(ctx, listen.HandshakeTimeout)
	up, err := tp.s.dial(ctx, "tcp", dial)
	cancel()
	tp.s.tunnelled(st, "transparent", nil, authority, err)
	if err != nil {
		tp.s.Log.Info("transparent tunnel: dial failed", "dst", dial, "err", err)
		c.Close()
		return
	}
	if !tp.Track(c, up) {
		c.Close()
		up.Close()
		return
	}
	defer tp.Untrack(c, up)
	listen.Splice(c, up)
}
