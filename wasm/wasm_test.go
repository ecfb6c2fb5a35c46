package wasm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/procstat"
	"github.com/toolgate/toolgate/policies"
)

func newEngine(t testing.TB) *Engine {
	t.Helper()
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineOptions{CacheDir: cacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	return e
}

// sharedCache keeps compiled fixtures between the tests of one run.
var sharedCache struct {
	once sync.Once
	dir  string
}

func cacheDir(t testing.TB) string {
	sharedCache.once.Do(func() {
		d, err := os.MkdirTemp("", "toolgate-wazero-test")
		if err != nil {
			t.Fatal(err)
		}
		sharedCache.dir = d
	})
	return sharedCache.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCache.dir != "" {
		os.RemoveAll(sharedCache.dir)
	}
	os.Exit(code)
}

func load(t testing.TB, e *Engine, file string, o Options) *Policy {
	t.Helper()
	p, err := e.LoadFile(context.Background(), file, "testdata/"+file+".wasm", o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// goodCall is a bench input the bench policies deny for two reasons.
func goodCall() (*policies.Input, policies.Result) {
	in := benchInput()
	in.Arguments["limit"] = json.Number("51")
	in.Arguments["organism"] = "cat"
	want := policies.Result{Allowed: true, Inject: map[string]string{"X-Trace-Id": in.TraceID}, Denies: []policies.Violation{
		{Path: "/limit", Reason: bucketing.ReasonPolicyDenied, Message: "limit must be at most 50", Code: bucketing.CodePolicy},
		{Path: "/organism", Reason: bucketing.ReasonPolicyDenied, Message: "organism not allowed", Code: bucketing.CodePolicy},
	}}
	return in, want
}

func equalResult(a, b policies.Result) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Bounds of TestHostileModules, measured with the race detector on this
// project's 2-core machine while it was shared with other helpers' builds
// and tests (load average 19-27) and two busy loops of the measurement's
// own (see the test's comment for the command), 14 runs of the test. Each
// bound leaves a few times the worst figure seen, and each is still far
// below what a broken limit would take: a deadline ignored entirely never
// returns (the call is given up after giveUp), and a memory module not
// stopped at its limit runs to its own deadline of fastDeadline.
const (
	// overrunBound is how far past its deadline a looping module may be
	// stopped: the timer has to fire and the looping goroutine has to see
	// the flag. Typical overrun under that load: 160-920ms; once, in a run
	// where the whole process was starved for seconds, 2.87s. Unloaded,
	// without the race detector: well under 1ms.
	overrunBound = 5 * time.Second
	// fastBound is how long a module that fails by itself (a trap, garbage,
	// a refused grow) may take, under a deadline of fastDeadline that it
	// must not need. Typical under that load: 170ms-1.3s; in the starved
	// run, one memory hog call over 6s. Unloaded: about 1ms.
	fastBound    = 5 * time.Second
	fastDeadline = 30 * time.Second
	// giveUp is when a call that has not returned counts as never stopped.
	giveUp = 20 * time.Second
)

// TestHostileModules: each hostile module is refused with the reason that
// names what it did, a looping one within its deadline plus overrunBound, a
// failing one (trap, garbage, memory past its limit) within fastBound and
// long before its own deadline, while a stream of good calls on other
// policies (Rego compiled to WASM, Go, WAT) keeps its answers. Each call
// runs on an instance made beforehand (as the pool hands out), so the time
// measured is the evaluation's, not instantiation's.
//
// Measured under load with:
//
//	for i in 1 2; do (while :; do :; done) & done
//	go test -race -count=5 -run TestHostileModules -v ./wasm/ | grep -E 'worst|peak'
//	kill %1 %2
func TestHostileModules(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	// The good policies get a generous deadline: the race detector on a
	// shared machine stretched a call past one second, and this test is
	// about hostile modules not disturbing them.
	goodOpts := Options{Deadline: 10 * time.Second}
	good := []*Policy{load(t, e, "bench_rego", goodOpts), load(t, e, "bench_go", goodOpts), load(t, e, "allow", goodOpts)}
	for _, p := range good {
		// An instance for each of the two callers below, made now: under
		// load, the Go module's initialisation alone can outlast the 2s
		// instantiateTimeout.
		for len(p.pool) < 2 {
			inst, err := p.instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p.put(inst)
		}
	}
	baseRSS := procstat.PeakRSS()

	stop := make(chan struct{})
	var goodCalls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, p := range good {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					in, want := goodCall()
					if p.Name() == "allow" {
						want = policies.Result{Allowed: true}
					}
					res, err := p.Eval(ctx, in)
					if err != nil || !equalResult(res, want) {
						select {
						case errs <- errors.New(p.Name() + ": " + errString(err) + " " + string(must(json.Marshal(res)))):
						default:
						}
						return
					}
					goodCalls.Add(1)
				}
			}()
		}
	}

	tests := []struct {
		name     string
		file     string
		opts     Options
		ctxLimit time.Duration // a caller's deadline, 0 for none
		want     error
		text     string
		reason   string
		deadline time.Duration // the deadline that applies; 0: the call must end by itself within fastBound
	}{
		{"infinite loop", "loop", Options{}, 0, ErrTimeout, "module did not decide within 10ms", bucketing.ReasonPolicyTimeout, 10 * time.Millisecond},
		{"infinite loop, caller's deadline sooner", "loop", Options{Deadline: 10 * time.Second}, 20 * time.Millisecond, ErrTimeout, "caller's deadline passed first", bucketing.ReasonPolicyTimeout, 20 * time.Millisecond},
		{"memory bomb", "bomb", Options{Deadline: fastDeadline}, 0, ErrMemoryLimit, "module exceeded its memory limit of 16 MiB", bucketing.ReasonPolicyError, 0},
		{"memory bomb, small limit", "bomb", Options{MemoryLimit: 1 << 20, Deadline: fastDeadline}, 0, ErrMemoryLimit, "module exceeded its memory limit of 1 MiB", bucketing.ReasonPolicyError, 0},
		{"memory hog that retries a refused grow", "hog", Options{Deadline: fastDeadline}, 0, ErrMemoryLimit, "module exceeded its memory limit of 16 MiB", bucketing.ReasonPolicyError, 0},
		{"trap", "trap", Options{Deadline: fastDeadline}, 0, ErrTrap, "module trapped: unreachable", bucketing.ReasonPolicyError, 0},
		{"garbage output", "garbage", Options{Deadline: fastDeadline}, 0, ErrBadDecision, "module returned a bad decision: decision is not JSON", bucketing.ReasonPolicyError, 0},
		{"out-of-bounds output", "outofbounds", Options{Deadline: fastDeadline}, 0, ErrBadDecision, "past the end of memory", bucketing.ReasonPolicyError, 0},
	}
	// The good instances' memory grows on their first calls: let it, so
	// what the hostile cases commit is measured alone.
	for warm := time.Now().Add(giveUp); goodCalls.Load() < 60 && time.Now().Before(warm); {
		time.Sleep(10 * time.Millisecond)
	}
	var worstOverrun, worstFast time.Duration
	var worstPeak int64 // bytes of linear memory committed above the baseline
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t, e, tt.file, tt.opts)
			defer p.Close(ctx)
			base := committed.Load()
			peakCommitted.Store(base)
			bound := fastBound
			if tt.deadline > 0 {
				bound = tt.deadline + overrunBound
			}
			for i := range 3 { // a fresh instance each time: the failed one is gone
				prime(t, p)
				took, err := timedEval(p, tt.ctxLimit, giveUp)
				for retry := 0; retry < 5 && err == context.DeadlineExceeded; retry++ {
					// The caller's deadline passed before the call began:
					// the machine did not run this goroutine in time.
					t.Logf("call %d: the caller's deadline passed before the call began; again", i)
					took, err = timedEval(p, tt.ctxLimit, giveUp)
				}
				if took < 0 {
					t.Fatalf("call %d: still running after %s (bound %s): the module was not stopped", i, giveUp, bound)
				}
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
					t.Fatalf("call %d: error %v after %s, want %v with %q", i, err, took, tt.want, tt.text)
				}
				if took > bound {
					t.Fatalf("call %d: refused after %s, bound %s", i, took, bound)
				}
				if tt.deadline > 0 {
					worstOverrun = max(worstOverrun, took-tt.deadline)
				} else {
					worstFast = max(worstFast, took)
				}
			}
			if len(p.pool) != 0 {
				t.Fatalf("%d failed instances went back to the pool", len(p.pool))
			}
			// The memory each hostile instance took went back with it, and
			// it never held more than its limit at once (plus what the good
			// policies' instances grew meanwhile: a few MiB).
			limit := int64(tt.opts.MemoryLimit)
			if limit == 0 {
				limit = DefaultMemoryLimit
			}
			peak := peakCommitted.Load() - base
			worstPeak = max(worstPeak, peak)
			if peak > limit+8<<20 {
				t.Errorf("%d MiB of linear memory committed at the peak, limit %d MiB", peak>>20, limit>>20)
			}
			if left := committed.Load() - base; left > 8<<20 {
				t.Errorf("%d MiB of linear memory still committed after the failed calls", left>>20)
			}
			// Through a Set, as the pipeline decides: fail closed, with the
			// reason that names what happened.
			setDeadline := tt.deadline // a looping module times out on the sooner deadline
			if tt.deadline == 0 {
				setDeadline = fastDeadline
			}
			d := policies.NewSet("tool", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, setDeadline, false).Check(ctx, benchInput())
			if d.Allow || d.Reason != tt.reason {
				t.Fatalf("Set: %+v, want refused with %s", d, tt.reason)
			}
			if tt.reason == bucketing.ReasonPolicyError && !strings.Contains(d.Detail, tt.text) {
				t.Fatalf("Set detail %q does not say %q", d.Detail, tt.text)
			}
		})
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a good call failed while hostile modules ran: %v", err)
	default:
	}
	if n := goodCalls.Load(); n < 20 {
		t.Fatalf("only %d good calls completed", n)
	}
	t.Logf("%d good calls completed meanwhile", goodCalls.Load())
	t.Logf("worst overrun past the deadline %s (bound %s); worst self-ending failure %s (bound %s); peak linear memory committed by a hostile case %d MiB", worstOverrun, overrunBound, worstFast, fastBound, worstPeak>>20)
	if base, peak := baseRSS, procstat.PeakRSS(); base > 0 {
		t.Logf("peak RSS %d MiB before the hostile modules, %d MiB after", base>>20, peak>>20)
	}
}

