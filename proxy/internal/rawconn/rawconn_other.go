//go:build !linux

package rawconn

import "net"

type rawIO struct{}

// Wrap returns c: raw reads and writes are built for Linux only.
func Wrap(c net.Conn) net.Conn { return c }
