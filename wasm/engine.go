package wasm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
)

// Defaults of Options.
const (
	// DefaultMemoryLimit is the memory one instance may use: 16 MiB.
	DefaultMemoryLimit = 16 << 20
	// DefaultPoolSize is how many idle instances a policy keeps: 64. An
	// OPA-compiled instance starts at 128 KiB and its heap is reset after
	// every call.
	DefaultPoolSize = 64
	// DefaultDeadline bounds one evaluation: 10 ms.
	DefaultDeadline = 10 * time.Millisecond
	// instantiateTimeout bounds making a fresh instance (a Go module runs
	// its runtime's initialisation then).
	instantiateTimeout = 2 * time.Second
)

// EngineOptions configure an Engine.
type EngineOptions struct {
	// CacheDir holds wazero's compilation cache on disk, so a module
	// compiled once is not compiled again by the next process. "" means
	// os.UserCacheDir()/toolgate/wazero (no cache when there is no user
	// cache directory); "off" means no disk cache.
	CacheDir string
}

// Engine compiles and runs WASM policies. It is safe for concurrent use.
// Close it to release every policy it loaded.
type Engine struct {
	cache wazero.CompilationCache

	mu       sync.Mutex
	runtimes map[*runtimeRef]struct{}
	closed   bool
	done     atomic.Bool // closed, for calls to read without the lock
}

// runtimeRef is one policy's wazero runtime, closed by Engine.Close or
// once its Policy is unreachable, whichever comes first.
type runtimeRef struct {
	rt   wazero.Runtime
	once sync.Once
}

func (r *runtimeRef) close(ctx context.Context) {
	r.once.Do(func() { _ = r.rt.Close(ctx) })
}

// NewEngine returns an engine with a compilation cache per o.
func NewEngine(ctx context.Context, o EngineOptions) (*Engine, error) {
	e := &Engine{runtimes: map[*runtimeRef]struct{}{}}
	dir := o.CacheDir
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "toolgate", "wazero")
		} else {
			dir = "off"
		}
	}
	if dir == "off" {
		e.cache = wazero.NewCompilationCache()
		return e, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("wasm compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wasm compilation cache: %w", err)
	}
	e.cache = c
	return e, nil
}

// Close releases every policy the engine loaded; their Eval then fails
// with ErrClosed.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.done.Store(true)
	refs := e.runtimes
	e.runtimes = nil
	e.mu.Unlock()
	for r := range refs {
		r.close(ctx)
	}
	return e.cache.Close(ctx)
}

func (e *Engine) track(r *runtimeRef) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.runtimes[r] = struct{}{}
	return nil
}

func (e *Engine) untrack(r *runtimeRef) {
	e.mu.Lock()
	delete(e.runtimes, r)
	e.mu.Unlock()
}

// Options configure one policy.
type Options struct {
	// MemoryLimit is the memory one instance may use, in bytes, rounded
	// down to 64 KiB pages. Default DefaultMemoryLimit (16 MiB). A module
	// that declares a larger minimum or maximum is refused at Load.
	MemoryLimit uint32
	// Deadline bounds one evaluation, on top of the caller's context
	// deadline (the sooner wins). Default DefaultDeadline (10 ms).
	Deadline time.Duration
	// PoolSize is how many idle instances are kept for reuse. Default
	// DefaultPoolSize. More concurrent calls instantiate more; the surplus
	// is closed after use. Size it to the calls in flight, not the CPUs: a
	// goroutine holds its instance while it waits for a CPU, and making an
	// instance costs ten times a decision.
	PoolSize int
	// Log receives the module's log lines (toolgate's log import, OPA's
	// println, a WASI module's stdout and stderr). nil discards them.
	Log func(policy, msg string)
}

func (o Options) withDefaults() (Options, error) {
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.MemoryLimit < pageSize {
		return o, fmt.Errorf("memory limit %d is below one 64 KiB page", o.MemoryLimit)
	}
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline
	}
	if o.PoolSize <= 0 {
		o.PoolSize = DefaultPoolSize
	}
	return o, nil
}

// LoadFile loads a policy from a .wasm module or an OPA bundle (.tar.gz)
// file.
func (e *Engine) LoadFile(ctx context.Context, name, path string, o Options) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wasm policy %q: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wasm policy %q: %w", name, err)
	}
	return e.Load(ctx, name, b, o)
}

// Load compiles a module once and returns its pooled policy. The module
// speaks toolgate's ABI (it exports toolgate_abi_version, toolgate_alloc
// and toolgate_validate) or OPA's (it exports opa_eval); module may also be
// an OPA bundle (.tar.gz) holding /policy.wasm. Load makes one instance
// before returning, so a module that cannot start is refused here, not on
// the first call.
func (e *Engine) Load(ctx context.Context, name string, module []byte, o Options) (*Policy, error) {
	p, err := e.load(ctx, name, module, o)
	if err != nil {
		return nil, fmt.Errorf("wasm policy %q: %w", name, err)
	}
	return p, nil
}

