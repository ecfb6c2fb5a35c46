package conf

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// Check is the dial guard of a call or tunnel routed as rt.Host: it
// refuses a connection that landed on a loopback tool host under another
// name (landsOnLoopbackTool).
func (rt *egressRoute) Check(remote net.Addr) error {
	if rt.Cfg.landsOnLoopbackTool(rt.Host, rt.port, remote) {
		return fmt.Errorf("%w: %s reached %s", ErrOtherName, rt.Host, remote)
	}
	return nil
}

// RouteCtx is a context carrying the route of a call or tunnel
// (RouteFor): the context and the route in one allocation, where
// context.WithValue would take two, and the route is also the dial guard
// (guard: carried as upstream.WithGuard carries one, without a context of
// its own). Its zero value is for GuardedIn to fill.
type RouteCtx struct {
	context.Context
	rt    egressRoute
	guard bool
}

// Value returns the route for egressRouteKey, the route as the dial guard
// for upstream's guard key when it guards, and the parent's values.
func (c *RouteCtx) Value(key any) any {
	if _, ok := key.(egressRouteKey); ok {
		return &c.rt
	}
	if c.guard && upstream.IsGuardKey(key) {
		return upstream.Guard(&c.rt)
	}
	return c.Context.Value(key)
}

// Wrapped is the context under c, which c ends with (cancelwatch.Wrapper).
func (c *RouteCtx) Wrapped() context.Context { return c.Context }

// Guarded returns ctx carrying the host and port a call or tunnel was
// routed as, for the egress guard (egressDial), and the dial guard when
// tools name a loopback host.
func (c *Config) Guarded(ctx context.Context, host, port string) context.Context {
	return c.GuardedIn(new(RouteCtx), ctx, host, port)
}

// GuardedIn is Guarded, made in rc (a call's own, which it fills once).
func (c *Config) GuardedIn(rc *RouteCtx, ctx context.Context, host, port string) context.Context {
	*rc = RouteCtx{Context: ctx}
	rc.rt.Host, rc.rt.port, rc.rt.Cfg = host, port, c
	rc.guard = len(c.Aliases.loopback) > 0
	return rc
}

// landsOnLoopbackTool is the dial guard: it reports whether a connection
// made for a call routed as host (not a tool host) reached a loopback
// address on a port a loopback tool host covers. Such a call used another
// name (one that resolves to loopback) for a tool's host, and would
// otherwise skip the tool's checks.
func (c *Config) landsOnLoopbackTool(host, port string, remote net.Addr) bool {
	if c.IsToolHost(host) {
		return false
	}
	ta, ok := remote.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return false
	}
	for _, t := range c.Compiled {
		if t.Host != "" && IsLoopback(t.Host) && (t.Port == "" || t.Port == port) {
			return true
		}
	}
	return false
}

// The egress guard (proxy/egress, docs/security.md "Egress: where toolgate
// connects"). Every upstream connection toolgate makes goes through
// Server.dial (upstream.DialerFunc over egressDial): the pipeline's calls
// (tools, pass-through, dry_run, MITM'd and transparent), CONNECT tunnels
// (plain and sniffed), transparent tunnels and MCP fetches. egressDial
// hands the dial to the guard of the snapshot in force, which resolves
// the destination once, refuses it when it is not public and neither a
// tool's host nor listed in egress.allow, and connects only to the
// addresses it checked.

// EgressToolHosts are the hosts the guard never checks: every tool's
// match.host (with its port when it names one; without, every port, as
// routing does) and each reverse listener's upstream host.
func (c *Config) EgressToolHosts() []string {
	var hs []string
	add := func(h, p string) {
		if p != "" {
			hs = append(hs, net.JoinHostPort(h, p))
		} else {
			hs = append(hs, h)
		}
	}
	for _, t := range c.Compiled {
		if t.Host != "" {
			add(t.Host, t.Port)
		}
	}
	for _, r := range c.Listen.Reverse {
		if r.Base == nil {
			continue
		}
		if h, ok := canonical.Host(r.Base.Hostname()); ok {
			p := r.Base.Port()
			if p == "" {
				p = canonical.DefaultPort(r.Base.Scheme)
			}
			add(h, p)
		}
	}
	return hs
}

// egressRoute is the host and port a call or tunnel was routed as, with
// the config that routed it, and the record-mode refusal its dial noted.
type egressRoute struct {
	Host, port string
	Cfg        *Config
	Noted      atomic.Pointer[egress.DeniedError]
}

type egressRouteKey struct{}

// RouteFor returns ctx's route, or nil.
func RouteFor(ctx context.Context) *egressRoute {
	rt, _ := ctx.Value(egressRouteKey{}).(*egressRoute)
	return rt
}

// EgressNoted returns the refusal enforce mode would have made of the
// connection dialled for the call of ctx (mode: record), or nil.
func EgressNoted(ctx context.Context) *egress.DeniedError {
	if rt := RouteFor(ctx); rt != nil {
		return rt.Noted.Load()
	}
	return nil
}

// EgressRoutedAs reports whether a connection to addr made for a call
// routed as host may be exempted as host (see egressDial).
func (c *Config) EgressRoutedAs(ctx context.Context, host, addr string) bool {
	dh, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	dh = strings.ToLower(strings.TrimSuffix(dh, "."))
	if dh == host || !c.IsToolHost(host) {
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
	case IsLoopback(host):
		return a.IsLoopback()
	case isIPLiteral(host):
		return netip.MustParseAddr(host).Unmap() == a
	}
	for _, x := range c.Aliases.addrs(ctx, host) {
		if x.Unmap() == a {
			return true
		}
	}
	return false
}
