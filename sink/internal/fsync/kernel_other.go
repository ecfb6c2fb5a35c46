//go:build !(linux && (amd64 || arm64))

package fsync

import (
	"errors"
	"os"
)

// kernel is not available here: Syncs block in (*os.File).Sync.
type kernel struct{}

func newKernel() (*kernel, error) {
	return nil, errors.New("no asynchronous fsync on this system")
}

func (*kernel) sync(*os.File) (bool, error) { return false, nil }

func (*kernel) close() error { return nil }