// prime puts a fresh instance of p in its empty pool, so the next call is
// timed without instantiation.
func prime(t *testing.T, p *Policy) {
	t.Helper()
	if len(p.pool) > 0 {
		return
	}
	inst, err := p.instantiate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p.put(inst)
}

// timedEval runs one call, under a caller's deadline of ctxLimit unless
// it is 0, and returns how long it took, or -1 when it had not returned
// after giveUp (it is then left running).
func timedEval(p *Policy, ctxLimit, giveUp time.Duration) (time.Duration, error) {
	type result struct {
		took time.Duration
		err  error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if ctxLimit > 0 {
			ctx, cancel = context.WithTimeout(ctx, ctxLimit)
		}
		defer cancel()
		start := time.Now()
		_, err := p.Eval(ctx, benchInput())
		done <- result{time.Since(start), err}
	}()
	select {
	case r := <-done:
		return r.took, r.err
	case <-time.After(giveUp):
		return -1, nil
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCallerCancelIsNotAPolicyFailure(t *testing.T) {
	e := newEngine(t)
	p := load(t, e, "loop", Options{Deadline: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := p.Eval(ctx, benchInput()); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestLoadRefuses(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		module []byte
		opts   Options
		text   string
	}{
		{"declared memory above the limit", must(os.ReadFile("testdata/hugememory.wasm")), Options{}, "declares memory of min 32 MiB, above its memory limit of 16 MiB"},
		{"limit below the module's minimum", must(os.ReadFile("testdata/bench_go.wasm")), Options{MemoryLimit: 1 << 20}, "above its memory limit of 1 MiB"},
		{"not wasm", []byte("hello, world"), Options{}, "not a WebAssembly module"},
		{"truncated", must(os.ReadFile("testdata/allow.wasm"))[:40], Options{}, "malformed module"},
		{"neither ABI", wat(t, `(module (func (export "run")))`), Options{}, "neither toolgate's ABI"},
		{"unknown import", wat(t, `(module (import "env" "socket" (func)) (memory (export "memory") 1)
			(func (export "toolgate_abi_version") (result i32) (i32.const 1))
			(func (export "toolgate_alloc") (param i32) (result i32) (i32.const 0))
			(func (export "toolgate_validate") (param i32 i32) (result i64) (i64.const 0)))`), Options{}, "imports env.socket, which toolgate does not provide"},
		{"wrong ABI version", wat(t, `(module (memory (export "memory") 1)
			(func (export "toolgate_abi_version") (result i32) (i32.const 7))
			(func (export "toolgate_alloc") (param i32) (result i32) (i32.const 0))
			(func (export "toolgate_validate") (param i32 i32) (result i64) (i64.const 0)))`), Options{}, "speaks toolgate ABI version 7"},
		{"start function loops", wat(t, `(module (memory (export "memory") 1)
			(func $s (loop $l (br $l))) (start $s)
			(func (export "toolgate_abi_version") (result i32) (i32.const 1))
			(func (export "toolgate_alloc") (param i32) (result i32) (i32.const 0))
			(func (export "toolgate_validate") (param i32 i32) (result i64) (i64.const 0)))`), Options{}, "toolgate_start did not finish before its deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.module == nil {
				t.Skip("wat2wasm not installed")
			}
			_, err := e.Load(ctx, tt.name, tt.module, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("error %v, want %q", err, tt.text)
			}
		})
	}
}

// wat compiles WAT source with wabt's wat2wasm, or returns nil when it is
// not installed.
func wat(t *testing.T, src string) []byte {
	t.Helper()
	b, err := watToWasm(src)
	if err != nil {
		t.Logf("wat2wasm: %v", err)
		return nil
	}
	return b
}

// TestLoadFormats: a plain policy.wasm and an OPA bundle holding one load
// alike; ABI and Version say what was loaded.
func TestLoadFormats(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	raw := must(os.ReadFile("testdata/bench_rego.wasm"))
	var bundle bytes.Buffer
	zw := gzip.NewWriter(&bundle)
	tw := tar.NewWriter(zw)
	for name, body := range map[string][]byte{"/data.json": []byte("{}"), "/policy.wasm": raw} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		tw.Write(body)
	}
	tw.Close()
	zw.Close()
	in, want := goodCall()
	for name, mod := range map[string][]byte{"policy.wasm": raw, "bundle": bundle.Bytes()} {
		p, err := e.Load(ctx, name, mod, Options{Deadline: time.Second})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(p.ABI(), "opa/1.") || len(p.Version()) != 12 {
			t.Fatalf("%s: ABI %q, version %q", name, p.ABI(), p.Version())
		}
		res, err := p.Eval(ctx, in)
		if err != nil || !equalResult(res, want) {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
	}
	g := load(t, e, "bench_go", Options{Deadline: time.Second})
	if g.ABI() != "toolgate/1" {
		t.Fatalf("Go module ABI %q", g.ABI())
	}
}

// TestGuestLog: toolgate's log import and a WASI module's output reach
// Options.Log, named by policy.
func TestGuestLog(t *testing.T) {
	e := newEngine(t)
	var mu sync.Mutex
	var lines []string
	p := load(t, e, "allow", Options{Deadline: time.Second, Log: func(policy, msg string) {
		mu.Lock()
		lines = append(lines, policy+": "+msg)
		mu.Unlock()
	}})
	in := benchInput()
	in.Arguments["query"] = "a forbidden word"
	res, err := p.Eval(context.Background(), in)
	if err != nil || len(res.Denies) != 1 || res.Denies[0].Message != "input holds a forbidden word" {
		t.Fatalf("%+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || lines[0] != "allow: forbidden" {
		t.Fatalf("log lines %q", lines)
	}
}

// TestModuleError: a module that reports {"error": ...} fails the call
// with its message.
func TestModuleError(t *testing.T) {
	e := newEngine(t)
	p := load(t, e, "bench_go", Options{Deadline: time.Second})
	in := benchInput()
	in.Arguments["limit"] = []any{"not", "a", "number"}
	_, err := p.Eval(context.Background(), in)
	if !errors.Is(err, ErrModuleError) || !strings.Contains(err.Error(), "module reported an error: json:") {
		t.Fatalf("got %v", err)
	}
}

// TestPoolHammer: concurrent calls while the policy is reloaded (a new one
// swapped in, the old one closed) over and over: no call fails, every
// decision is right, and calls that picked a policy just before it was
// closed still complete.
func TestPoolHammer(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	for _, file := range []string{"allow", "bench_rego"} {
		t.Run(file, func(t *testing.T) {
			module := must(os.ReadFile("testdata/" + file + ".wasm"))
			// The deadline is not what this test checks: a call waits for
			// one of two instances while eight callers and a reload loop
			// (compiling the module under -race) share two loaded cores;
			// a second was missed there once (12 calls in 1.5 s). Thirty
			// leave room for a busy machine.
			o := Options{PoolSize: 2, Deadline: 30 * time.Second}
			first, err := e.Load(ctx, file, module, o)
			if err != nil {
				t.Fatal(err)
			}
			var cur atomic.Pointer[Policy]
			cur.Store(first)
			stop := make(chan struct{})
			var calls, reloads atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 1)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						in, want := goodCall()
						if file == "allow" {
							want = policies.Result{Allowed: true}
						}
						res, err := cur.Load().Eval(ctx, in)
						if err != nil || !equalResult(res, want) {
							select {
							case errs <- errors.New(errString(err)):
							default:
							}
							return
						}
						calls.Add(1)
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					p, err := e.Load(ctx, file, module, o)
					if err != nil {
						errs <- err
						return
					}
					old := cur.Swap(p)
					if err := old.Close(ctx); err != nil {
						errs <- err
						return
					}
					reloads.Add(1)
				}
			}()
			time.Sleep(1500 * time.Millisecond)
			close(stop)
			wg.Wait()
			select {
			case err := <-errs:
				t.Fatalf("after %d calls and %d reloads: %v", calls.Load(), reloads.Load(), err)
			default:
			}
			if calls.Load() == 0 || reloads.Load() == 0 {
				t.Fatalf("%d calls, %d reloads", calls.Load(), reloads.Load())
			}
			t.Logf("%d calls, %d reloads", calls.Load(), reloads.Load())
			// A closed policy still serves a late call.
			p := cur.Load()
			p.Close(ctx)
			if _, err := p.Eval(ctx, benchInput()); err != nil {
				t.Fatalf("late call after Close: %v", err)
			}
		})
	}
	// After the engine closes, calls fail with ErrClosed.
	p := load(t, e, "allow", Options{})
	e.Close(ctx)
	if _, err := p.Eval(ctx, benchInput()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Engine.Close: %v", err)
	}
	if _, err := e.Load(ctx, "x", must(os.ReadFile("testdata/allow.wasm")), Options{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Load after Engine.Close: %v", err)
	}
}

// TestInstrumentKeepsBehaviour: every fixture still validates after
// instrumentation, which adds one global and two exports at most.
func TestInstrumentKeepsBehaviour(t *testing.T) {
	files, _ := os.ReadDir("testdata")
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".wasm") {
			continue
		}
		b := must(os.ReadFile("testdata/" + f.Name()))
		info, err := parseModule(b)
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		out, err := instrument(b, info, 256)
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		again, err := parseModule(out)
		if err != nil {
			t.Fatalf("%s instrumented: %v", f.Name(), err)
		}
		if again.exports[interruptExport] != 3 {
			t.Fatalf("%s: no interrupt global export", f.Name())
		}
		if info.memImport[0] >= 0 && again.memImport[0] >= 0 {
			t.Fatalf("%s: memory still imported", f.Name())
		}
	}
}

