package proxy

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bucketing"
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

// canon is one call in canonical form.
type canon struct {
	method string
	scheme string
	host   string // canonical host, IPv6 without brackets
	port   string
	// path is the canonical escaped path without a trailing slash ("/" for
	// the root); trailing says the caller's path ended in '/'.
	path     string
	trailing bool
	raw      bool // path is the caller's, untouched: no tool may match the host
}

// authority is host[:port] for a URL, the port left out when it is the
// scheme's default.
func (c *canon) authority() string {
	return joinAuthority(c.host, c.port, defaultPort(c.scheme))
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// canonMethod upper-cases a method.
func canonMethod(m string) string {
	for i := 0; i < len(m); i++ {
		if c := m[i]; c >= 'a' && c <= 'z' {
			return strings.ToUpper(m)
		}
	}
	return m
}

// canonPort returns a port without leading zeros, or the scheme's default
// for "". ok is false for anything but a number from 1 to 65535.
func canonPort(p, scheme string) (string, bool) {
	if p == "" {
		return defaultPort(scheme), true
	}
	if len(p) > 5 {
		p = strings.TrimLeft(p, "0")
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || p[0] == '+' || p[0] == '-' {
		return "", false
	}
	if p[0] == '0' {
		return strconv.Itoa(n), true
	}
	return p, true
}

// canonHost returns a host in canonical form (see above), or ok false when
// it is ambiguous. h may carry brackets.
func canonHost(h string) (string, bool) {
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return canonIPv6(h[1 : len(h)-1])
	}
	if strings.IndexByte(h, ':') >= 0 {
		return canonIPv6(h)
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 || h[len(h)-1] == '.' {
		return "", false // empty, too long, or an empty last label
	}
	lower := false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.':
			if i == 0 || h[i-1] == '.' {
				return "", false // an empty label
			}
		case c >= 'A' && c <= 'Z':
			lower = true
		default:
			return "", false
		}
	}
	if lower {
		h = strings.ToLower(h)
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if !numericLabel(last) {
		return h, true
	}
	a, ok := parseIPv4(h)
	if !ok {
		return "", false
	}
	return a.String(), true
}

// canonIPv6 canonicalises a bracket-less IPv6 literal; an IPv4-mapped one
// becomes IPv4. Zones are refused.
func canonIPv6(s string) (string, bool) {
	if strings.IndexByte(s, '%') >= 0 {
		return "", false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return "", false
	}
	return a.Unmap().String(), true
}

// numericLabel reports whether a label reads as a number (WHATWG URL's
// "ends in a number"): decimal digits, or 0x and hex digits.
func numericLabel(s string) bool {
	if s == "" {
		return false
	}
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		for i := 2; i < len(s); i++ {
			if !isHexDigit(s[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseIPv4 parses IPv4 the way inet_aton and WHATWG URLs do: one to four
// parts, each decimal, octal (leading 0) or hex (0x); the last part fills
// the bytes left.
func parseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		if p == "" || len(p) > 32 {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(4 - i) // bytes the last part fills
		if n >= 1<<(8*rest) {
			return netip.Addr{}, false
		}
		v = v<<(8*rest) | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// isLoopback reports whether a canonical host is a loopback name or address.
func isLoopback(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// canonPath returns an escaped path in canonical form without its trailing
// slash, and whether the path ended in one. ok is false when the path is
// ambiguous (see above).
func canonPath(p string) (path string, trailing, ok bool) {
	if p == "" || p == "/" {
		return "/", false, true
	}
	if p[0] != '/' {
		return "", false, false
	}
	if fastCanonPath(p) {
		if p[len(p)-1] == '/' {
			return p[:len(p)-1], true, true
		}
		return p, false, true
	}
	// out grows by whole segments; a ".." segment truncates it to where
	// the last kept segment started, so the work stays linear in len(p).
	out := make([]byte, 0, len(p)+8)
	var segStart []int // where each kept segment starts in out
	seg := make([]byte, 0, 32)
	flush := func() {
		switch string(seg) {
		case "", ".":
		case "..":
			if n := len(segStart); n > 0 {
				out = out[:segStart[n-1]]
				segStart = segStart[:n-1]
			}
		default:
			segStart = append(segStart, len(out))
			out = append(out, '/')
			out = append(out, seg...)
		}
		seg = seg[:0]
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			flush()
			continue
		case c == '%':
			if i+2 >= len(p) || !isHexDigit(p[i+1]) || !isHexDigit(p[i+2]) {
				return "", false, false
			}
			c = unhex(p[i+1])<<4 | unhex(p[i+2])
			i += 2
			if c == '/' || c == '\\' || c == '%' || c < 0x20 || c == 0x7f {
				return "", false, false
			}
		case c == '\\' || c == ';' || c < 0x20 || c == 0x7f:
			return "", false, false
		}
		if plainInPath(c) {
			seg = append(seg, c)
		} else {
			seg = append(seg, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	trailing = len(seg) == 0 || string(seg) == "." || string(seg) == ".."
	flush()
	if len(out) == 0 {
		return "/", false, true
	}
	return string(out), trailing, true
}

// plainInPath reports whether a byte is written as itself in a canonical
// path: unreserved characters and the sub-delimiters servers decode alike
// (';' excepted: some servers strip what follows it). Everything else is
// percent-encoded.
func plainInPath(c byte) bool {
	if unreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', '=', ':', '@':
		return true
	}
	return false
}

const upperHex = "0123456789ABCDEF"

// fastCanonPath reports whether p (starting with '/') is already canonical
// apart from a possible trailing slash: only unreserved characters and the
// sub-delimiters a path may carry plainly, no empty or dot segments.
func fastCanonPath(p string) bool {
	segLen, dots := 0, 0
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c == '/' {
			if segLen == 0 || segLen == dots && dots <= 2 {
				return false
			}
			segLen, dots = 0, 0
			continue
		}
		switch {
		case c == '.':
			dots++
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '~', c == ':', c == '@', c == '!', c == '$',
			c == '&', c == '\'', c == '(', c == ')', c == '*', c == '+', c == ',', c == '=':
		default:
			return false
		}
		segLen++
	}
	if segLen > 0 && segLen == dots && dots <= 2 {
		return false // a final dot segment
	}
	return true
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
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)

	mu    sync.Mutex
	cache map[string]aliasEntry
}

type aliasEntry struct {
	addrs []netip.Addr
	at    time.Time
}

func newHostAliases(tools []*tool) *hostAliases {
	a := &hostAliases{cache: map[string]aliasEntry{}, lookup: lookupIP}
	seen := map[string]bool{}
	for _, t := range tools {
		if t.host == "" || seen[t.host] {
			continue
		}
		seen[t.host] = true
		switch {
		case isLoopback(t.host):
			a.loopback = append(a.loopback, t.host)
		case !isIPLiteral(t.host):
			a.names = append(a.names, t.host)
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

// place returns the host a canonical call host is routed as: itself, or
// the tool host it is another name of. ok is false when it could be more
// than one tool host.
func (a *hostAliases) place(ctx context.Context, h string, isToolHost func(string) bool) (string, bool) {
	if isToolHost(h) {
		return h, true
	}
	if isLoopback(h) {
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
	got, _ := a.lookup(lctx, name)
	a.mu.Lock()
	a.cache[name] = aliasEntry{addrs: got, at: time.Now()}
	a.mu.Unlock()
	return got
}

// canonicalize puts a call to u in canonical form. It returns a refusal
// (validation/ambiguous_request) when the call has no one canonical form
// toolgate can route: an ambiguous host, port or, on a host a tool may
// match, path. On a host no tool may match, the path goes upstream as the
// caller wrote it.
func (c *Config) canonicalize(ctx context.Context, method string, u *url.URL) (canon, *refusal) {
	cn := canon{method: canonMethod(method), scheme: strings.ToLower(u.Scheme)}
	host, ok := canonHost(u.Hostname())
	if !ok {
		return cn, ambiguous("the host is not a name or IP address toolgate can read unambiguously")
	}
	if cn.port, ok = canonPort(u.Port(), cn.scheme); !ok {
		return cn, ambiguous("the port is not a number from 1 to 65535")
	}
	if cn.host, ok = c.aliases.place(ctx, host, c.isToolHost); !ok {
		return cn, ambiguous("the host " + host + " is another name of more than one host that tools name")
	}
	if !hasRoutes(c.tools, cn.host, cn.port) {
		cn.path = u.EscapedPath()
		if cn.path == "" {
			cn.path = "/"
		}
		cn.raw = true
		return cn, nil
	}
	if cn.path, cn.trailing, ok = canonPath(u.EscapedPath()); !ok {
		return cn, ambiguous("the path has an encoding upstreams read differently (an encoded '/', '\\\\' or '%', a ';', a control character or a broken escape)")
	}
	return cn, nil
}

func ambiguous(why string) *refusal {
	return refuse(bucketing.CodeValidation, bucketing.ReasonAmbiguousRequest, "Call refused: "+why+"; send it in plain form", nil)
}

// url returns the URL that goes upstream for the call: the canonical form,
// with a trailing slash when the matched tool's template has one (when no
// tool matched: when the caller's path had one), and the caller's query.
func (c *canon) url(t *tool, rawQuery string) *url.URL {
	u := &url.URL{Scheme: c.scheme, Host: c.authority(), RawQuery: rawQuery}
	p := c.path
	if !c.raw && p != "/" && ((t != nil && t.tmpl.trailing) || (t == nil && c.trailing)) {
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
