//go:build !linux

package proxy

import (
	"errors"
	"net"
	"net/netip"
)

// originalDst needs Linux's SO_ORIGINAL_DST; Config.Validate refuses
// listen.transparent elsewhere, so this is never reached.
func originalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("transparent mode needs Linux (SO_ORIGINAL_DST)")
}
