//go:build linux

package listen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST from linux/netfilter_ipv6/ip6_tables.h.
const ip6tSOOriginalDst = 80

// OriginalDst returns the destination a connection redirected by iptables
// (REDIRECT, DNAT) was addressed to before the redirect: SO_ORIGINAL_DST
// for IPv4, IP6T_SO_ORIGINAL_DST for IPv6. A connection that was not
// redirected reports its own local address.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok { // a capped connection
		c = nc.NetConn()
	}
	sc, ok := c.(syscall.Conn) // *net.TCPConn, or rawconn's
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	v6 := local.Addr().Is6() && !local.Addr().Is4In6()
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		if !v6 {
			// A sockaddr_in fits in the 20 bytes of an ipv6_mreq: family,
			// port (network order), then the address.
			m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			b := m.Multiaddr
			dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
			return
		}
		// A sockaddr_in6 fits in an ip6_mtuinfo.
		m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst)
		if err != nil {
			serr = err
			return
		}
		var p [2]byte
		binary.NativeEndian.PutUint16(p[:], m.Addr.Port)
		dst = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), binary.BigEndian.Uint16(p[:]))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination (SO_ORIGINAL_DST): %w", err)
	}
	return dst, nil
}
