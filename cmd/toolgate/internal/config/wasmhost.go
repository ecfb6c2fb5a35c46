package config

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/wasm"
)

// wasmEngines are the process's WASM engines, one per compilation cache
// folder (policies.wasm_cache), each made when a configuration first needs
// it and shared by every configuration the process loads with that folder.
var wasmEngines struct {
	sync.Mutex
	byCache map[string]*wasm.Engine
}

// WasmEngine returns the process's WASM engine whose compilation cache is
// in cacheDir ("" the user cache folder, "off" none: see
// wasm.EngineOptions.CacheDir), starting it on first use.
func WasmEngine(cacheDir string) (*wasm.Engine, error) {
	wasmEngines.Lock()
	defer wasmEngines.Unlock()
	if e, ok := wasmEngines.byCache[cacheDir]; ok {
		return e, nil
	}
	e, err := wasm.NewEngine(context.Background(), wasm.EngineOptions{CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	if wasmEngines.byCache == nil {
		wasmEngines.byCache = map[string]*wasm.Engine{}
	}
	wasmEngines.byCache[cacheDir] = e
	return e, nil
}

// lazyWasmHost starts the engine on the first WASM policy it loads, so a
// configuration without any starts nothing.
type lazyWasmHost struct {
	cacheDir string // policies.wasm_cache, resolved
}

var _ policies.WasmHost = lazyWasmHost{}

func (l lazyWasmHost) host() (wasm.Host, error) {
	e, err := WasmEngine(l.cacheDir)
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
