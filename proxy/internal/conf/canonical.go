package conf

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/canonical"
)

// The canonical form of a call. Every listener (forward, reverse,
// CONNECT-intercepted, transparent) hands handle a URL; before anything is
// routed, handle puts the call in one canonical form, routes that form, and
// sends exactly that form upstream. The rules (docs/config.md, "Matching"):
//
//   - method: upper-cased ("post" is POST, and POST goes upstream);
//   - scheme: lower-case, http or https;
//   - host: lower-case, one trailing dot dropped, no brackets. An IPv4
//     address in any spelling a resolver accepts (127.1, 0x7f000001,
//     2130706433, 0177.0.0.1) is written dotted-decimal; an IPv4-mapped IPv6
//     address (::ffff:127.0.0.1) is written as IPv4; other IPv6 in RFC 5952
//     form. A host whose last label is a number but which is no valid IPv4
//     address, a zone, or a character outside letters, digits, '-', '.' and
//     '_' is ambiguous and refused;
//   - port: the scheme's default (80, 443) when absent, without leading
//     zeros;
//   - path (for hosts a tool may match): percent-escapes of unreserved
//     characters decoded (%74 is t, %2e is '.'), other escapes written in
//     upper-case hex, dot segments resolved, empty segments ("//") dropped,
//     and a trailing slash dropped for matching. An encoded '/' (%2F), '\'
//     (raw or %5C), '%' (%25, a double encoding), ';' (a path parameter
//     some servers strip), a NUL or other control character, or a broken
//     escape is ambiguous: upstreams disagree on what it means, so the call
//     is refused as validation/ambiguous_request.
//
// Host names. Besides spelling, one host has several names:
//
//   - loopback: "localhost", any name under ".localhost" (RFC 6761),
//     127.0.0.0/8 and ::1 are one host. A call to any of them is routed as
//     the loopback host a tool names (a call that names a tool host exactly
//     keeps it); when tools name two different loopback hosts, a call to a
//     third loopback name cannot be placed and is refused as ambiguous;
//   - an IP-literal call to an address that a named tool host resolves to
//     (the system resolver, cached for aliasTTL) is routed as that tool
//     host, and goes upstream under its name; an address that several tool
//     hosts resolve to is ambiguous and refused. A name that does not
//     resolve claims no address;
//   - other names are taken as they are: a different DNS name for a tool's
//     server (a CNAME, a wildcard DNS service) reaches another virtual host
//     upstream, except on loopback, where the dial guard (dialGuard)
//     refuses a connection that lands on a loopback tool host under a name
//     that was not routed as it.

// Canon is one call in canonical form.
type Canon struct {
	Method string
	Scheme string
	Host   string // canonical host, IPv6 without brackets
	Port   string
	// path is the canonical escaped path without a trailing slash ("/" for
	// the root); trailing says the caller's path ended in '/'.
	Path     string
	trailing bool
	raw      bool // path is the caller's, untouched: no tool may match the host
}

// Authority is host[:port] for a URL, the port left out when it is the
// scheme's default.
func (c *Canon) Authority() string {
	return JoinAuthority(c.Host, c.Port, canonical.DefaultPort(c.Scheme))
}

// authority is Authority, the string made once per tool when the call
// goes to the host and port its match names.
func (c *Canon) authority(t *Tool) string {
	if t != nil && t.hostPort != "" && c.Host == t.Host && c.Port == t.Port && c.Port != canonical.DefaultPort(c.Scheme) {
		return t.hostPort
	}
	return c.Authority()
}

