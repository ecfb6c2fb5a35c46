package proxy_test

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policies/approval"
)

// BenchmarkApprovalOverhead measures what the approval step costs a call
// that needs no approval: two sidecars over one upstream, one without the
// step and one with it (a gate whose tools need none), called over one
// connection each in alternating bursts (A B, then B A); it reports the
// median of the paired differences in latency per call, and each side's
// median. Run it with -benchtime 1x; the machine's noise is the floor.
func BenchmarkApprovalOverhead(b *testing.B) {
	off, _ := newApprovalEnvGate(b, approval.Config{}, false)
	on, _ := newApprovalEnvGate(b, approval.Config{}, true)
	const rounds, burst = 20, 300 * time.Millisecond
	run := func(e *env) float64 {
		u := e.up.URL() + "/esearch?term=x&retmax=3"
		n := 0
		start := time.Now()
		for time.Since(start) < burst {
			resp, err := e.viaHTTP.Get(u)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
			n++
		}
		return float64(time.Since(start).Microseconds()) / float64(n)
	}
	run(off)
	run(on)
	var diff, offs, ons []float64
	for i := range b.N * rounds {
		var a, g float64
		if i%2 == 0 {
			a, g = run(off), run(on)
		} else {
			g, a = run(on), run(off)
		}
		diff, offs, ons = append(diff, g-a), append(offs, a), append(ons, g)
	}
	for _, s := range [][]float64{diff, offs, ons} {
		slices.Sort(s)
	}
	b.ReportMetric(diff[len(diff)/2], "added-us/call")
	b.ReportMetric(offs[len(offs)/2], "off-us/call")
	b.ReportMetric(ons[len(ons)/2], "on-us/call")
}
