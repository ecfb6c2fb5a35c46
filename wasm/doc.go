// Package wasm runs WebAssembly policies in wazero: modules written in any
// language against toolgate's guest ABI, and Rego compiled to WASM by OPA.
// Each module is compiled once (with wazero's compilation cache on disk),
// its instances are pooled, and every call runs in a sandbox it cannot
// escape, stall or crash: a memory cap per instance, a deadline per call,
// and nothing outside the module reachable. A Policy implements
// policies.Evaluator, so WASM and Rego policies mix in one policies.Set.
//
// docs/wasm-abi.md is the guide for teams writing a module; this comment
// is the reference.
//
// # The guest ABI (toolgate/1)
//
// A module exports:
//
//	memory                                     its linear memory
//	toolgate_abi_version() -> i32              returns 1 (ABIVersion)
//	toolgate_alloc(len i32) -> i32             room for len bytes; 0 when it cannot
//	toolgate_validate(ptr i32, len i32) -> i64 decides; returns (out_ptr << 32) | out_len
//
// and may export _initialize (a reactor's initialisation, as Go's
// -buildmode=c-shared and WASI reactors have), which runs once per
// instance before any call.
//
// Per call the host calls toolgate_alloc(n) with the size of the input
// document, writes the document (UTF-8 JSON, the same document Rego
// policies see as input: tool, arguments, request, caller, trace_id) at the
// returned pointer, and calls toolgate_validate(ptr, n). The module returns
// the decision document, UTF-8 JSON of at most 1 MiB, at out_ptr:
//
//	{"deny": ["message", {"msg": "...", "path": "/json/pointer", "code": "policy" | "validation", "expected": "..."}],
//	 "allow": true,
//	 "inject": {"Header-Name": "value"}}
//
// and, for a module a tool binds to its answers (the input then has an
// "answer" key: status, headers, body), "withhold" (messages, as deny) and
// "redact" (JSON pointers into the answer's body).
//
// Every key is optional; an empty object allows the call. The bytes must
// stay valid until the next call into the instance (a module typically
// keeps one output buffer). An instance serves one call at a time; the host
// never calls into it concurrently.
//
// A module that cannot decide returns {"error": "message"}: the call fails
// with ErrModuleError and the message, and the tool's failure mode decides
// (fail closed by default).
//
// The module may import only:
//
//	toolgate.log(ptr i32, len i32)     one log line (at most 1 KiB used) to Options.Log
//
// and, for modules built for WASI (Go's GOOS=wasip1), the
// wasi_snapshot_preview1 functions, served with nothing reachable: no
// preopened directories, no environment variables, no arguments, stdin
// empty, stdout and stderr to Options.Log (or discarded), wazero's fake
// clocks (wall and monotonic clocks start at a fixed point and advance
// 1 ms per reading, never with real time), a deterministic random source
// and no sockets.
// Any other import is refused at Load.
//
// # OPA-compiled modules
//
// A module exporting opa_eval (OPA's WASM ABI 1.2 or later, as made by
// `opa build -t wasm` and by CompileRego) is run through OPA's ABI, hosted
// here: the module's imported env.memory becomes a memory of its own per
// instance (under the memory limit), env.opa_abort traps, env.opa_println
// goes to Options.Log, data is {} (parsed once per instance), and each call
// writes the input at the heap base and calls opa_eval, which resets the
// heap. The module must have one entrypoint, or the entrypoint
// rego.DecisionEntrypoint (toolgate_decision/decision), whose value is
// the decision document; CompileRego builds exactly that. An OPA bundle
// (.tar.gz) holding /policy.wasm loads too.
//
// Builtins OPA's WASM runtime does not implement (sprintf, time.*,
// units.*, net.cidr_*, crypto.*, semver.*, ...) are imported as
// env.opa_builtin0..4 and run by OPA's own Go implementations, as the
// interpreter runs them: at Load the module's builtin table (its exported
// builtins object, name to id) is read once and each name resolved; a
// builtin the interpreter refuses (rego.DeniedBuiltins) or OPA does
// not implement in Go refuses the module, named. Per call, each argument
// is serialized by the module (opa_value_dump, at most 4 MiB), parsed,
// passed to the builtin, and its result written back (opa_malloc,
// opa_value_parse). One evaluation sees one clock reading (time.now_ns)
// and the caller's context; the call's deadline cancels builtins that
// check for it. Builtin errors are strict, as in the interpreter: the
// call fails with ErrBuiltin, naming the builtin and OPA's error code (not
// its message, which may quote arguments), and its instance is thrown
// away; a Go panic inside a builtin fails the call the same way.
//
// CompileRego also routes regex.match to the host (as the builtin
// toolgate_regex_match, declared with regex.match's signature): OPA's WASM
// runtime compiles the pattern on every evaluation, OPA's Go
// implementation once.
//
// # Limits
//
// Options.MemoryLimit (default 16 MiB) caps each instance's memory; a
// module declaring a larger minimum or maximum is refused at Load, and an
// instance that needs more fails with ErrMemoryLimit. Options.Deadline
// (default 10 ms) and the caller's context bound each call, the sooner
// winning; a call past it fails with ErrTimeout (which matches
// context.DeadlineExceeded, so policies.Set reports policy_timeout).
// Making a fresh instance is bounded separately (2 s).
//
// Stopping a module works by instrumentation, not by wazero's
// WithCloseOnContextDone (which leaves the compiled code for Go at every
// loop iteration and made loop-heavy modules 5-20 times slower): at Load,
// every loop head and function entry gets a countdown, and every 4096
// steps the module checks a global flag the host sets when the deadline
// passes (it traps then), and passes a point where Go's scheduler and
// garbage collector can pause it.
//
// A call that traps, exits, exceeds its memory or deadline, or returns
// bytes that are not a decision throws its instance away; the next call
// makes a fresh one. The error says what happened:
//
//	module trapped: unreachable
//	module exceeded its memory limit of 16 MiB
//	timeout: module did not decide within 10ms
//	module returned a bad decision: decision is not JSON: ...
//	module reported an error: ...
//	builtin failed: units.parse_bytes: eval_builtin_error
//
// # Pooling and reload
//
// Policy keeps up to Options.PoolSize idle instances (default
// DefaultPoolSize, 64) and makes more when calls outnumber them. Reload loads the
// new module into a new Policy, swaps it in, and closes the old one: Close
// waits for calls in flight and closes the idle instances; a call that
// picked the old policy just before the swap still completes on a fresh
// instance. The compiled module is released once the old Policy is
// unreachable, or by Engine.Close.
package wasm
