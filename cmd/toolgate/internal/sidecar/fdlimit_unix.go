//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sidecar

import (
	"fmt"
	"math"
	"syscall"
)

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit in force, and whether it was raised.
func raiseNoFile() (int, bool, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false, fmt.Errorf("getrlimit: %w", err)
	}
	raised := false
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			rl, raised = want, true
		}
	}
	if rl.Cur > math.MaxInt32 {
		return math.MaxInt32, raised, nil
	}
	return int(rl.Cur), raised, nil
}
