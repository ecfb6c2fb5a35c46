//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sidecar

import "errors"

// raiseNoFile has no descriptor limit to read here.
func raiseNoFile() (int, bool, error) { return 0, false, errors.ErrUnsupported }
