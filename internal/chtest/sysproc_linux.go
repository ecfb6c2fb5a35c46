package chtest

import "syscall"

// sysProcAttr puts the server in its own process group, so Kill and Stop reach
// every process it starts, and has the kernel kill it when the test binary
// dies (a timeout panic, SIGKILL) before any cleanup could run. Strictly,
// Pdeathsig fires when the OS thread that started the server ends; Go ends a
// thread only when a goroutine exits while locked to it, which chtest never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
