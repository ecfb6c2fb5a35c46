package testutil

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// ToolgateBinEnv names the toolgate binary `make test` builds once, from
// the same tree, before the packages' tests start. Tests that run the
// sidecar as a process use it rather than each building their own: on a
// clean clone each build compiled toolgate's packages again, and
// packages tested at once compiled them at the same time (docs/performance.md,
// "The test suite's time").
const ToolgateBinEnv = "TOOLGATE_TEST_BIN"

// ToolgateBinary puts a toolgate binary built from the module at root
// into dir, as dir/toolgate (mode 0755), and returns its path: a copy of
// the one ToolgateBinEnv names when it is set, built with `go build`
// otherwise.
func ToolgateBinary(root, dir string) (string, error) {
	dst := filepath.Join(dir, "toolgate")
	if src := os.Getenv(ToolgateBinEnv); src != "" {
		if err := copyExecutable(src, dst); err != nil {
			return "", fmt.Errorf("%s=%s: %w", ToolgateBinEnv, src, err)
		}
		return dst, nil
	}
	build := exec.Command("go", "build", "-o", dst, "./cmd/toolgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return dst, os.Chmod(dst, 0o755)
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
