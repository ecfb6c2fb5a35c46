package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestReadmeInstall checks README.md's install lines, which the doc test
// cannot run (they fetch over the network), against what they rely on:
// `go install MODULE/cmd/toolgate@latest` names this package by the module
// path of go.mod, and works only for a module without replace directives
// (go install refuses those) at the Go version README says; the clone's
// `make build` writes the binary the PATH line adds.
func TestReadmeInstall(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	module := mf.Module.Mod.Path
	if want := "go install " + module + "/cmd/toolgate@latest"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md lacks %q", want)
	}
	if len(mf.Replace) > 0 {
		t.Errorf("go.mod has replace directives: `go install ...@latest`, as README.md says, refuses such a module")
	}
	if want := "With Go " + mf.Go.Version + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line)", want)
	}
	if want := "git clone https://" + module + " "; !strings.Contains(string(readme), want) {
		t.Errorf("README.md lacks %q", want)
	}

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	bin := regexp.MustCompile(`(?m)^BIN\s*:=\s*(\S+)$`).FindSubmatch(makefile)
	if bin == nil {
		t.Fatal("the Makefile names no BIN")
	}
	if !regexp.MustCompile(`(?m)^build:.*\n\t\$\(GO\) build .*-o \$\(BIN\) \./cmd/toolgate$`).Match(makefile) {
		t.Errorf("the Makefile's build target does not build ./cmd/toolgate into $(BIN)")
	}
	dir, name := filepath.Split(string(bin[1]))
	for _, want := range []string{
		"`make build` writes `" + string(bin[1]) + "`",
		`export PATH="$PWD/` + strings.TrimSuffix(dir, "/") + `:$PATH"`,
	} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md lacks %q (the Makefile's BIN is %s)", want, bin[1])
		}
	}
	if name != "toolgate" {
		t.Errorf("the Makefile's BIN is %s; README.md's commands call toolgate", bin[1])
	}
}

// TestReadmeTestDeps: README.md's `make test` row names every Debian
// package scripts/testdeps.sh installs for the tests.
func TestReadmeTestDeps(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	script, err := os.ReadFile(filepath.Join(root, "scripts", "testdeps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, wanted, ok := strings.Cut(string(script), "\nWANTED=(\n")
	wanted, _, _ = strings.Cut(wanted, "\n)")
	var row string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| `make test` |") {
			row = l
		}
	}
	if !ok || row == "" {
		t.Fatal("no WANTED list in scripts/testdeps.sh, or no `make test` row in README.md")
	}
	n := 0
	for _, l := range strings.Split(wanted, "\n") {
		pkg, _, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		n++
		if !strings.Contains(row, "`"+pkg+"`") {
			t.Errorf("README.md's `make test` row does not name %s, which scripts/testdeps.sh installs", pkg)
		}
	}
	if n < 10 {
		t.Errorf("read %d packages from scripts/testdeps.sh's WANTED; has its form changed?", n)
	}
}
