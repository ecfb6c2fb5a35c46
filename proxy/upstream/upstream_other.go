//go:build !unix

package upstream

import "net"

// peeker cannot peek on this platform: a connection upstream closed is
// found when a call uses it (and sent again as Transport says).
type peeker struct{}

func newPeeker(net.Conn) *peeker { return &peeker{} }

func (*peeker) ok() bool { return true }

// canSkipPeek is false: there is no peek to skip.
const canSkipPeek = false

func (*peeker) unacked(int64) bool { return false }
