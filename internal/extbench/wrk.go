//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run reports.
type wrkResult struct {
	rps      float64
	requests int64
	p50, p99 float64 // µs
}

// luaString quotes s as a Lua string literal.
func luaString(s string) string { return strconv.Quote(s) }

// runWrk runs wrk along p with the given threads and connections for d
// (whole seconds) and parses its report. Any non-2xx answer, or a socket
// error, fails the run: a path that refuses or drops calls measures
// nothing.
func runWrk(ctx context.Context, dir string, p path, threads, conns int, d time.Duration) (wrkResult, error) {
	var r wrkResult
	script := filepath.Join(dir, "wrk-"+p.Key+".lua")
	lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.path = %s\nwrk.body = %s\nwrk.headers[\"Content-Type\"] = \"application/json\"\n",
		luaString(p.uri), luaString(benchBody))
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return r, err
	}
	secs := int((d + time.Second - 1) / time.Second)
	cmd := exec.CommandContext(ctx, mustLook("wrk"), "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns),
		"-d", strconv.Itoa(secs)+"s", "--latency", "-s", script, p.connect)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return r, fmt.Errorf("wrk on %s: %w: %s", p.Key, err, out)
	}
	r, err = parseWrk(strings.NewReader(string(out)))
	if err != nil {
		return r, fmt.Errorf("wrk on %s: %w:\n%s", p.Key, err, out)
	}
	return r, nil
}

// parseWrk reads wrk's report (with --latency).
func parseWrk(rd io.Reader) (wrkResult, error) {
	var r wrkResult
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			r.rps, _ = strconv.ParseFloat(f[1], 64)
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			r.requests, _ = strconv.ParseInt(f[0], 10, 64)
		case len(f) == 2 && f[0] == "50%":
			r.p50 = parseDur(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99 = parseDur(f[1])
		case len(f) >= 1 && f[0] == "Non-2xx":
			return r, fmt.Errorf("some answers were not 2xx: %s", sc.Text())
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			return r, fmt.Errorf("socket errors: %s", sc.Text())
		}
	}
	if r.requests == 0 || r.rps == 0 || r.p50 == 0 {
		return r, fmt.Errorf("no requests, rate or p50 in the report")
	}
	return r, nil
}

// parseDur reads wrk's "67.00us", "1.20ms" or "2.00s" as microseconds.
func parseDur(s string) float64 {
	for _, u := range []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"m", 60e6}, {"s", 1e6}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return f * u.us
		}
	}
	return 0
}

// median of xs; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// row is one path's medians; ratio and added p50 are paired with direct
// round by round, and overRelay (the path's p50 less the Go TCP relay's)
// with the relay, when the run measured it (hasRelay).
type row struct {
	rps, ratio, proxyCPU, proxyUser, upCPU, proxyCPU1, p50, addedP50, p99 float64
	overRelay                                                             float64
	hasRelay                                                              bool
}

// summarize computes each path's row from the samples.
func summarize(res *result) map[string]row {
	direct, relay := res.Samples["direct"], res.Samples["relay"]
	rows := map[string]row{}
	for _, p := range res.Paths {
		ss := res.Samples[p.Key]
		var rps, ratio, pc, pu, uc, pc1, p50, added, p99, over []float64
		for i, s := range ss {
			rps = append(rps, s.RPS)
			pc = append(pc, s.ProxyCPUus)
			pu = append(pu, s.ProxyUserus)
			uc = append(uc, s.UpstreamCPUs)
			pc1 = append(pc1, s.ProxyCPU1us)
			p50 = append(p50, s.P50us)
			p99 = append(p99, s.P99us)
			if i < len(direct) && direct[i].RPS > 0 {
				ratio = append(ratio, s.RPS/direct[i].RPS)
				added = append(added, s.P50us-direct[i].P50us)
			}
			if i < len(relay) && relay[i].P50us > 0 {
				over = append(over, s.P50us-relay[i].P50us)
			}
		}
		rows[p.Key] = row{median(rps), median(ratio), median(pc), median(pu), median(uc), median(pc1), median(p50), median(added), median(p99),
			median(over), len(over) > 0}
	}
	return rows
}

