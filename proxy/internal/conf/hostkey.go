package conf

import (
	"fmt"
	"net"
	"strings"

	"github.com/toolgate/toolgate/proxy/canonical"
)

// Upstream keys. Limits that count calls per upstream (budgets.upstreams)
// name the upstream in the configuration; calls reach it under whatever
// spelling their caller chose. Both go through one function, upstreamKey,
// after the canonical form of canonical.go, so that every spelling a call
// can take of one upstream finds the one configured entry:
//
//   - the host in canonical form (canonical.Host): case, a trailing dot, IPv4
//     in any spelling a resolver accepts (127.1, 0x7f000001), IPv4-mapped
//     IPv6, brackets;
//   - loopback hosts (localhost, names under .localhost, 127.0.0.0/8,
//     ::1) as one host, "localhost", as canonical.go routes them;
//   - the port without leading zeros. An entry that names no port applies
//     to calls on their scheme's default port (80 for http, 443 for
//     https); one that names a port applies to calls on that port, so
//     "api.example.com:443" and "api.example.com" both apply to
//     https://api.example.com/.
//
// An IP literal in the configuration names calls made to that literal; a
// call to an address that a tool's host name resolves to is routed, and
// counted, as that name (canonical.go's hostAliases), so an upstream a tool
// names by name is configured by that name.

// loopbackKey is every loopback host's key.
const loopbackKey = "localhost"

// hostPortKey is the key of a canonical host and port ("" for none).
func hostPortKey(host, port string) string {
	host = upstreamHost(host)
	if port == "" {
		if strings.IndexByte(host, ':') >= 0 {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// UpstreamKey returns the key of an upstream the configuration names:
// "host" or "host:port" (IPv6 in brackets), read as match.host is. Calls
// are keyed by the same rules (see above), so equal keys name one
// upstream. It returns an error for anything but a host with an optional
// port.
func UpstreamKey(hostport string) (string, error) {
	if hostport == "" {
		return "", fmt.Errorf("required: a host name or IP address, with an optional port")
	}
	h, p, err := parseHostField(hostport)
	if err != nil {
		return "", err
	}
	return hostPortKey(h, p), nil
}

// upstreamHost is the host part of an upstream key: a canonical host,
// every loopback host as loopbackKey. It allocates nothing.
func upstreamHost(host string) string {
	if host == loopbackKey || strings.HasSuffix(host, ".localhost") {
		return loopbackKey
	}
	// Only an IP literal can be another loopback host; ParseAddr is left
	// out for names (its error allocates).
	if host != "" && (host[0] >= '0' && host[0] <= '9' || strings.IndexByte(host, ':') >= 0) && IsLoopback(host) {
		return loopbackKey
	}
	return host
}

// ToolUpstream is the host part of the upstream key of t's calls (as
// SetUpstream writes it), or "" when t names no host.
func ToolUpstream(t *Tool) string {
	if t.Host == "" {
		return ""
	}
	return upstreamHost(t.Host)
}

// SetUpstream fills a budget call's upstream from the call's canonical
// form: the host part of its key (IPv6 without brackets), its port, and
// whether that port is its scheme's default. It allocates nothing.
func SetUpstream(b *BudgetCall, cn *Canon) {
	b.Upstream, b.UpstreamPort, b.UpstreamDefaultPort = upstreamHost(cn.Host), cn.Port, cn.Port == canonical.DefaultPort(cn.Scheme)
}
