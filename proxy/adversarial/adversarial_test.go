package adversarial_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// mainConfig is the gate of TestAdversarial: for each plain-HTTP upstream a
// reverse listener (the base URL a legacy service is given) and two tools
// on /v1/tools, GET and POST, both with toolSchema; the forward listener
// serves the proxy variable.
func mainConfig(w *world, mode string) string {
	var b strings.Builder
	b.WriteString("listen:\n  forward: 127.0.0.1:0\n  reverse:\n")
	for _, u := range w.ups {
		fmt.Fprintf(&b, "    - {listen: \"127.0.0.1:0\", upstream: %q}\n", u.origin())
	}
	fmt.Fprintf(&b, "unmatched: %s\nmax_body_bytes: 65536\ntools:\n", mode)
	for _, u := range w.ups {
		for _, m := range []string{"GET", "POST"} {
			fmt.Fprintf(&b, "  - name: %s_%s\n    match: {host: %q, method: %s, path: /v1/tools}\n    schema: %s\n",
				u.name, strings.ToLower(m), u.authority(), m, toolSchema)
		}
	}
	return b.String()
}

// cells lists the targets of one gate: each upstream through the forward
// listener and through its reverse listener.
func cells(g *gate, w *world, mode string) []cell {
	var out []cell
	for i, u := range w.ups {
		out = append(out,
			cell{up: u, listener: "forward", mode: mode, addr: g.srv.Addr("forward", 0)},
			cell{up: u, listener: "reverse", mode: mode, addr: g.srv.Addr("reverse", i)})
	}
	return out
}

// TestAdversarial runs every attack of the table against a real toolgate
// in front of the Go, Flask and nginx-fronted upstreams, through the
// forward and the reverse listener, with unmatched: pass (the default) and
// deny. It fails on any leak: a tool's handler that parsed an argument
// toolgate's schema refuses, or that served a call toolgate did not inspect
// as that tool; an injected secret at another origin; an upstream's
// X-Toolgate-* header at the caller; an unbounded caller-set value in an
// event. Controls (valid calls) must reach the handler, checked.
// TOOLGATE_ADVERSARIAL_REPORT=1 lists every result and never fails on a leak.
func TestAdversarial(t *testing.T) {
	w := shared(t)
	o := newOracle(t)
	type run struct {
		j     *judge
		cells []cell
	}
	var runs []run
	for _, mode := range []string{"pass", "deny"} {
		g, err := startGate(t, mainConfig(w, mode))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{j: &judge{g: g, o: o, w: w}, cells: cells(g, w, mode)})
	}
	rep := newReport()
	start := time.Now()
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			for _, r := range runs {
				r.j.t = t
				for _, c := range r.cells {
					if a.forward && c.listener != "forward" {
						continue
					}
					trace, tp := newTrace()
					raw, method := a.req.render(c, tp)
					resp, err := exchange(c.addr, raw, method, 5*time.Second)
					v := r.j.verdict(trace, resp, err)
					rep.add(t, a.name, c.String(), v)
					if a.control && (v.reached == 0 || !v.mediated) {
						t.Errorf("%s: control got %s (%s), want it inspected and forwarded to the tool's handler", c, v.outcome, strings.Join(v.notes, "; "))
					}
				}
			}
		})
	}
	t.Logf("%d attacks in %v", len(attacks), time.Since(start).Round(time.Millisecond))
	rep.print(t, "TestAdversarial")
}
