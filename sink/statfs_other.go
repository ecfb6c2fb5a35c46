//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sink

import "errors"

// freeBytes is not known here: the free-space watermark is not checked,
// and a Probe finds room.
func freeBytes(string) (uint64, error) { return 0, errors.ErrUnsupported }
