//go:build unix && !linux

package upstream

import "syscall"

// peekOne peeks at the socket fd without waiting.
func peekOne(fd uintptr, b []byte) error {
	_, _, err := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err
}

// canSkipPeek is false here: without the acknowledged byte count
// (unacked), a call on a connection upstream closed while idle could not
// be told from one upstream received, so every pooled connection is peeked.
const canSkipPeek = false

func (*peeker) unacked(int64) bool { return false }
