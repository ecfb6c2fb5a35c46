// Command genfixtures compiles the Rego fixtures of package wasm to OPA
// WASM modules with wasm.CompileRego; `make wasm-fixtures` runs it.
//
//	go run ./wasm/internal/genfixtures policies/testdata/bench wasm/testdata/bench_rego.wasm
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/wasm"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genfixtures <rego dir> <out.wasm>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "genfixtures:", err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".rego") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		files[e.Name()] = b
	}
	mod, err := wasm.CompileRego(context.Background(), files)
	if err != nil {
		return err
	}
	return os.WriteFile(out, mod, 0o644)
}
