//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testutil"
)

func TestMain(m *testing.M) {
	// The benchmark starts its upstream and bare goproxy as this binary
	// with roleEnv set.
	if code, ok := serveRole(os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestQuickRun runs the whole external benchmark in its reduced mode (one
// round of one-second runs) and checks what a user reads: every path in the
// table, each measured with real requests through real processes, and
// nothing it started left running. It asserts no timing.
func TestQuickRun(t *testing.T) {
	for _, bin := range []string{"wrk", "nginx", "squid", "clickhouse-server"} {
		if _, err := lookPath(bin); err != nil {
			t.Skipf("%s is not installed: scripts/testdeps.sh --bench installs the external benchmark's tools", bin)
		}
	}
	stdout, res := runJSON(t, "-rounds", "1", "-duration", "1s", "-latency-duration", "1s", "-warmup", "0s")
	want := []string{"direct", "nginx", "nginx-opa", "squid", "relay", "goproxy", "pass", "schema", "rego", "reverse", "filewrite", "clickhouse"}
	var got []string
	for _, p := range res.Paths {
		got = append(got, p.Key)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paths %v, want %v", got, want)
	}
	for _, k := range want {
		ss := res.Samples[k]
		if len(ss) != 1 {
			t.Fatalf("%s: %d samples, want 1", k, len(ss))
		}
		s := ss[0]
		if s.Requests <= 0 || s.RPS <= 0 || s.P50us <= 0 || s.P99us < s.P50us {
			t.Errorf("%s: implausible sample %+v", k, s)
		}
		if k != "direct" && (s.ProxyCPUus <= 0 || s.ProxyCPU1us <= 0) {
			t.Errorf("%s: no CPU measured for the proxy: %+v", k, s)
		}
		if s.ProxyUserus < 0 || s.ProxyUserus > s.ProxyCPUus || (k == "rego" && s.ProxyUserus == 0) {
			t.Errorf("%s: the proxy's user CPU %.1f µs is not part of its CPU %.1f µs", k, s.ProxyUserus, s.ProxyCPUus)
		}
		if s.UpstreamCPUs <= 0 {
			t.Errorf("%s: no CPU measured for the upstream: %+v", k, s)
		}
	}
	for _, label := range []string{"| direct (Go net/http upstream) | ", "| nginx reverse proxy", "| nginx + OPA server", "| squid forward proxy", "| Go TCP relay (no HTTP, no checks: the floor) |", "| bare goproxy forward proxy",
		"| toolgate forward, schema + 5-rule Rego |", "| toolgate forward, schema + Rego, events to ClickHouse |", "vs direct", "| over the relay |"} {
		if !strings.Contains(stdout, label) {
			t.Errorf("the table lacks %q", label)
		}
	}
	if left := children(); len(left) > 0 {
		t.Errorf("processes the benchmark started are still running: %v", left)
	}
}

// runJSON runs the benchmark with args, fails the test unless it exits 0,
// and returns its table and its -json result.
func runJSON(t *testing.T, args ...string) (string, result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "res.json")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(args, "-json", out), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	t.Log(stdout.String())
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return stdout.String(), res
}

// children lists this process's live child processes (zombies aside).
func children() []string {
	ents, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == self && f[0] != "Z" {
			out = append(out, e.Name()+" "+string(b[:i+1]))
		}
	}
	return out
}

func TestParseWrk(t *testing.T) {
	const report = `Running 1s test @ http://127.0.0.1:40000
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms  500.00us   9.00ms   80.00%
    Req/Sec    13.00k     1.00k   15.00k    70.00%
  Latency Distribution
     50%   67.00us
     75%    1.01ms
     90%    1.80ms
     99%    2.50ms
  26000 requests in 1.00s, 8.00MB read
Requests/sec:  25990.12
Transfer/sec:      8.00MB
`
	r, err := parseWrk(strings.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 26000 || r.rps != 25990.12 || r.p50 != 67 || r.p99 != 2500 {
		t.Fatalf("got %+v", r)
	}
	for name, extra := range map[string]string{
		"non-2xx":       "  Non-2xx or 3xx responses: 12\n",
		"socket errors": "  Socket errors: connect 0, read 3, write 0, timeout 0\n",
	} {
		if _, err := parseWrk(strings.NewReader(report + extra)); err == nil {
			t.Errorf("%s: a run with failed calls parsed without error", name)
		}
	}
	if _, err := parseWrk(strings.NewReader("wrk: connection refused\n")); err == nil {
		t.Error("a report without figures parsed without error")
	}
}

// TestTogether runs two builds (the same binary twice) with -together: each
// round measures both at once, and the table reports each build's CPU per
// call, which must be real (calls made, CPU spent), and their ratio.
func TestTogether(t *testing.T) {
	if _, err := lookPath("wrk"); err != nil {
		t.Skip("wrk is not installed: scripts/testdeps.sh --bench installs the external benchmark's tools")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testutil.ToolgateBinary(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stdout, res := runJSON(t, "-toolgate", "a="+bin, "-toolgate", "b="+bin, "-together", "-only", "pass$",
		"-rounds", "2", "-duration", "1s", "-latency-duration", "1s", "-warmup", "0s", "-clickhouse=false")
	ss := res.Together["pass"]
	if len(ss) != 2 {
		t.Fatalf("together: %d rounds of pass, want 2: %+v", len(ss), res.Together)
	}
	for i, s := range ss {
		for name, x := range map[string]sample{"a": s.A, "b": s.B} {
			if x.Requests <= 0 || x.ProxyCPUus <= 0 || x.ProxyUserus <= 0 || x.ProxyUserus > x.ProxyCPUus {
				t.Errorf("round %d, build %s: implausible %+v", i+1, name, x)
			}
		}
	}
	if !strings.Contains(stdout, "| pass | ") || !strings.Contains(stdout, "b/a CPU by round") {
		t.Errorf("the table lacks the pass row or the ratio column:\n%s", stdout)
	}
	if left := children(); len(left) > 0 {
		t.Errorf("processes the benchmark started are still running: %v", left)
	}
	var stderr2 bytes.Buffer
	if code := run(context.Background(), []string{"-toolgate", "a=" + bin, "-together"}, io.Discard, &stderr2); code != 2 || !strings.Contains(stderr2.String(), "give -toolgate twice") {
		t.Errorf("-together with one build: exit %d, %q; want 2 and a hint", code, stderr2.String())
	}
}

// TestPairedBuilds runs two builds (the same binary twice) one after the
// other in each round: below the table, each variant of the second build
// is paired with the first's round by round, and those figures are the
// medians of the rounds' own ratios in the -json result.
func TestPairedBuilds(t *testing.T) {
	if _, err := lookPath("wrk"); err != nil {
		t.Skip("wrk is not installed: scripts/testdeps.sh --bench installs the external benchmark's tools")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testutil.ToolgateBinary(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stdout, res := runJSON(t, "-toolgate", "a="+bin, "-toolgate", "b="+bin, "-only", "pass$",
		"-rounds", "2", "-duration", "1s", "-latency-duration", "1s", "-warmup", "0s", "-clickhouse=false")
	a, b := res.Samples["a-pass"], res.Samples["b-pass"]
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("samples a-pass %d, b-pass %d; want 2 rounds each: %v", len(a), len(b), res.Samples)
	}
	var cpu []float64
	for i := range a {
		cpu = append(cpu, b[i].ProxyCPUus/a[i].ProxyCPUus)
	}
	want := fmt.Sprintf("| pass | b | x%.3f | x%.3f |", median([]float64{b[0].RPS / a[0].RPS, b[1].RPS / a[1].RPS}), median(cpu))
	if !strings.Contains(stdout, "Paired by round against a") || !strings.Contains(stdout, want) {
		t.Errorf("the paired table lacks %q:\n%s", want, stdout)
	}
	if left := children(); len(left) > 0 {
		t.Errorf("processes the benchmark started are still running: %v", left)
	}
}

// TestOverRelayByRound: a path's p50 above the relay's is taken round by
// round against the same round's relay, its median shown for every path
// but direct and the relay; a run without the relay shows none.
func TestOverRelayByRound(t *testing.T) {
	res := &result{
		Paths: []path{{Key: "direct", Label: "direct"}, {Key: "relay", Label: "relay"}, {Key: "rego", Label: "rego", proc: &proc{}}},
		Samples: map[string][]sample{
			"direct": {{RPS: 40000, P50us: 100}, {RPS: 20000, P50us: 200}, {RPS: 30000, P50us: 150}},
			"relay":  {{RPS: 24000, P50us: 220}, {RPS: 12000, P50us: 400}, {RPS: 18000, P50us: 260}},
			"rego":   {{RPS: 12000, P50us: 300}, {RPS: 6000, P50us: 520}, {RPS: 9000, P50us: 350}},
		},
	}
	// Each round: 80, 120, 90 µs over the relay; median 90. The medians
	// of each path's own p50s (300 and 260) would say 40.
	if r := summarize(res)["rego"]; !r.hasRelay || math.Abs(r.overRelay-90) > 1e-9 {
		t.Errorf("rego over the relay %+v; want 90 µs", r)
	}
	var b strings.Builder
	printTable(&b, options{conns: 32}, res)
	over := map[string]string{} // each row's "over the relay" cell
	col := -1
	for _, l := range strings.Split(b.String(), "\n") {
		cells := strings.Split(l, " | ")
		if col < 0 {
			col = slices.Index(cells, "over the relay")
			continue
		}
		if len(cells) > col && strings.HasPrefix(l, "| ") {
			over[strings.TrimPrefix(cells[0], "| ")] = cells[col]
		}
	}
	if want := map[string]string{"direct": "—", "relay": "—", "rego": "+90"}; col < 0 || !maps.Equal(over, want) {
		t.Errorf("the table's column over the relay reads %v, want %v:\n%s", over, want, b.String())
	}
	delete(res.Samples, "relay")
	res.Paths = slices.DeleteFunc(res.Paths, func(p path) bool { return p.Key == "relay" })
	if r := summarize(res)["rego"]; r.hasRelay {
		t.Errorf("a run without the relay shows a figure over it: %+v", r)
	}
}

// TestPairBuildsByRound: a build measured in a loud round and a quiet one
// is compared with its base in each round, not as medians of each build's
// own rounds, so the rounds' swings cancel.
func TestPairBuildsByRound(t *testing.T) {
	res := &result{
		Paths: []path{{Key: "direct"}, {Key: "old-rego", Build: "old", Variant: "rego"}, {Key: "new-rego", Build: "new", Variant: "rego"}},
		Samples: map[string][]sample{
			"direct":   {{RPS: 40000, P50us: 100}, {RPS: 20000, P50us: 200}, {RPS: 30000, P50us: 150}},
			"old-rego": {{RPS: 10000, ProxyCPUus: 100, ProxyCPU1us: 200, P50us: 400}, {RPS: 4000, ProxyCPUus: 200, ProxyCPU1us: 400, P50us: 600}, {RPS: 6000, ProxyCPUus: 150, ProxyCPU1us: 300, P50us: 500}},
			"new-rego": {{RPS: 11000, ProxyCPUus: 90, ProxyCPU1us: 190, P50us: 380}, {RPS: 4400, ProxyCPUus: 180, ProxyCPU1us: 380, P50us: 590}, {RPS: 6000, ProxyCPUus: 150, ProxyCPU1us: 300, P50us: 500}},
		},
	}
	rows := pairBuilds([]build{{"old", ""}, {"new", ""}}, res)
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.variant != "rego" || r.build != "new" || r.base != "old" || r.rounds != 3 {
		t.Errorf("row %+v names the wrong builds or rounds", r)
	}
	// Each round's ratios: throughput 1.1, 1.1, 1.0; CPU 0.9, 0.9, 1.0;
	// added p50 -20, -10, 0 µs.
	if math.Abs(r.rps-1.1) > 1e-9 || math.Abs(r.cpu-0.9) > 1e-9 || math.Abs(r.p50Added-(-10)) > 1e-9 {
		t.Errorf("paired medians %+v; want x1.1 throughput, x0.9 CPU, -10 µs", r)
	}
	if rows := pairBuilds([]build{{"old", ""}}, res); rows != nil {
		t.Errorf("one build paired: %+v", rows)
	}
}