func (e *Engine) load(ctx context.Context, name string, module []byte, o Options) (*Policy, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(module) > maxModuleBytes {
		return nil, fmt.Errorf("module larger than %d MiB", maxModuleBytes>>20)
	}
	if bytes.HasPrefix(module, []byte{0x1f, 0x8b}) {
		if module, err = policyFromBundle(module); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(module)
	info, err := parseModule(module)
	if err != nil {
		return nil, err
	}
	pages := o.MemoryLimit / pageSize
	for _, m := range info.memories {
		if m.min > pages || (m.hasMax && m.max > pages) {
			return nil, fmt.Errorf("module declares memory of %s, above its memory limit of %s; raise memory_limit or shrink the module's memory", describeLimits(m), mib(o.MemoryLimit))
		}
	}
	var abi abiKind
	switch {
	case info.exports["opa_eval"] == 0 && hasExport(info, "opa_eval"):
		abi = abiOPA
	case hasExport(info, "toolgate_validate"):
		abi = abiToolgate
		for _, f := range []string{"toolgate_abi_version", "toolgate_alloc"} {
			if !hasExport(info, f) {
				return nil, fmt.Errorf("module exports toolgate_validate but not %s", f)
			}
		}
		if !hasExport(info, "memory") {
			return nil, errors.New("module does not export its memory as \"memory\"")
		}
	default:
		return nil, errors.New("module speaks neither toolgate's ABI (toolgate_validate) nor OPA's (opa_eval); see docs/wasm-abi.md")
	}
	wasi := false
	for _, im := range info.imports {
		switch {
		case abi == abiToolgate && im.module == hostModule && im.name == "log" && im.kind == 0:
		case abi == abiToolgate && im.module == "wasi_snapshot_preview1" && im.kind == 0:
			wasi = true
		case abi == abiOPA && im.module == "env" && (im.kind == 0 || im.kind == 2 && im.name == "memory"):
		default:
			return nil, fmt.Errorf("module imports %s.%s, which toolgate does not provide", im.module, im.name)
		}
	}

	// The limit is enforced by each instance's linearMemory, which sees
	// every grow because the module's memory is declared as large as
	// WebAssembly allows: a grow past the limit is refused and stops the
	// call with ErrMemoryLimit. A module's own smaller maximum is kept
	// there too.
	memLimit := uint64(pages) * pageSize
	if len(info.memories) == 1 && info.memories[0].hasMax {
		memLimit = min(memLimit, uint64(info.memories[0].max)*pageSize)
	}
	if module, err = instrument(module, info, maxPages); err != nil {
		return nil, err
	}

	// No WithCloseOnContextDone: instrument's interrupt check stops a
	// module at far less cost.
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(e.cache).
		WithMemoryLimitPages(maxPages).
		WithDebugInfoEnabled(false)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	ref := &runtimeRef{rt: rt}
	if err := e.track(ref); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			e.untrack(ref)
			ref.close(ctx)
		}
	}()
	p := &Policy{
		name:     name,
		version:  hex.EncodeToString(sum[:])[:12],
		opts:     o,
		engine:   e,
		rt:       ref,
		memLimit: memLimit,
		pool:     make(chan instance, o.PoolSize),
		logs:     &logTarget{name: name, log: o.Log},
	}
	if err := p.host(ctx, abi, wasi); err != nil {
		return nil, err
	}
	cm, err := rt.CompileModule(ctx, module)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	p.compiled = cm
	p.kind = abi
	ictx, cancel := context.WithTimeout(ctx, instantiateTimeout)
	first, err := p.instantiate(ictx)
	cancel()
	if err != nil {
		return nil, err
	}
	p.abi = first.abi()
	first.release()
	p.pool <- first
	ok = true
	// The runtime outlives Close for calls that picked the policy just
	// before a reload swapped it out; it goes when the policy is
	// unreachable, or with the engine.
	runtime.AddCleanup(p, func(r *runtimeRef) {
		e.untrack(r)
		r.close(context.Background())
	}, ref)
	return p, nil
}

func hasExport(info *moduleInfo, name string) bool {
	_, ok := info.exports[name]
	return ok
}

func describeLimits(l limits) string {
	if l.hasMax {
		return fmt.Sprintf("min %s, max %s", mib(l.min*pageSize), mib(l.max*pageSize))
	}
	return "min " + mib(l.min*pageSize)
}

// mib formats a byte count as MiB or KiB.
func mib(n uint32) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// policyFromBundle returns /policy.wasm from an OPA bundle.
func policyFromBundle(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("bundle holds no /policy.wasm")
		}
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		if filepath.Clean("/"+h.Name) != "/policy.wasm" {
			continue
		}
		w, err := io.ReadAll(io.LimitReader(tr, maxModuleBytes+1))
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		if len(w) > maxModuleBytes {
			return nil, fmt.Errorf("bundle's policy.wasm larger than %d MiB", maxModuleBytes>>20)
		}
		return w, nil
	}
}
