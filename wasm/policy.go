package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/toolgate/toolgate/policies"
)

type abiKind int

const (
	abiToolgate abiKind = iota + 1
	abiOPA
)

// instance is one instantiated module; it is not safe for concurrent use.
// A goroutine holds an instance from instantiate, or from acquire, until
// release or close.
type instance interface {
	// eval hands the input document to the module and returns its
	// decision document, a view into the instance's memory valid until
	// the next call.
	eval(ctx context.Context, input []byte) ([]byte, error)
	// overLimit says whether the module asked for memory past its limit,
	// and what the limit is.
	overLimit() (limit uint64, refused bool)
	// interrupt makes the module trap at its next loop iteration; it is
	// safe to call from another goroutine.
	interrupt()
	abi() string
	// acquire holds an idle instance for a call; false when it was closed
	// meanwhile (by Engine.Close).
	acquire() bool
	// release lets an instance go idle.
	release()
	// close closes the instance and releases it.
	close(ctx context.Context)
}

// base is what every instance has: its module, memory and interrupt flag.
type base struct {
	mod  api.Module
	mem  api.Memory
	lm   *linearMemory
	stop api.MutableGlobal
}

func (b *base) interrupt()    { b.stop.Set(1) }
func (b *base) acquire() bool { return b.lm.acquire() }
func (b *base) release()      { b.lm.release() }
func (b *base) overLimit() (uint64, bool) {
	return b.lm.limit, b.lm.refused.Load()
}
func (b *base) close(ctx context.Context) {
	_ = b.mod.Close(ctx)
	b.lm.release()
}

// newBase instantiates the compiled module without running anything, then
// runs its start function and _initialize (a reactor's, such as Go's
// c-shared) interruptibly under ctx.
func (p *Policy) newBase(ctx context.Context, cfg wazero.ModuleConfig) (*base, error) {
	lm := newLinearMemory(p.memLimit)
	mod, err := p.rt.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, lm.allocator()), p.compiled, cfg.WithName("").WithStartFunctions())
	if err != nil {
		lm.release()
		return nil, err
	}
	b := &base{mod: mod, mem: mod.Memory(), lm: lm}
	g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		b.close(ctx)
		return nil, errors.New("module lost its interrupt global")
	}
	b.stop = g
	lm.onRefuse = b.interrupt
	for _, name := range []string{startExport, "_initialize"} {
		f := mod.ExportedFunction(name)
		if f == nil {
			continue
		}
		stop := context.AfterFunc(ctx, b.interrupt)
		_, err := f.Call(ctx)
		if !stop() {
			err = fmt.Errorf("%s did not finish before its deadline (%w)", name, ErrTimeout)
		}
		if err != nil {
			var exit *sys.ExitError
			if errors.As(err, &exit) && exit.ExitCode() == 0 {
				continue
			}
			b.close(ctx)
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return b, nil
}

// Policy is one loaded WASM module with its pool of instances. It is safe
// for concurrent use: each call takes an idle instance, or makes one.
type Policy struct {
	name     string
	version  string
	abi      string
	kind     abiKind
	opts     Options
	engine   *Engine
	rt       *runtimeRef
	compiled wazero.CompiledModule
	memLimit uint64 // bytes an instance's memory may grow to

	pool   chan instance
	closed atomic.Bool
	mu     sync.RWMutex // held for reading by calls, for writing by Close

	bufs     sync.Pool // *[]byte input buffers
	logs     *logTarget
	builtins *builtinTable // an OPA module's host builtins
}

var _ policies.Evaluator = (*Policy)(nil)

// Name is the policy's name in the configuration.
func (p *Policy) Name() string { return p.name }

// Version is a content hash of the module bytes, 12 hex digits.
func (p *Policy) Version() string { return p.version }

// ABI is the module's ABI: "toolgate/1", or "opa/1.N" for OPA-compiled
// modules.
func (p *Policy) ABI() string { return p.abi }

// Close waits for calls in flight, then closes the idle instances. A call
// that arrives after Close (one that picked this policy just before a
// reload swapped it out) still completes, on a fresh instance that is
// closed after it; the compiled module is released once the policy is
// unreachable, or by Engine.Close.
func (p *Policy) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		return nil
	}
	p.mu.Lock() // waits for calls in flight
	defer p.mu.Unlock()
	for {
		select {
		case in := <-p.pool:
			in.close(ctx)
		default:
			return nil
		}
	}
}

// Eval decides one call: it writes the input document into an instance,
// runs the module under the sooner of ctx's deadline and Options.Deadline,
// and decodes the decision. An instance that traps, hits its memory limit,
// runs out of time or returns garbage is thrown away.
func (p *Policy) Eval(ctx context.Context, in *policies.Input) (policies.Result, error) {
	return p.eval(ctx, in, false)
}

// evalFresh is Eval on a fresh instance, closed after the call: what a
// call costs without the pool.
func (p *Policy) evalFresh(ctx context.Context, in *policies.Input) (policies.Result, error) {
	return p.eval(ctx, in, true)
}

