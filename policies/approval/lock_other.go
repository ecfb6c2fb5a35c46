//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package approval

import "os"

// lockFile does nothing where flock is not available: a use is then
// decided in one step within one process only (docs/approvals.md).
func lockFile(*os.File) (func(), error) { return func() {}, nil }

// fileLocking says whether lockFile locks across processes here.
const fileLocking = false
