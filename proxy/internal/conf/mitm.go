package conf

import (
	"net"
	"strings"
)

// joinAuthority is host:port, without the port when it is the scheme's
// default.
func JoinAuthority(host, port, defaultPort string) string {
	if port == "" || port == defaultPort {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// hasRoutes reports whether any tool may match calls to host:port.
func HasRoutes(tools []*Tool, host, port string) bool {
	host = strings.ToLower(strings.Trim(host, "[]"))
	for _, t := range tools {
		if (t.Host == "" || t.Host == host) && (t.Port == "" || t.Port == port) {
			return true
		}
	}
	return false
}
