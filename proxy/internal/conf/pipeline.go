package conf

import (
	"context"
	"fmt"
	"net"

	"github.com/toolgate/toolgate/proxy/upstream"
)

// routed is the dial guard of a call or tunnel: the host it was routed
// as, and the config whose tools the guard checks.
type routed struct {
	host, port string
	cfg        *Config // whose tools the guard checks
}

// Check refuses a connection that landed on a loopback tool host under
// another name (landsOnLoopbackTool).
func (rt routed) Check(remote net.Addr) error {
	if rt.cfg.landsOnLoopbackTool(rt.host, rt.port, remote) {
		return fmt.Errorf("%w: %s reached %s", ErrOtherName, rt.host, remote)
	}
	return nil
}

// guarded returns ctx carrying the host and port a call or tunnel was
// routed as, for the egress guard (egressDial), and the dial guard when
// tools name a loopback host.
func (c *Config) Guarded(ctx context.Context, host, port string) context.Context {
	ctx = context.WithValue(ctx, egressRouteKey{}, &egressRoute{Host: host, port: port, Cfg: c})
	if len(c.Aliases.loopback) == 0 {
		return ctx
	}
	return upstream.WithGuard(ctx, routed{host: host, port: port, cfg: c})
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
