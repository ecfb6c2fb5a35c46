package adversarial_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
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
					rep.add(t, a.name, a.point, c.String(), v)
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

// clientAttack is an attack sent by Go's own http.Client configured as a
// legacy service is: a proxy URL (the forward listener) or a base URL (the
// reverse listener).
type clientAttack struct {
	name    string
	point   string
	control bool
	forward bool // only through the proxy URL (it names a host)
	// build makes the request for base, the upstream's URL as the client
	// sees it ("http://localhost:PORT" through the proxy, the reverse
	// listener's URL otherwise).
	build func(c cell, base string) (*http.Request, error)
}

func clientPost(path, ctype, body string) func(cell, string) (*http.Request, error) {
	return func(_ cell, base string) (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err == nil && ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		return r, err
	}
}

var clientAttacks = []clientAttack{
	{name: "client-control-valid-json", point: "control", control: true, build: clientPost("/v1/tools", "application/json", goodJSON)},
	{name: "client-control-bad-json", point: "control", build: clientPost("/v1/tools", "application/json", badJSON)},
	{name: "client-text-plain", point: "1", build: clientPost("/v1/tools", "text/plain", badJSON)},
	{name: "client-no-content-type", point: "1", build: clientPost("/v1/tools", "", badJSON)},
	{name: "client-multipart", point: "1", build: func(_ cell, base string) (*http.Request, error) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		mw.WriteField("retmax", "500")
		mw.WriteField("evil", "1")
		mw.Close()
		r, err := http.NewRequest(http.MethodPost, base+"/v1/tools", &b)
		if err == nil {
			r.Header.Set("Content-Type", mw.FormDataContentType())
		}
		return r, err
	}},
	{name: "client-lower-case-method", point: "2", build: func(_ cell, base string) (*http.Request, error) {
		r, err := http.NewRequest("post", base+"/v1/tools?"+badQuery, strings.NewReader(badForm))
		if err == nil {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		return r, err
	}},
	{name: "client-escaped-path", point: "2", build: func(_ cell, base string) (*http.Request, error) {
		r, err := http.NewRequest(http.MethodGet, base+"/v1/%74ools?"+badQuery, nil)
		return r, err
	}},
	{name: "client-redirected-dot-path", point: "2", build: func(_ cell, base string) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, base+"/v1/./tools?"+badQuery, nil)
	}},
	{name: "client-ip-alias", point: "3", forward: true, build: func(c cell, _ string) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, "http://127.0.0.1:"+c.up.port+"/v1/tools?"+badQuery, nil)
	}},
}

// TestAdversarialClients sends attacks with Go's http.Client set up as a
// legacy service's: HTTP_PROXY-style through the forward listener, and a
// base URL on the reverse listener. The client follows redirects, as
// legacy clients do.
func TestAdversarialClients(t *testing.T) {
	w := shared(t)
	o := newOracle(t)
	g, err := startGate(t, mainConfig(w, "pass"))
	if err != nil {
		t.Fatal(err)
	}
	j := &judge{g: g, o: o, w: w}
	viaProxy := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: g.srv.Addr("forward", 0)})}}
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	rep := newReport()
	for _, a := range clientAttacks {
		t.Run(a.name, func(t *testing.T) {
			j.t = t
			for _, c := range cells(g, w, "pass") {
				if a.forward && c.listener != "forward" {
					continue
				}
				cl, base := viaProxy, "http://"+c.up.authority()
				if c.listener == "reverse" {
					cl, base = direct, "http://"+c.addr
				}
				req, err := a.build(c, base)
				if err != nil {
					t.Fatal(err)
				}
				trace, tp := newTrace()
				req.Header.Set("Traceparent", tp)
				resp, err := cl.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				v := j.verdict(trace, resp, err)
				rep.add(t, a.name, a.point, c.String(), v)
				if a.control && (v.reached == 0 || !v.mediated) {
					t.Errorf("%s: control got %s (%s), want it inspected and forwarded to the tool's handler", c, v.outcome, strings.Join(v.notes, "; "))
				}
			}
		})
	}
	rep.print(t, "TestAdversarialClients")
}
