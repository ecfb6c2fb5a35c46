// Package opacli gives tests the real opa command line, built from the
// OPA module version toolgate's go.mod pins, so bundles in tests are built
// and signed as users build and sign them; Path gives it to programs that
// are not tests (the external benchmark's nginx + OPA peer). The binary is built once per
// machine with `go install github.com/open-policy-agent/opa@VERSION`
// (OPA's own go.mod, the module cache; nothing enters toolgate's go.mod)
// into the user cache folder, toolgate/opa-VERSION/opa, and reused.
package opacli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// module is the OPA module whose CLI is built.
const module = "github.com/open-policy-agent/opa"

var (
	once    sync.Once
	binary  string
	version string
	err     error
)

// Version is the pinned OPA version: as this binary was built with it when
// it links OPA, otherwise as `go list -m` reads it from the go.mod of the
// working directory's module.
func Version() (string, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", fmt.Errorf("no build information in this binary")
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			if d.Replace != nil {
				return d.Replace.Version, nil
			}
			return d.Version, nil
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", module).Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v, nil
	}
	return "", fmt.Errorf("this binary does not link %s and `go list -m %s` in the working directory found no version (%v)", module, module, err)
}

// Binary returns the path of the opa binary, building it first when the
// cache does not hold it (minutes, once). It fails t when it cannot.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := Path()
	if err != nil {
		t.Fatalf("the opa CLI: %v", err)
	}
	return bin
}

// Path returns the path of the opa binary, building it first when the
// cache does not hold it (minutes, once per machine), or why it cannot.
func Path() (string, error) {
	once.Do(func() { binary, err = build() })
	return binary, err
}

func build() (string, error) {
	if version, err = Version(); err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "toolgate", "opa-"+version)
	bin := filepath.Join(dir, "opa")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Build beside, then rename: a concurrent test process sees the old
	// state or a whole binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", module+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", module, version, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "opa"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Run runs opa with args in dir and returns its combined output; it fails
// t when opa exits with an error.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Try(t, dir, args...)
	if err != nil {
		t.Fatalf("opa %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Try runs opa with args in dir and returns its combined output and error.
func Try(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
