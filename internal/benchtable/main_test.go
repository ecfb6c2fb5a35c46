package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	in := `goos: linux
BenchmarkProxy/throughput/direct-2     100  1 ns/op  50.0 cpu-us/op  30000 req/s
BenchmarkProxy/throughput/direct-2     100  1 ns/op  52.0 cpu-us/op  10000 req/s
BenchmarkProxy/throughput/direct-2     100  1 ns/op  51.0 cpu-us/op  20000 req/s
BenchmarkProxy/throughput/validated-2  100  1 ns/op  100.0 cpu-us/op  8000 req/s
BenchmarkProxy/throughput/policy-2     100  1 ns/op  130.0 cpu-us/op  6000 req/s
BenchmarkProxy/throughput/policy_wasm-2 100  1 ns/op  190.0 cpu-us/op  5000 req/s
BenchmarkProxy/latency/direct-2        100  1 ns/op  40.00 p50-us  150.0 p99-us
BenchmarkProxy/latency/validated-2     100  1 ns/op  140.0 p50-us  450.0 p99-us
BenchmarkProxy/latency/policy-2        100  1 ns/op  170.0 p50-us  500.0 p99-us
`
	var out bytes.Buffer
	code := run(strings.NewReader(in), &out)
	got := out.String()
	for _, want := range []string{
		"direct              20000    1.00x", // the median of three runs
		"validated            8000    0.40x",
		"added p50 100 us (target <= 250 us): met",
		"added CPU 30.0 us per call (target <= 20 us): MISSED",
		"throughput lost 25% (target <= 10%): MISSED",
		"policy_wasm route vs validated (another engine, for comparison): added CPU 90.0 us per call (target <= 20 us): over",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if code != 1 {
		t.Errorf("exit code %d with missed targets, want 1", code)
	}
	if code := run(strings.NewReader("PASS\n"), &out); code != 1 {
		t.Errorf("exit code %d without results, want 1", code)
	}
	// With BenchmarkPolicyOverhead's lines, the budget comes from them (not
	// from the sequential routes, whose policy route misses here): the
	// compiled engine's medians decide, the others are for comparison.
	paired := in + `BenchmarkPolicyOverhead/compiled-2     1  1 ns/op  14.0 added-cpu-us  9.0 loss-%
BenchmarkPolicyOverhead/compiled-2     1  1 ns/op  30.0 added-cpu-us  12.0 loss-%
BenchmarkPolicyOverhead/compiled-2     1  1 ns/op  15.0 added-cpu-us  8.0 loss-%
BenchmarkPolicyOverhead/interpreter-2  1  1 ns/op  60.0 added-cpu-us  27.0 loss-%
`
	out.Reset()
	if code := run(strings.NewReader(paired), &out); code != 0 ||
		!strings.Contains(out.String(), "policy on compiled vs validated, paired bursts: added CPU 15.0 us per call (target <= 20 us): met; throughput lost 9.0% (target <= 10%): met; 3 runs") ||
		!strings.Contains(out.String(), "policy on interpreter vs validated, paired bursts (another engine, for comparison): added CPU 60.0 us per call (target <= 20 us): over") {
		t.Errorf("exit code %d with paired results:\n%s", code, out.String())
	}
	// BenchmarkEventPath's lines give the event path's budget.
	out.Reset()
	ev := paired + `BenchmarkEventPath/serial/durable-2  1  1 ns/op  3.5 added-cpu-us  1.0 added-p50-us  -12 added-p99-us  1.000 events/group
BenchmarkEventPath/parallel32/durable-2  1  1 ns/op  -1.2 added-cpu-us  1.010 throughput-x
`
	if code := run(strings.NewReader(ev), &out); code != 0 ||
		!strings.Contains(out.String(), "lone call added CPU 3.5 us (target <= 5 us): met; added p99 -12 us (target <= 50 us): met; at 32 connections added CPU -1.2 us, throughput 1.010x") {
		t.Errorf("exit code %d with the event path within budget:\n%s", code, out.String())
	}
	out.Reset()
	over := strings.Replace(ev, "3.5 added-cpu-us", "6.5 added-cpu-us", 1)
	if code := run(strings.NewReader(over), &out); code != 1 || !strings.Contains(out.String(), "lone call added CPU 6.5 us (target <= 5 us): MISSED") {
		t.Errorf("exit code %d with the event path over budget, want 1:\n%s", code, out.String())
	}
	// A benchmark that failed fails the table, even where every figure
	// it has is within its budget (make bench once printed a table of
	// zeros for routes whose calls were all refused).
	out.Reset()
	broken := paired + `--- FAIL: BenchmarkProxy/latency/passthrough
    bench_test.go:265: status 503
--- FAIL: BenchmarkProxy
FAIL
`
	if code := run(strings.NewReader(broken), &out); code != 1 || !strings.Contains(out.String(), "2 benchmarks failed, so figures above may be missing or wrong: BenchmarkProxy, BenchmarkProxy/latency/passthrough") {
		t.Errorf("exit code %d with failed benchmarks, want 1:\n%s", code, out.String())
	}
	// Only the default engine's route decides the exit code.
	met := strings.Replace(in, "130.0 cpu-us/op  6000 req/s", "110.0 cpu-us/op  7800 req/s", 1)
	out.Reset()
	if code := run(strings.NewReader(met), &out); code != 0 {
		t.Errorf("exit code %d with the policy route within budget and another engine over it, want 0:\n%s", code, out.String())
	}
}
