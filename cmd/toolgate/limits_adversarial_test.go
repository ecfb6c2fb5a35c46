package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The adversarial group for loop breaking, budgets and rate limits: each
// attack respells a call (its arguments, its host, its session) to get more
// calls to a real upstream than the configured limit lets through. It is
// judged by what the upstream executed, never by toolgate's answers: every
// call the upstream served past the limit is counted as over the limit, and
// the group fails unless that count is 0. It lives beside the cmd because
// budgets need the whole configuration's wiring (cmd/toolgate/internal/config).

// execUpstream is a real upstream that executes calls: it reads each body
// with encoding/json (numbers as json.Number, the way a Go server that
// keeps precision reads them) and records it.
type execUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	runs []execRun
}

// execRun is one call the upstream executed.
type execRun struct {
	session string
	args    map[string]any
}

func startExecUpstream(t *testing.T) *execUpstream {
	t.Helper()
	u := &execUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var args map[string]any
		if len(b) > 0 {
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			_ = d.Decode(&args)
		}
		u.mu.Lock()
		u.runs = append(u.runs, execRun{session: r.Header.Get("X-Toolgate-Session"), args: args})
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"done":true}`))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// port is the upstream's port.
func (u *execUpstream) port() string { return u.srv.URL[strings.LastIndexByte(u.srv.URL, ':')+1:] }

// executed is the number of calls the upstream served.
func (u *execUpstream) executed() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.runs)
}

// limitsTally counts one attack group's outcome.
type limitsTally struct {
	tried, refused, overLimit int
}

// limitsConfig is a sidecar in front of one upstream: a tool whose
// arguments come from a JSON body, on the host spelling toolHost, with the
// budgets section given.
func limitsConfig(toolHost, budgets string) string {
	return `listen:
  forward: 127.0.0.1:0
admin:
  listen: off
events:
  sidecar: limits
  file:
    path: events.ndjson
tools:
  - name: search
    match: {host: "` + toolHost + `", method: POST, path: /search}
    schema:
      type: object
      properties:
        term: {type: string}
        retmax: {type: number}
        filter: {type: object}
` + budgets
}

// postThrough posts body to target through the forward proxy and returns
// the status (0 when the proxy did not answer).
func postThrough(c *http.Client, target, body string, header map[string]string) int {
	req, err := http.NewRequest("POST", target, strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdversarialLoopRespelled: with loops.max_repeats 2, one session sends
// the same call again and again, each time spelt differently (the number
// 5 as 5.0, 5e0, 50e-1, 0.5e1...; the string with escapes; members in
// another order; white space). The upstream must execute it at most twice.
// Controls: calls that differ in value (6, a 20-digit integer one apart,
// a decimal one digit longer) each pass, as a reader would tell them apart.
func TestAdversarialLoopRespelled(t *testing.T) {
	t.Parallel()
	up := startExecUpstream(t)
	r := startRun(t, t.TempDir(), limitsConfig("127.0.0.1", `budgets:
  loops:
    max_repeats: 2
    window: 10m
