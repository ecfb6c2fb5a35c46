package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// The egress guard (proxy/egress, docs/security.md "Egress: where toolgate
// connects"). Every upstream connection toolgate makes goes through
// Server.dial (upstream.DialerFunc over egressDial): the pipeline's calls
// (tools, pass-through, dry_run, MITM'd and transparent), CONNECT tunnels
// (plain and sniffed), transparent tunnels and MCP fetches. egressDial
// hands the dial to the guard of the snapshot in force, which resolves
// the destination once, refuses it when it is not public and neither a
// tool's host nor listed in egress.allow, and connects only to the
// addresses it checked.

// egressToolHosts are the hosts the guard never checks: every tool's
// match.host (with its port when it names one; without, every port, as
// routing does) and each reverse listener's upstream host.
func (c *Config) egressToolHosts() []string {
	var hs []string
	add := func(h, p string) {
		if p != "" {
			hs = append(hs, net.JoinHostPort(h, p))
		} else {
			hs = append(hs, h)
		}
	}
	for _, t := range c.compiled {
		if t.host != "" {
			add(t.host, t.port)
		}
	}
	for _, r := range c.Listen.Reverse {
		if r.base == nil {
			continue
		}
		if h, ok := canonical.Host(r.base.Hostname()); ok {
			p := r.base.Port()
			if p == "" {
				p = canonical.DefaultPort(r.base.Scheme)
			}
			add(h, p)
		}
	}
	return hs
}

// newGuard builds the egress guard of a validated config: its tool hosts
// and egress section, dialling with d.
func (s *Server) newGuard(cfg *Config) (*egress.Guard, error) {
	return egress.New(&cfg.Egress, egress.Options{
		ToolHosts: cfg.egressToolHosts(),
		Resolver:  s.egressResolver,
		Dial:      s.netDial,
		Report:    s.egressRecorded,
	})
}

// egressRoute is the host and port a call or tunnel was routed as, with
// the config that routed it, and the record-mode refusal its dial noted.
type egressRoute struct {
	host, port string
	cfg        *Config
	noted      atomic.Pointer[egress.DeniedError]
}

type egressRouteKey struct{}

// routeFor returns ctx's route, or nil.
func routeFor(ctx context.Context) *egressRoute {
	rt, _ := ctx.Value(egressRouteKey{}).(*egressRoute)
	return rt
}

// egressNoted returns the refusal enforce mode would have made of the
// connection dialled for the call of ctx (mode: record), or nil.
func egressNoted(ctx context.Context) *egress.DeniedError {
	if rt := routeFor(ctx); rt != nil {
		return rt.noted.Load()
	}
	return nil
}

// egressRecorded is the guard's record-mode report: the call's event
// notes it (dispatch), and the operator's log says it once a second.
func (s *Server) egressRecorded(ctx context.Context, d *egress.DeniedError) {
	if rt := routeFor(ctx); rt != nil {
		rt.noted.CompareAndSwap(nil, d)
	}
	s.logLimited(&s.egressLog, slog.LevelInfo, "egress would be refused (egress.mode: record): connecting anyway",
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
	if st == nil || st.guard == nil {
		return s.netDial(ctx, network, addr)
	}
	if rt := routeFor(ctx); rt != nil && rt.cfg.egressRoutedAs(ctx, rt.host, addr) {
		ctx = egress.WithRoutedHost(ctx, rt.host)
	}
	c, err := st.guard.DialContext(ctx, network, addr)
	if de := (*egress.DeniedError)(nil); errors.As(err, &de) {
		s.logLimited(&s.egressLog, slog.LevelInfo, "egress refused", "host", de.Host, "port", de.Port,
			"class", string(de.Class), "addr", de.Addr.String())
	}
	return c, err
}

// egressRoutedAs reports whether a connection to addr made for a call
// routed as host may be exempted as host (see egressDial).
func (c *Config) egressRoutedAs(ctx context.Context, host, addr string) bool {
	dh, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	dh = strings.ToLower(strings.TrimSuffix(dh, "."))
	if dh == host || !c.isToolHost(host) {
		return dh == host
	}
	a, err := netip.ParseAddr(dh)
	if err != nil {
		return false // another name: checked as itself
	}
	a = a.Unmap()
	if !egress.Classify(a).Forbidden() {
		return false // public: the guard lets it through anyway
	}
	switch {
	case isLoopback(host):
		return a.IsLoopback()
	case isIPLiteral(host):
		return netip.MustParseAddr(host).Unmap() == a
	}
	for _, x := range c.aliases.addrs(ctx, host) {
		if x.Unmap() == a {
			return true
		}
	}
	return false
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
