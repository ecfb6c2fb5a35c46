//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// pairSample is one -together round of one variant: each build's CPU per
// call and calls per second, both measured over the same seconds.
type pairSample struct {
	A sample `json:"a"`
	B sample `json:"b"`
}

// ratio is B's CPU per call over A's in the round (0 when either did not
// run).
func (s pairSample) ratio() float64 {
	if s.A.ProxyCPUus <= 0 || s.B.ProxyCPUus <= 0 {
		return 0
	}
	return s.B.ProxyCPUus / s.A.ProxyCPUus
}

// pairUp returns, for each variant both builds run, their two paths (the
// first build's first).
func pairUp(paths []path, builds []build) [][2]path {
	var out [][2]path
	for _, a := range paths {
		if a.Build != builds[0].name {
			continue
		}
		for _, b := range paths {
			if b.Build == builds[1].name && b.Variant == a.Variant {
				out = append(out, [2]path{a, b})
			}
		}
	}
	return out
}

// measureTogether runs both paths of a pair at once, each under its own
// wrk with half the connections (and half the threads, at least one), and
// reads each build's CPU over the same window: a busy neighbour or a
// drift of the machine weighs on both alike, which a comparison of runs one
// after the other cannot promise. bFirst starts B's load first (rounds
// alternate, so neither build always has the head start).
func measureTogether(ctx context.Context, o options, dir string, pr [2]path, bFirst bool) (pairSample, error) {
	threads := max(1, o.threads/2)
	conns := o.conns / 2
	type run struct {
		w   wrkResult
		err error
	}
	var s pairSample
	c0 := [2]cpuTime{pr[0].cpu(), pr[1].cpu()}
	done := make(chan struct{}, 2)
	var runs [2]run
	order := [2]int{0, 1}
	if bFirst {
		order = [2]int{1, 0}
	}
	for _, i := range order {
		go func() {
			w, err := runWrk(ctx, dir, pr[i], threads, conns, o.duration)
			runs[i] = run{w, err}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	c1 := [2]cpuTime{pr[0].cpu(), pr[1].cpu()}
	for i, out := range []*sample{&s.A, &s.B} {
		if runs[i].err != nil {
			return s, runs[i].err
		}
		w := runs[i].w
		out.RPS, out.Requests = w.rps, w.requests
		if w.requests > 0 {
			out.ProxyCPUus = perRequest(c1[i].total()-c0[i].total(), w.requests)
			out.ProxyUserus = perRequest(c1[i].user-c0[i].user, w.requests)
		}
	}
	return s, nil
}

// printTogether prints -together's table: each build's medians and, round
// by round, B's CPU per call over A's.
func printTogether(w io.Writer, o options, res *result) {
	a, b := o.builds[0].name, o.builds[1].name
	fmt.Fprintf(w, "\nextbench: %d rounds, %s per round with %s and %s at once, %d connections each (wrk -t%d); medians; elapsed %s\n\n",
		o.rounds, o.duration, a, b, o.conns/2, max(1, o.threads/2), res.Elapsed)
	fmt.Fprintf(w, "| variant | %s CPU µs/call | %s CPU µs/call | %s req/s | %s req/s | %s/%s CPU by round | median |\n", a, b, a, b, b, a)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, p := range res.Paths {
		ss, ok := res.Together[p.Variant]
		if !ok || p.Build != a {
			continue
		}
		var ac, bc, ar, br, ratios []float64
		var each []string
		for _, s := range ss {
			ac, bc = append(ac, s.A.ProxyCPUus), append(bc, s.B.ProxyCPUus)
			ar, br = append(ar, s.A.RPS), append(br, s.B.RPS)
			r := s.ratio()
			ratios = append(ratios, r)
			each = append(each, fmt.Sprintf("%.3f", r))
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %s | %s | **%.3f** |\n",
			p.Variant, median(ac), median(bc), thousands(median(ar)), thousands(median(br)), strings.Join(each, " "), median(ratios))
	}
}