`))
	c := proxyClient(t, r.running(t).Forward)
	target := up.srv.URL + "/search"
	variants := []string{
		`{"term":"p53","retmax":5}`,
		`{"term":"p53","retmax":5.0}`,
		`{"term":"p53","retmax":5e0}`,
		`{"term":"p53","retmax":50e-1}`,
		`{"term":"p53","retmax":0.5e1}`,
		`{"term":"p53","retmax":5E+0}`,
		`{"term":"p53","retmax":500e-2}`,
		`{"term":"p53","retmax":5.000000000000000000000}`,
		`{"retmax":5,"term":"p53"}`,
		`{"term":"\u0070\u0035\u0033","retmax":5}`,
		`{"term":"p\u00353","retmax":5}`,
		`{ "term" : "p53" , "retmax" : 5 }`,
		`{"\u0074erm":"p53","retmax":5}`,
		`{"term":"p53","retmax":5,"filter":{"a":1,"b":[0,-0.0]}}`,
		`{"filter":{"b":[-0,0e3],"a":1.0},"retmax":5,"term":"p53"}`,
		`{"term":"p53","retmax":5,"filter":{"b":[0,0],"a":10e-1}}`,
	}
	var tally limitsTally
	for _, session := range []string{"loop-a", "loop-b"} {
		before := up.executed()
		// The plain call twice, then every respelling; the two with a
		// filter are another call (their own budget of two).
		plain, filtered := 0, 0
		for _, v := range append([]string{variants[0]}, variants...) {
			tally.tried++
			st := postThrough(c, target, v, map[string]string{"X-Toolgate-Session": session})
			if st != http.StatusOK {
				tally.refused++
			}
			if strings.Contains(v, "filter") {
				filtered++
			} else {
				plain++
			}
		}
		got := up.executed() - before
		if over := got - 4; over > 0 { // two of the plain call, two of the filtered one
			tally.overLimit += over
			t.Errorf("session %s: the upstream executed %d of %d respelt calls (%d plain, %d filtered); max_repeats 2 lets 4 through", session, got, plain+filtered, plain, filtered)
		}
	}
	// Different values, each a new call: none is refused.
	for _, v := range []string{
		`{"term":"p53","retmax":6}`,
		`{"term":"p53","retmax":12345678901234567890}`,
		`{"term":"p53","retmax":12345678901234567891}`,
		`{"term":"p53","retmax":0.1}`,
		`{"term":"p53","retmax":0.10000000000000000001}`,
		`{"term":"P53","retmax":5}`,
		`{"term":"p53 ","retmax":5}`,
		`{"term":"p53","retmax":-5}`,
	} {
		if st := postThrough(c, target, v, map[string]string{"X-Toolgate-Session": "loop-a"}); st != http.StatusOK {
			t.Errorf("%s: %d; a call with another value is another call", v, st)
		}
	}
	t.Logf("loop respellings: tried %d, refused %d, executed past the limit %d", tally.tried, tally.refused, tally.overLimit)
}

// loopbackConfigSpellings name the upstream 127.0.0.1:PORT in the
// configuration; loopbackCallSpellings call it. Every pair is one upstream.
var (
	loopbackConfigSpellings = []string{"127.0.0.1:PORT", "localhost:PORT", "LOCALHOST.:PORT", "127.1:PORT", "[::ffff:127.0.0.1]:PORT", "0x7f000001:0PORT", "[::1]:PORT"}
	loopbackCallSpellings   = []string{"127.0.0.1:PORT", "localhost:PORT", "LocalHost.:PORT", "127.1:PORT", "[::ffff:127.0.0.1]:PORT", "2130706433:PORT", "0177.0.0.1:PORT", "[::1]:PORT", "127.0.0.1:0PORT", "api.localhost:PORT"}
)

// TestAdversarialLimitsHostSpellings configures an upstream rate limit
// (burst 2, a rate that refills nothing during the test) and a tool's call
// budget (2 calls) under one spelling of the upstream's host and calls it
// under every other, through the forward proxy: the upstream must execute
// at most 2 calls per sidecar. Both directions are covered: every config
// spelling against every call spelling, the tool's own host spelt as
// 127.0.0.1 and as localhost.
func TestAdversarialLimitsHostSpellings(t *testing.T) {
	t.Parallel()
	var rate, budget limitsTally
	for _, toolHost := range []string{"127.0.0.1", "localhost"} {
		for _, cfgHost := range loopbackConfigSpellings {
			up := startExecUpstream(t)
			port := up.port()
			host := strings.ReplaceAll(cfgHost, "PORT", port)
			for _, kind := range []string{"rate", "budget"} {
				tl := &rate
				section := fmt.Sprintf("budgets:\n  upstreams:\n    - {host: %q, rate: 0.0001, burst: 2}\n", host)
				if kind == "budget" {
					tl = &budget
					section = "budgets:\n  limits:\n    - {name: two, calls: 2, window: 10m, tools: [search]}\n"
				}
				r := startRun(t, t.TempDir(), limitsConfig(toolHost+":"+port, section))
				l := r.running(t)
				c := proxyClient(t, l.Forward)
				before := up.executed()
				for _, callHost := range loopbackCallSpellings {
					tl.tried++
					target := "http://" + strings.ReplaceAll(callHost, "PORT", port) + "/search"
					if st := postThrough(c, target, `{"term":"p53"}`, nil); st != http.StatusOK {
						tl.refused++
					}
				}
				if got := up.executed() - before; got > 2 {
					tl.overLimit += got - 2
					t.Errorf("%s configured as %s, tool on %s: the upstream executed %d of %d calls; the limit is 2", kind, host, toolHost, got, len(loopbackCallSpellings))
				}
				if code := r.stop(t); code != 0 {
					t.Fatalf("sidecar exit %d", code)
				}
			}
		}
	}
	t.Logf("rate limits across host spellings: tried %d, refused %d, executed past the limit %d", rate.tried, rate.refused, rate.overLimit)
	t.Logf("budgets across host spellings: tried %d, refused %d, executed past the limit %d", budget.tried, budget.refused, budget.overLimit)
}

// TestAdversarialLoopbackSpelledTwice is the review's host class turned on
// the tools: two tools naming one loopback upstream two ways (localhost on
// one port, 127.0.0.1 on another) would let a call take one name on the
// other's port, match no tool and reach it unchecked. Such a configuration
// is refused at its line.
func TestAdversarialLoopbackSpelledTwice(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(limitsConfig("localhost:9001", ""), "tools:\n", "tools:\n  - name: other\n    match: {host: \"127.0.0.1:9002\", path: /x}\n", 1)
	path := t.TempDir() + "/toolgate.yaml"
	writeFile(t, path, cfg)
	// A configuration that loads would run until the context ends: give
	// it a generous bound, so a regression fails instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"run", "--config", path}, &stdout, &stderr); code == 0 || ctx.Err() != nil {
		t.Fatalf("the sidecar ran (exit %d); stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "toolgate.yaml:13: tools[1].match.host: localhost:9001 is the loopback host that tools[0] (other) names as 127.0.0.1:9002") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestAdversarialSessionSpellings sends one call under session-id
// spellings. The session key is the header's value as sent (up to
// limits.max_caller_id_bytes): HTTP's parser drops the white space around
// it, so " s1 " is s1, while case is kept ("S1" is another session, as it
// is to any server that keys by it). A caller picks its session ids, so a
// per-session budget bounds a session, not a caller; the budget without
// per bounds every call, whatever session it claims: the upstream must
// execute at most its 3 calls.
func TestAdversarialSessionSpellings(t *testing.T) {
	t.Parallel()
	up := startExecUpstream(t)
	r := startRun(t, t.TempDir(), limitsConfig("127.0.0.1", `budgets:
  limits:
    - {name: per_session, per: [session], calls: 2, window: 10m}
    - {name: all, calls: 3, window: 10m}
