package wasm

import (
	"os"
	"os/exec"
	"path/filepath"
)

// watToWasm compiles WAT source with wabt's wat2wasm.
func watToWasm(src string) ([]byte, error) {
	bin, err := exec.LookPath("wat2wasm")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wat")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o600); err != nil {
		return nil, err
	}
	if b, err := exec.Command(bin, in, "-o", out).CombinedOutput(); err != nil {
		return nil, &exec.Error{Name: string(b), Err: err}
	}
	return os.ReadFile(out)
}
