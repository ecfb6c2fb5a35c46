package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Resolver looks up a host's addresses. *net.Resolver satisfies it;
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to an address, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options are what a Guard needs besides its configuration.
type Options struct {
	// ToolHosts are the hosts tools name, each "host" (every port) or
	// "host:port" ("[::1]:8080" for IPv6), in the canonical form calls
	// are routed in. A destination whose host is one of them is never
	// checked, a loopback tool host included: the tool's own checks
	// govern its calls, and such a host is dialled by name as before.
	ToolHosts []string
	// Resolver resolves destinations. Default: net.DefaultResolver.
	Resolver Resolver
	// Dial makes the connection to a checked address (always an IP
	// address and port) or, for a tool host (and, in record mode, a host
	// the guard would refuse unresolved), to the address as given.
	// Default: a net.Dialer's DialContext.
	Dial DialFunc
	// Report, when set, is called in record mode with each refusal enforce
	// would have made, before the dial goes ahead.
	Report func(ctx context.Context, d *DeniedError)
}

// Guard checks destinations and dials only the addresses it checked. It
// is safe for concurrent use, and immutable once made.
type Guard struct {
	record  bool
	timeout time.Duration
	allow   *allowList
	tools   *allowList
	res     Resolver
	dial    DialFunc
	report  func(context.Context, *DeniedError)
}

// New returns the guard of a validated configuration.
func New(c *Config, o Options) (*Guard, error) {
	if c == nil || !c.validated {
		return nil, errNotValidated
	}
	tools, err := parseAllow(o.ToolHosts, "tool host")
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	if len(tools.prefixes) > 0 || len(tools.wild) > 0 {
		// An IP tool host is matched by the host a call names, as names
		// are; no tool host is a prefix or a wildcard.
		for _, e := range tools.prefixes {
			if e.prefix.Bits() != e.prefix.Addr().BitLen() {
				return nil, fmt.Errorf("egress: tool host %s is a prefix, not a host", e.prefix)
			}
			tools.names[e.prefix.Addr().String()] = append(tools.names[e.prefix.Addr().String()], e.port)
		}
		if len(tools.wild) > 0 {
			return nil, fmt.Errorf("egress: tool host *.%s is a wildcard, not a host", tools.wild[0].name)
		}
		tools.prefixes = nil
	}
	g := &Guard{
		record: c.Mode == ModeRecord, timeout: c.LookupTimeout, allow: c.allow, tools: tools,
		res: o.Resolver, dial: o.Dial, report: o.Report,
	}
	if g.res == nil {
		g.res = net.DefaultResolver
	}
	if g.dial == nil {
		g.dial = (&net.Dialer{}).DialContext
	}
	return g, nil
}

// routedKey carries the host a call was routed as (WithRoutedHost).
type routedKey struct{}

// WithRoutedHost returns ctx saying that the connection DialContext makes
// is for a call routed as host, although the address it dials is another
// one (a transparently redirected connection's original destination):
// the tool-host rule looks at host (the tool's checks govern the call);
// egress.allow's names look only at the host dialled, and the addresses
// at the address dialled.
func WithRoutedHost(ctx context.Context, host string) context.Context {
	return context.WithValue(ctx, routedKey{}, host)
}

// Check decides whether toolgate may connect to host:port, and returns the
// addresses to connect to, in the resolver's order: a dial must use these
// and resolve nothing again, or a name that answers differently the second
// time (DNS rebinding) reaches what was never checked. A name egress.allow
// lists is resolved the same way, and its addresses are not classified.
// Check returns nil addresses and no error for a host that tools name
// (dial it as given, as before the guard), and a *DeniedError (errors.Is
// ErrDenied) when any address is forbidden and not allowed.
//
// Any, not all: a dial falls back from one address to the next, so a name
// that resolves to one public and one private address reaches the private
// one as soon as the public one fails (or is made to fail), and an
// attacker who controls the name controls both.
//
// A host that is neither an IP address in standard form nor a plain DNS
// name (0x7f.1, 017700000001, 127.1, a space, a zone) is refused
// unresolved as ClassAmbiguous: the OS resolver would read some of those
// as IPv4 addresses, and the guard must never be looser than it.
// Resolution is bounded by ctx and LookupTimeout.
func (g *Guard) Check(ctx context.Context, host, port string) ([]netip.AddrPort, error) {
	return g.check(ctx, "ip", host, port)
}