// FuzzInstrument: parsing and instrumenting arbitrary bytes never panics.
func FuzzInstrument(f *testing.F) {
	for _, name := range []string{"allow", "loop", "bomb", "hog", "trap", "garbage"} {
		f.Add(must(os.ReadFile("testdata/" + name + ".wasm")))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := parseModule(b)
		if err != nil {
			return
		}
		instrument(b, info, 16)
	})
}

// TestDroppedPoliciesAreReleased: a closed policy nobody references has
// its runtime closed, so reloads do not pile up compiled modules.
func TestDroppedPoliciesAreReleased(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	for range 5 {
		p := load(t, e, "allow", Options{Deadline: time.Second, Log: func(string, string) {}})
		if _, err := p.Eval(ctx, benchInput()); err != nil {
			t.Fatal(err)
		}
		p.Close(ctx)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		e.mu.Lock()
		n := len(e.runtimes)
		e.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runtimes still open", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEngineCloseDuringACall: closing the engine while a module is busy
// writing its memory does not pull the memory from under it (it lives
// outside the Go heap, and is released when the call ends): the call ends
// at its deadline with an error, and the process carries on.
func TestEngineCloseDuringACall(t *testing.T) {
	mod := wat(t, `(module (memory (export "memory") 1)
		(func (export "toolgate_abi_version") (result i32) (i32.const 1))
		(func (export "toolgate_alloc") (param i32) (result i32) (i32.const 1024))
		(func (export "toolgate_validate") (param i32 i32) (result i64)
			(loop $l (i32.store (i32.const 8) (i32.add (i32.load (i32.const 8)) (i32.const 1))) (br $l))
			(i64.const 0)))`)
	if mod == nil {
		t.Skip("wat2wasm not installed")
	}
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineOptions{CacheDir: "off"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Load(ctx, "writer", mod, Options{Deadline: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Eval(ctx, benchInput())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a call that loops forever returned no error")
		}
	case <-time.After(giveUp):
		t.Fatalf("the call did not end %s after the engine closed", giveUp)
	}
	if _, err := p.Eval(ctx, benchInput()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Engine.Close: %v", err)
	}
}