// printTable prints the medians as a Markdown table, the command's
// settings above it.
func printTable(w io.Writer, o options, res *result) {
	rows := summarize(res)
	fmt.Fprintf(w, "\nextbench: %d rounds, %s at %d connections (wrk -t%d) and %s at 1 connection per path and round; medians; elapsed %s\n\n",
		o.rounds, o.duration, o.conns, o.threads, o.latDuration, res.Elapsed)
	fmt.Fprintf(w, "| path | req/s @%d | vs direct | proxy CPU µs/req | of it user | upstream CPU µs/req | proxy CPU µs/req @1 | p50 @1 µs | added p50 | over the relay | p99 @1 µs |\n", o.conns)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range res.Paths {
		r := rows[p.Key]
		pc, pu, pc1, over := "—", "—", "—", "—"
		if p.proc != nil {
			pc, pu, pc1 = fmt.Sprintf("%.1f", r.proxyCPU), fmt.Sprintf("%.1f", r.proxyUser), fmt.Sprintf("%.1f", r.proxyCPU1)
		}
		if r.hasRelay && p.Key != "direct" && p.Key != "relay" {
			over = fmt.Sprintf("%+.0f", r.overRelay)
		}
		fmt.Fprintf(w, "| %s | %s | %.2fx | %s | %s | %.1f | %s | %.0f | %+.0f | %s | %.0f |\n",
			p.Label, thousands(r.rps), r.ratio, pc, pu, r.upCPU, pc1, r.p50, r.addedP50, over, r.p99)
	}
}

// thousands formats a rate with a thousands separator.
func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// pairedRow is one toolgate variant of a later build against the same
// variant of the first build: each figure the median over the rounds of
// that round's ratio (or difference), the two paths measured minutes
// apart in the same round rather than in separate runs.
type pairedRow struct {
	variant, build, base     string
	rps, cpu, cpu1, p50Added float64 // ratios, and the added p50's difference in µs
	rounds                   int
}

// pairBuilds pairs, round by round, every toolgate path of a later build
// with the same variant of the first build (o.builds[0]). Rounds where
// either path lacks a sample, or a figure is zero, are left out of that
// figure.
func pairBuilds(builds []build, res *result) []pairedRow {
	if len(builds) < 2 {
		return nil
	}
	base := builds[0].name
	baseKey := map[string]string{} // variant → the first build's path key
	for _, p := range res.Paths {
		if p.Build == base {
			baseKey[p.Variant] = p.Key
		}
	}
	direct := res.Samples["direct"]
	var out []pairedRow
	for _, p := range res.Paths {
		bk, ok := baseKey[p.Variant]
		if p.Build == "" || p.Build == base || !ok {
			continue
		}
		a, b := res.Samples[bk], res.Samples[p.Key]
		var rps, cpu, cpu1, added []float64
		for i := range min(len(a), len(b)) {
			if a[i].RPS > 0 {
				rps = append(rps, b[i].RPS/a[i].RPS)
			}
			if a[i].ProxyCPUus > 0 {
				cpu = append(cpu, b[i].ProxyCPUus/a[i].ProxyCPUus)
			}
			if a[i].ProxyCPU1us > 0 {
				cpu1 = append(cpu1, b[i].ProxyCPU1us/a[i].ProxyCPU1us)
			}
			if i < len(direct) {
				added = append(added, (b[i].P50us-direct[i].P50us)-(a[i].P50us-direct[i].P50us))
			}
		}
		out = append(out, pairedRow{variant: p.Variant, build: p.Build, base: base,
			rps: median(rps), cpu: median(cpu), cpu1: median(cpu1), p50Added: median(added), rounds: min(len(a), len(b))})
	}
	return out
}

// printPaired prints pairBuilds' rows, when the run measured more than
// one build.
func printPaired(w io.Writer, o options, res *result) {
	rows := pairBuilds(o.builds, res)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPaired by round against %s (medians of each round's ratio; added p50 as a difference):\n\n", rows[0].base)
	fmt.Fprintf(w, "| variant | build | req/s @%d | proxy CPU µs/req | proxy CPU µs/req @1 | added p50 @1 | rounds |\n", o.conns)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | x%.3f | x%.3f | x%.3f | %+.0f µs | %d |\n", r.variant, r.build, r.rps, r.cpu, r.cpu1, r.p50Added, r.rounds)
	}
}
