//go:build unix && !linux

package chtest

import "syscall"

// sysProcAttr puts the server in its own process group, so Kill and Stop reach
// every process it starts. Only Linux can also tie its life to the test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
