package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAdmitFleetLines: BenchmarkAdmitFleet's lines (as make bench prints
// them, after the others) give the fleet state's cost line, medians over
// runs, and do not change the exit code.
func TestAdmitFleetLines(t *testing.T) {
	in := `BenchmarkProxy/throughput/direct-2     100  1 ns/op  50.0 cpu-us/op  20000 req/s
BenchmarkProxy/latency/direct-2        100  1 ns/op  40.00 p50-us  150.0 p99-us
goos: linux
goarch: amd64
pkg: github.com/toolgate/toolgate/policies/budget
cpu: AMD EPYC
BenchmarkAdmitFleet/local-2         	   20000	      2336 ns/op	       612.0 cpu-ns/op	       421.0 p50-ns	      1172 p99-ns	      13 B/op	       0 allocs/op
BenchmarkAdmitFleet/local-2         	   20000	       582.1 ns/op	       565.7 cpu-ns/op	       420.0 p50-ns	       731.0 p99-ns	      14 B/op	       0 allocs/op
BenchmarkAdmitFleet/local-2         	   20000	       582.1 ns/op	       565.7 cpu-ns/op	       420.0 p50-ns	       731.0 p99-ns	      14 B/op	       0 allocs/op
BenchmarkAdmitFleet/redis-2         	   20000	     58994 ns/op	     27019 cpu-ns/op	     41643 p50-ns	    129283 p99-ns	     26000 redis-cpu-ns/op	    3603 B/op	      80 allocs/op
BenchmarkAdmitFleet/redis-2         	   20000	     57778 ns/op	     27038 cpu-ns/op	     38497 p50-ns	    116564 p99-ns	     23500 redis-cpu-ns/op	    3603 B/op	      80 allocs/op
BenchmarkAdmitFleet/redis-2         	   20000	     57778 ns/op	     30000 cpu-ns/op	     50000 p50-ns	    116564 p99-ns	     24000 redis-cpu-ns/op	    3603 B/op	      80 allocs/op
PASS
ok  	github.com/toolgate/toolgate/policies/budget	2.522s
`
	var out bytes.Buffer
	code := run(strings.NewReader(in), &out)
	want := "budgets with state.redis vs local counters (BenchmarkAdmitFleet, one call at a time, Redis on loopback): p50 41.6 us vs 0.4 us; CPU per call 27.0 us in the sidecar (local 0.6 us) plus 24.0 us in Redis; 3 runs"
	if code != 0 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit code %d; output lacks %q:\n%s", code, want, out.String())
	}
	// Without Redis the benchmark skips: no line, no failure.
	out.Reset()
	skipped := strings.Split(in, "goos:")[0] + "--- SKIP: BenchmarkAdmitFleet\n    fleet_bench_test.go:30: redistest: redis-server is not installed\nPASS\n"
	if code := run(strings.NewReader(skipped), &out); code != 0 || strings.Contains(out.String(), "state.redis") {
		t.Fatalf("exit code %d with the fleet benchmark skipped:\n%s", code, out.String())
	}
}