func (g *Guard) check(ctx context.Context, network, host, port string) ([]netip.AddrPort, error) {
	p, ok := parsePort(port)
	if !ok {
		return nil, fmt.Errorf("egress: destination %s: the port is not a number from 1 to 65535", net.JoinHostPort(printable(host), printable(port)))
	}
	key, class := hostKey(host)
	if class == ClassAmbiguous {
		// Refused even under a tool host's routed name: what the dialler
		// would make of the string depends on the OS resolver.
		if err := g.deny(ctx, &DeniedError{Host: printable(host), Port: port, Class: ClassAmbiguous}); err != nil {
			return nil, err
		}
		return nil, nil // record mode: dialled as given, as before the guard
	}
	named := key
	if rh, ok := ctx.Value(routedKey{}).(string); ok && rh != "" {
		named, _ = hostKey(rh)
	}
	if named != "" && g.tools.hasName(named, p) {
		return nil, nil
	}
	// An allowed name counts only when it is what is dialled: a routed
	// host comes from the caller's Host header or SNI, and would
	// otherwise let any address through under an allowed name.
	allowed := class == "" && g.allow.hasName(key, p)
	var addrs []netip.Addr
	if class == "" { // a name
		lctx, cancel := context.WithTimeout(ctx, g.timeout)
		got, err := g.res.LookupNetIP(lctx, network, key)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("egress: look up %s: %w", key, err)
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("egress: look up %s: no addresses", key)
		}
		addrs = got
	} else { // an IP address
		a, _ := netip.ParseAddr(trimBrackets(host))
		addrs = []netip.Addr{a}
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	denied := false
	for _, a := range addrs {
		if c := Classify(a); c.Forbidden() && !allowed && !g.allow.hasAddr(a, p) && !denied {
			if err := g.deny(ctx, &DeniedError{Host: key, Port: port, Class: c, Addr: a.WithZone("").Unmap()}); err != nil {
				return nil, err
			}
			denied = true // record mode reports a destination once
		}
		out = append(out, netip.AddrPortFrom(a.Unmap(), p))
	}
	return out, nil
}

// deny returns d in enforce mode; in record mode it reports d and returns
// nil.
func (g *Guard) deny(ctx context.Context, d *DeniedError) error {
	if !g.record {
		return d
	}
	if g.report != nil {
		g.report(ctx, d)
	}
	return nil
}

// printable is a host that could not be read, fit for a log line or an
// envelope: at most 253 bytes, every byte outside printable ASCII (and
// every space) written as '?'.
func printable(h string) string {
	if len(h) > 253 {
		h = h[:253]
	}
	b := []byte(h)
	for i, c := range b {
		if c <= ' ' || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

func trimBrackets(h string) string {
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// DialContext checks addr (host:port) and connects to the addresses Check
// returned, at most MaxDialAddrs of them, never resolving the name again.
// As net.Dialer does for "tcp", the addresses of the first one's family
// are tried in order, and the other family's (in order) start
// FallbackDelay later, or at once when the first family has failed
// (Happy Eyeballs, RFC 6555); the first connection made wins. Within one
// family each address gets a share of the time ctx has left. When all
// fail, the first family's first error is returned. A host that tools
// name is dialled as given. network is tcp, tcp4 or tcp6.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var rnet string
	switch network {
	case "tcp":
		rnet = "ip"
	case "tcp4":
		rnet = "ip4"
	case "tcp6":
		rnet = "ip6"
	default:
		return nil, fmt.Errorf("egress: dial %s %s: only tcp is guarded", network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: %w", addr, err)
	}
	addrs, err := g.check(ctx, rnet, host, port)
	if err != nil {
		return nil, err
	}
	if addrs == nil {
		return g.dial(ctx, network, addr)
	}
	if len(addrs) > MaxDialAddrs {
		addrs = addrs[:MaxDialAddrs]
	}
	return g.dialParallel(ctx, network, addrs)
}