`))
	c := proxyClient(t, r.running(t).Forward)
	target := up.srv.URL + "/search"
	var tally limitsTally
	send := func(session string) int {
		tally.tried++
		st := postThrough(c, target, `{"term":"p53"}`, map[string]string{"X-Toolgate-Session": session})
		if st != http.StatusOK {
			tally.refused++
		}
		return st
	}
	// White space around the id: one session of 2 calls.
	for _, s := range []string{"s1", " s1", "s1 ", "\ts1"} {
		send(s)
	}
	if got := up.executed(); got > 2 {
		tally.overLimit += got - 2
		t.Errorf("white-space spellings of one session: the upstream executed %d calls; per_session allows 2", got)
	}
	// Case and other spellings: other sessions, but the budget without
	// per still holds them all to 3.
	for _, s := range []string{"S1", "s1\u200b", "s2", "s3", "s4"} {
		send(s)
	}
	if got := up.executed(); got > 3 {
		tally.overLimit += got - 3
		t.Errorf("session spellings: the upstream executed %d calls; the budget 'all' allows 3", got)
	}
	t.Logf("session spellings: tried %d, refused %d, executed past the limit %d", tally.tried, tally.refused, tally.overLimit)
}

// TestSecurityDocLimitsRows checks that every test docs/security.md's
// "Limits read meaning, not spelling" table names exists in the package
// the table says.
func TestSecurityDocLimitsRows(t *testing.T) {
	checkSecurityDocSection(t, "Limits read meaning, not spelling", "`((?:Test|Fuzz)[A-Za-z]+)`", 8,
		".", "internal/config", "../../policies/budget", "../../proxy", "../../proxy/internal/conf")
}

// checkSecurityDocSection checks that every test name that pattern finds
// in docs/security.md's section under heading is a test function of one
// of dirs, and that at least min names were found.
func checkSecurityDocSection(t *testing.T, heading, pattern string, min int, dirs ...string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/security.md has no section %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var src strings.Builder
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	n := 0
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(sec, -1) {
		n++
		if !strings.Contains(src.String(), "func "+m[1]+"(") {
			t.Errorf("docs/security.md names %s, which is no test", m[1])
		}
	}
	if n < min {
		t.Errorf("found %d test names in the section; has its table changed?", n)
	}
}
