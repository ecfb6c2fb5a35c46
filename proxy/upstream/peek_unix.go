//go:build unix && !linux

package upstream

import "syscall"

// peekOne peeks at the socket fd without waiting.
func peekOne(fd uintptr, b []byte) error {
	_, _, err := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err
}
