package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"

	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// newGuard builds the egress guard of a validated config: its tool hosts
// and egress section, dialling with d.
func (s *Server) newGuard(cfg *conf.Config) (*egress.Guard, error) {
	return egress.New(&cfg.Egress, egress.Options{
		ToolHosts: cfg.EgressToolHosts(),
		Resolver:  s.egressResolver,
		Dial:      s.netDial,
		Report:    s.egressRecorded,
	})
}

// egressRecorded is the guard's record-mode report: the call's event
// notes it (dispatch), and the operator's log says it once a second.
func (s *Server) egressRecorded(ctx context.Context, d *egress.DeniedError) {
	if rt := conf.RouteFor(ctx); rt != nil {
		rt.Noted.CompareAndSwap(nil, d)
	}
	s.LogLimited(&s.egressLog, slog.LevelInfo, "egress would be refused (egress.mode: record): connecting anyway",
		"host", d.Host, "port", d.Port, "class", string(d.Class), "addr", d.Addr.String())
}

// egressDial is the dial under upstream.DialerFunc: the guard of the
// snapshot in force checks addr and connects to what it checked.
//
// The tool-host exemption looks at the host the call was routed as. When
// the connection goes elsewhere than that host (a transparently redirected
// connection's original destination, or a sniffed CONNECT's address, for
// a call routed by its Host header or SNI) the routed name counts only if
// the address dialled is one of that tool host's own (a loopback address
// for a loopback tool host, the address of an IP tool host, or one a
// named tool host resolves to): otherwise a Host header or SNI naming a
// tool would carry the call to any address, a metadata one included.
func (s *Server) egressDial(ctx context.Context, network, addr string) (net.Conn, error) {
	st := s.state.Load()
	if st == nil || st.Guard == nil {
		return s.netDial(ctx, network, addr)
	}
	if rt := conf.RouteFor(ctx); rt != nil && rt.Cfg.EgressRoutedAs(ctx, rt.Host, addr) {
		ctx = egress.WithRoutedHost(ctx, rt.Host)
	}
	c, err := st.Guard.DialContext(ctx, network, addr)
	if de := (*egress.DeniedError)(nil); errors.As(err, &de) {
		s.LogLimited(&s.egressLog, slog.LevelInfo, "egress refused", "host", de.Host, "port", de.Port,
			"class", string(de.Class), "addr", de.Addr.String())
	}
	return c, err
}

// resolvingDial is dial with names resolved by r (Options.EgressResolver)
// instead of the system resolver: the first address r gives is dialled.
func resolvingDial(r egress.Resolver, dial upstream.DialFunc) upstream.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h, p, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(h); err == nil {
			return dial(ctx, network, addr)
		}
		as, err := r.LookupNetIP(ctx, "ip", h)
		if err != nil {
			return nil, err
		}
		if len(as) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: h, IsNotFound: true}
		}
		return dial(ctx, network, net.JoinHostPort(as[0].Unmap().String(), p))
	}
}

// egressDialer is the upstream dialer of a Server: the guard, then loop
// registration (upstream.DialerFunc).
func (s *Server) egressDialer() upstream.DialFunc {
	return upstream.DialerFunc(s.egressDial, &s.own)
}
