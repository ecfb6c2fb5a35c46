//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package approval

import (
	"context"
	"os"
)

// lockFile does nothing where flock is not available: a use is then
// decided in one step within one process only (docs/approvals.md).
func lockFile(context.Context, *os.File) (func(), error) { return func() {}, nil }