func (p *Policy) eval(ctx context.Context, in *policies.Input, fresh bool) (policies.Result, error) {
	if err := ctx.Err(); err != nil {
		return policies.Result{}, err
	}
	if p.engine.done.Load() {
		return policies.Result{}, ErrClosed
	}
	p.mu.RLock()
	defer p.mu.RUnlock()

	bp, _ := p.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer p.bufs.Put(bp)
	input, err := in.AppendJSON((*bp)[:0])
	if err != nil {
		return policies.Result{}, fmt.Errorf("input document: %w", err)
	}
	*bp = input

	inst, err := p.get(ctx, fresh)
	if err != nil {
		return policies.Result{}, err
	}
	// The policy's own deadline, unless the caller's comes first (a Set's
	// deadline usually does for Rego on the wasm engine): a timer less per
	// call.
	ectx, cancel := ctx, context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > p.opts.Deadline {
		ectx, cancel = context.WithTimeout(ctx, p.opts.Deadline)
	}
	stop := context.AfterFunc(ectx, inst.interrupt)
	out, err := inst.eval(ectx, input)
	interrupted := !stop()
	if _, refused := inst.overLimit(); err != nil || interrupted || refused {
		if err == nil {
			err = ErrTimeout // decided, but the flag is set: throw the instance away
		}
		err = p.classify(ctx, ectx, inst, err, interrupted)
		cancel()
		inst.close(context.Background())
		return policies.Result{}, err
	}
	cancel()
	res, err := decodeDecision(out)
	if err != nil {
		inst.close(context.Background())
		return policies.Result{}, err
	}
	if fresh {
		inst.close(context.Background())
	} else {
		p.put(inst)
	}
	return res, nil
}

// get takes an idle instance or makes one.
func (p *Policy) get(ctx context.Context, fresh bool) (instance, error) {
	if !fresh {
		select {
		case inst := <-p.pool:
			if inst.acquire() {
				return inst, nil
			}
			inst.close(context.Background())
		default:
		}
	}
	ictx, cancel := context.WithTimeout(ctx, instantiateTimeout)
	defer cancel()
	inst, err := p.instantiate(ictx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if p.engine.done.Load() {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	return inst, nil
}

// put returns an instance to the pool, or closes it when the pool is full
// or the policy closed.
func (p *Policy) put(inst instance) {
	inst.release()
	if !p.closed.Load() {
		select {
		case p.pool <- inst:
			return
		default:
		}
	}
	inst.close(context.Background())
}

// classify names what stopped a failed evaluation.
func (p *Policy) classify(ctx, ectx context.Context, inst instance, err error, interrupted bool) error {
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	if limit, refused := inst.overLimit(); refused || errors.Is(err, ErrMemoryLimit) {
		// A refused grow raised the interrupt flag: whatever the module
		// did next (trap, exit, retry), the limit is what happened.
		return fmt.Errorf("%w of %s", ErrMemoryLimit, mib(uint32(limit)))
	}
	if interrupted {
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			return ctx.Err() // the caller went away: not the policy's fault
		case ctx.Err() != nil:
			return fmt.Errorf("%w: the caller's deadline passed first", ErrTimeout)
		}
		return fmt.Errorf("%w: module did not decide within %s", ErrTimeout, p.opts.Deadline)
	}
	if errors.Is(err, ErrBadDecision) || errors.Is(err, ErrModuleError) {
		return err
	}
	var be *builtinError
	if errors.As(err, &be) {
		return be // without wazero's stack trace
	}
	if isExit {
		return fmt.Errorf("%w: module exited with code %d", ErrTrap, exit.ExitCode())
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimPrefix(msg, "wasm error: ")
	return fmt.Errorf("%w: %s", ErrTrap, msg)
}

// instantiate makes a fresh instance of the compiled module.
func (p *Policy) instantiate(ctx context.Context) (instance, error) {
	switch p.kind {
	case abiOPA:
		return p.newOPA(ctx)
	default:
		return p.newToolgate(ctx)
	}
}

// decodeDecision decodes a decision document, or the module's own error
// report {"error": "..."}.
func decodeDecision(out []byte) (policies.Result, error) {
	res, err := policies.DecodeResult(out)
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrBadDecision, err)
	}
	if len(res.Denies) == 0 && res.Allowed && res.Inject == nil && len(out) > 9 {
		if msg, ok := moduleError(out); ok {
			return policies.Result{}, fmt.Errorf("%w: %s", ErrModuleError, msg)
		}
	}
	return res, nil
}

// logTarget is where a policy's module logs to. Host functions and
// instance configurations hold it rather than the Policy: the runtime
// they live in must not keep the Policy reachable, or its cleanup (which
// closes that runtime) would never run.
type logTarget struct {
	name string
	log  func(policy, msg string) // nil: discard
}

func (t *logTarget) line(msg string) {
	if t.log != nil {
		t.log(t.name, boundLog(msg))
	}
}

// Write adapts the target to a WASI module's stdout and stderr, a line at
// a time.
func (t *logTarget) Write(b []byte) (int, error) {
	if t.log != nil {
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			t.line(line)
		}
	}
	return len(b), nil
}

// maxLogLine bounds one log line a module writes.
const maxLogLine = 1024

func boundLog(s string) string {
	if len(s) > maxLogLine {
		s = s[:maxLogLine] + "..."
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