// IsLoopback reports whether a canonical host is a loopback name or address.
func IsLoopback(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// aliasTTL is how long a tool host's resolved addresses are kept.
const aliasTTL = 30 * time.Second

// aliasLookupTimeout bounds one lookup of a tool host's addresses.
const aliasLookupTimeout = 2 * time.Second

// hostAliases maps IP-literal calls to the named tool hosts that resolve
// to them, and places loopback names.
type hostAliases struct {
	loopback []string // distinct loopback tool hosts
	names    []string // named, non-loopback tool hosts, resolved on demand
	Lookup   func(ctx context.Context, host string) ([]netip.Addr, error)

	mu    sync.Mutex
	cache map[string]aliasEntry
}

type aliasEntry struct {
	addrs []netip.Addr
	at    time.Time
}

func newHostAliases(tools []*Tool) *hostAliases {
	a := &hostAliases{cache: map[string]aliasEntry{}, Lookup: lookupIP}
	seen := map[string]bool{}
	for _, t := range tools {
		if t.Host == "" || seen[t.Host] {
			continue
		}
		seen[t.Host] = true
		switch {
		case IsLoopback(t.Host):
			a.loopback = append(a.loopback, t.Host)
		case !isIPLiteral(t.Host):
			a.names = append(a.names, t.Host)
		}
	}
	return a
}

// lookupIP resolves a host with the system resolver.
func lookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func isIPLiteral(h string) bool {
	_, err := netip.ParseAddr(h)
	return err == nil
}

// Place returns the host a canonical call host is routed as: itself, or
// the tool host it is another name of. ok is false when it could be more
// than one tool host.
func (a *hostAliases) Place(ctx context.Context, h string, isToolHost func(string) bool) (string, bool) {
	if isToolHost(h) {
		return h, true
	}
	if IsLoopback(h) {
		switch len(a.loopback) {
		case 0:
			return h, true
		case 1:
			return a.loopback[0], true
		}
		return "", false
	}
	if len(a.names) == 0 {
		return h, true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return h, true
	}
	found := ""
	for _, n := range a.names {
		for _, x := range a.addrs(ctx, n) {
			if x.Unmap() == ip {
				if found != "" && found != n {
					return "", false
				}
				found = n
			}
		}
	}
	if found == "" {
		return h, true
	}
	return found, true
}

// addrs returns a tool host's addresses, from the cache when fresh. A
// failed lookup is cached as no addresses.
func (a *hostAliases) addrs(ctx context.Context, name string) []netip.Addr {
	a.mu.Lock()
	e, ok := a.cache[name]
	a.mu.Unlock()
	if ok && time.Since(e.at) < aliasTTL {
		return e.addrs
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), aliasLookupTimeout)
	defer cancel()
	got, _ := a.Lookup(lctx, name)
	a.mu.Lock()
	a.cache[name] = aliasEntry{addrs: got, at: time.Now()}
	a.mu.Unlock()
	return got
}

// Canonicalize puts a call to u in canonical form. It returns a refusal
// (validation/ambiguous_request) when the call has no one canonical form
// toolgate can route: an ambiguous host, port or, on a host a tool may
// match, path. On a host no tool may match, the path goes upstream as the
// caller wrote it.
func (c *Config) Canonicalize(ctx context.Context, method string, u *url.URL) (Canon, *Refusal) {
	cn := Canon{Method: canonical.Method(method), Scheme: strings.ToLower(u.Scheme)}
	host, ok := canonical.Host(u.Hostname())
	if !ok {
		return cn, Ambiguous("the host is not a name or IP address toolgate can read unambiguously")
	}
	if cn.Port, ok = canonical.Port(u.Port(), cn.Scheme); !ok {
		return cn, Ambiguous("the port is not a number from 1 to 65535")
	}
	if cn.Host, ok = c.Aliases.Place(ctx, host, c.IsToolHost); !ok {
		return cn, Ambiguous("the host " + host + " is another name of more than one host that tools name")
	}
	if !HasRoutes(c.Compiled, cn.Host, cn.Port) {
		cn.Path = u.EscapedPath()
		if cn.Path == "" {
			cn.Path = "/"
		}
		cn.raw = true
		return cn, nil
	}
	if cn.Path, cn.trailing, ok = canonical.Path(u.EscapedPath()); !ok {
		return cn, Ambiguous("the path has an encoding upstreams read differently (an encoded '/', '\\\\' or '%', a ';', a control character or a broken escape)")
	}
	return cn, nil
}

func Ambiguous(why string) *Refusal {
	return Refuse(bucketing.CodeValidation, bucketing.ReasonAmbiguousRequest, "Call refused: "+why+"; send it in plain form", nil)
}

// URL returns the URL that goes upstream for the call: the canonical form,
// with a trailing slash when the matched tool's template has one (when no
// tool matched: when the caller's path had one), and the caller's query.
func (c *Canon) URL(t *Tool, rawQuery string) *url.URL {
	return c.URLInto(new(url.URL), t, rawQuery)
}

// URLInto is URL, made in u (a call's own, which nothing else holds).
func (c *Canon) URLInto(u *url.URL, t *Tool, rawQuery string) *url.URL {
	*u = url.URL{Scheme: c.Scheme, Host: c.authority(t), RawQuery: rawQuery}
	p := c.Path
	if !c.raw && p != "/" && ((t != nil && t.Tmpl.trailing) || (t == nil && c.trailing)) {
		p += "/"
	}
	// RawPath keeps the exact spelling (Go would otherwise re-escape, say,
	// '!' as %21); EscapedPath, which the request line is written from,
	// uses it because it is a valid encoding of Path.
	u.Path, u.RawPath = p, p
	if up, err := url.PathUnescape(p); err == nil {
		u.Path = up
	}
	return u
}
