//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sink

import "os"

// lockSpoolDir opens (or creates) the lock file at path. Where flock is not
// available the directory is not locked: keep one process per spool
// directory by configuration.
func lockSpoolDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, spoolFileMode)
}
