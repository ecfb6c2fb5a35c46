package config

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/wasm"
)

// WasmEngine is the process's one WASM engine, made when a configuration
// first needs it: every configuration the process loads shares it and its
// compilation cache on disk (TOOLGATE_WASM_CACHE names the folder, "off"
// keeps it in memory; default the user cache folder).
var WasmEngine = sync.OnceValues(func() (*wasm.Engine, error) {
	return wasm.NewEngine(context.Background(), wasm.EngineOptions{CacheDir: os.Getenv("TOOLGATE_WASM_CACHE")})
})

// lazyWasmHost starts the engine on the first WASM policy it loads, so a
// configuration without any starts nothing.
type lazyWasmHost struct{}

var _ policies.WasmHost = lazyWasmHost{}

func (lazyWasmHost) host() (wasm.Host, error) {
	e, err := WasmEngine()
	if err != nil {
		return wasm.Host{}, fmt.Errorf("the WASM engine did not start: %w", err)
	}
	// A module's log lines may carry argument values: debug level only.
	return wasm.Host{Engine: e, Log: func(policy, msg string) {
		slog.Debug("wasm policy log", "policy", policy, "msg", msg)
	}}, nil
}

func (l lazyWasmHost) LoadWasm(ctx context.Context, name, path string, o policies.WasmOptions) (policies.Evaluator, error) {
	h, err := l.host()
	if err != nil {
		return nil, err
	}
	return h.LoadWasm(ctx, name, path, o)
}

func (l lazyWasmHost) CompileRego(ctx context.Context, name string, files map[string][]byte, o policies.WasmOptions) (policies.Evaluator, error) {
	h, err := l.host()
	if err != nil {
		return nil, err
	}
	return h.CompileRego(ctx, name, files, o)
}
