//go:build !linux

package listen

import (
	"errors"
	"net"
	"net/netip"
)

// OriginalDst needs Linux's SO_ORIGINAL_DST; Config.Validate refuses
// listen.transparent elsewhere, so this is never reached.
func OriginalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("transparent mode needs Linux (SO_ORIGINAL_DST)")
}
