package sink

import (
	"bytes"
	"os"
	"strconv"
)

// maxLockPIDBytes bounds what is read of a spool's lock file: a pid and a
// line end, with room to spare.
const maxLockPIDBytes = 32

// writeLockPID records this process's pid in the lock file f, which it
// holds: "1234\n". It is a hint for the message of a process refused the
// lock (lockHolder), never part of the lock itself, so failing to write it
// (a full disk, which the spool is there to ride out) is ignored.
func writeLockPID(f *os.File) {
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
}

// lockHolder names the process holding the lock file f, as its pid there
// says: "another toolgate process (pid 1234)", "this process (pid 1234)
// itself" or, with no pid recorded (yet), "another toolgate process".
func lockHolder(f *os.File) string {
	buf := make([]byte, maxLockPIDBytes)
	n, _ := f.ReadAt(buf, 0)
	pid, ok := parseLockPID(buf[:n])
	switch {
	case !ok:
		return "another toolgate process"
	case pid == os.Getpid():
		return "this process (pid " + strconv.Itoa(pid) + ") itself"
	}
	return "another toolgate process (pid " + strconv.Itoa(pid) + ")"
}

// parseLockPID reads the pid writeLockPID wrote: decimal digits without
// a leading zero, and a line end. Anything else (an empty file, an older
// toolgate's, a torn write) is no pid.
func parseLockPID(b []byte) (int, bool) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 || len(b) > 10 || b[0] == '0' {
		return 0, false
	}
	pid := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, pid > 0
}
