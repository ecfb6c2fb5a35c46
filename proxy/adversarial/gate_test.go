package adversarial_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// toolSchema is every tool's schema: retmax at most 10, nothing but term
// and retmax. Each attack tries to get retmax=500 or an unknown argument
// (evil) to a tool's handler.
const toolSchema = `{type: object, additionalProperties: false, properties: {term: {type: string, maxLength: 64}, retmax: {type: integer, minimum: 1, maximum: 10}}}`

// toolSchemaJSON is toolSchema as JSON, for the oracle.
const toolSchemaJSON = `{"type":"object","additionalProperties":false,"properties":{"term":{"type":"string","maxLength":64},"retmax":{"type":"integer","minimum":1,"maximum":10}}}`

// secretPrefix starts every secret the suite's tools inject (as X-Api-Key).
const secretPrefix = "secret-"

// maxCallerBytes bounds the agent and session values an event may carry:
// the caller sets those headers freely (~256 bytes, with room for a
// truncation mark).
const maxCallerBytes = 300

// gate is a real toolgate configured from YAML, its events going to a real
// NDJSON file.
type gate struct {
	srv    *proxy.Server
	queue  *sink.Queue
	file   *sink.File
	path   string
	off    int64
	events []sink.Event
}

// startGate decodes and validates cfgYAML as the cmd does (known fields
// only) and starts the listeners. A configuration toolgate refuses is
// returned as an error, so a test can count a refusal at load time. Each
// tweak may set an Option the file cannot (the egress group's resolver).
func startGate(t testing.TB, cfgYAML string, tweak ...func(*proxy.Options)) (*gate, error) {
	t.Helper()
	return startGateWith(t, cfgYAML, proxy.Snapshot{}, nil, tweak...)
}

// startGateSnap is startGate with the snapshot's collaborators (checkers)
// taken from snap.
func startGateSnap(t testing.TB, cfgYAML string, snap proxy.Snapshot) (*gate, error) {
	t.Helper()
	return startGateWith(t, cfgYAML, snap, nil)
}

// startGateApprover is startGate with an approval step (nil: none).
func startGateApprover(t testing.TB, cfgYAML string, approver proxy.Approver) (*gate, error) {
	t.Helper()
	return startGateWith(t, cfgYAML, proxy.Snapshot{}, approver)
}

// startGateWith is startGate with the snapshot's collaborators from snap
// and an approval step (nil: none).
func startGateWith(t testing.TB, cfgYAML string, snap proxy.Snapshot, approver proxy.Approver, tweak ...func(*proxy.Options)) (*gate, error) {
	t.Helper()
	var cfg proxy.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("decode config: %w", err)
	}
	if err := cfg.Validate(t.TempDir()); err != nil {
		return nil, fmt.Errorf("validate config: %w", err)
	}
	g := &gate{path: filepath.Join(t.TempDir(), "events.ndjson")}
	f, err := sink.OpenFile(sink.FileConfig{Path: g.path})
	if err != nil {
		t.Fatal(err)
	}
	g.file = f
	g.queue, err = sink.NewQueue(f, sink.QueueConfig{FlushInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := proxy.Options{Recorder: g.queue, Sidecar: "adversarial", Approver: approver}
	for _, f := range tweak {
		f(&opts)
	}
	snap.Config, snap.Version = &cfg, "adversarial"
	srv, err := proxy.New(snap, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	g.srv = srv
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		g.queue.Close(ctx)
		g.file.Close()
	})
	return g, nil
}

// read flushes the queue and reads the events written since the last read.
func (g *gate) read(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.queue.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(g.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(g.off, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return
	}
	evs, err := sink.ReadEvents(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	g.off += int64(len(b))
	g.events = append(g.events, evs...)
}

// byTrace returns the events of one trace id.
func (g *gate) byTrace(trace string) []sink.Event {
	var out []sink.Event
	for _, e := range g.events {
		if e.TraceID == trace {
			out = append(out, e)
		}
	}
	return out
}

// inspected reports whether toolgate inspected the call of a trace as tool
// and forwarded it. It waits (briefly: a forwarded call's event is finished
// just after its answer's body) for the call's one event.
func (g *gate) inspected(t testing.TB, trace, tool string) bool {
	deadline := time.Now().Add(3 * time.Second)
	for {
		g.read(t)
		evs := g.byTrace(trace)
		for _, e := range evs {
			if e.Tool == tool && e.Inspected && !e.Refused {
				return true
			}
		}
		if len(evs) > 0 || time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// oracle is toolgate's own strict schema check, run on what an upstream's
// framework parsed: a value it refuses is a value toolgate must never have
// let through.
type oracle struct{ s *policies.Schema }

func newOracle(t testing.TB) *oracle {
	t.Helper()
	s, err := policies.CompileSchema([]byte(toolSchemaJSON), policies.SchemaOptions{Tool: "oracle", Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	return &oracle{s: s}
}

// refusals lists the parsed arguments the schema refuses, one at a time
// (strings coerced as toolgate coerces query and form values; JSON values
// as they are).
func (o *oracle) refusals(h hit) []string {
	var out []string
	for _, a := range h.Src {
		var v any = a.Value
		if a.JSON {
			dec := json.NewDecoder(strings.NewReader(a.Value))
			dec.UseNumber()
			if dec.Decode(&v) != nil {
				out = append(out, fmt.Sprintf("%s %q: undecodable JSON %q", a.Source, a.Key, a.Value))
				continue
			}
		}
		args := map[string]any{a.Key: v}
		if !a.JSON {
			args = o.s.Coerce(args)
		}
		if vs := o.s.Validate(args); len(vs) > 0 {
			out = append(out, fmt.Sprintf("%s %s=%.40q (%s)", a.Source, a.Key, a.Value, vs[0].Message))
		}
	}
	return out
}

// Outcomes of one attack on one target.
const (
	outRefused = "refused" // toolgate answered, nothing reached a tool's handler
	outChecked = "checked" // a tool's handler got the call, inspected and valid
	outMissed  = "missed"  // reached an upstream, but no tool's handler (harmless)
	outLeaked  = "LEAKED"
)

// verdict is the differential for one attack on one target.
type verdict struct {
	outcome string
	leaks   []string
	notes   []string
	// reached counts the tool handler's requests, all inspected and with
	// valid arguments when mediated is true.
	reached  int
	mediated bool
}

// judge is the differential: the hits the upstreams recorded, the events
// toolgate wrote and the answer the attacker got.
type judge struct {
	t       testing.TB
	g       *gate
	o       *oracle
	w       *world
	secrets map[string]string // injected secret value -> the only origin it may reach
}

// verdict drains every upstream and judges what this attack produced.
func (j *judge) verdict(trace string, resp *http.Response, sendErr error) verdict {
	var v verdict
	var hits []hit
	for _, u := range j.w.all() {
		hs, err := u.take()
		if err != nil {
			j.t.Fatalf("read %s upstream: %v", u.name, err)
		}
		for _, h := range hs {
			h.upstream = u.name
			hits = append(hits, h)
		}
	}
	toolHits, mediationLeaks := 0, 0
	for _, h := range hits {
		u := j.upstreamByName(h.upstream)
		if strings.HasPrefix(h.Secret, secretPrefix) {
			if allowed, ok := j.secrets[h.Secret]; !ok || allowed != u.origin() {
				v.leaks = append(v.leaks, fmt.Sprintf("injected secret %q reached %s%s (the tool's origin is %q)", h.Secret, u.origin(), h.RawURI, allowed))
			}
		}
		if h.Kind != "tool" {
			continue
		}
		toolHits++
		for _, r := range j.o.refusals(h) {
			v.leaks = append(v.leaks, fmt.Sprintf("%s handler (%s %s) parsed %s", h.upstream, h.Method, h.RawURI, r))
		}
		tool := ""
		if m := strings.ToUpper(h.Method); h.Method == m && (m == http.MethodGet || m == http.MethodPost) {
			tool = h.upstream + "_" + strings.ToLower(m)
		}
		ht := traceOf(h.Trace)
		if ht == "" {
			ht = trace
		}
		if tool == "" || !j.g.inspected(j.t, ht, tool) {
			v.leaks = append(v.leaks, fmt.Sprintf("%s handler served %s %s but toolgate did not inspect it as tool %q", h.upstream, h.Method, h.RawURI, tool))
		}
		mediationLeaks = len(v.leaks)
	}
	v.reached, v.mediated = toolHits, mediationLeaks == 0
	j.g.read(j.t)
	for _, e := range j.g.byTrace(trace) {
		if len(e.Agent) > maxCallerBytes || len(e.Session) > maxCallerBytes {
			v.leaks = append(v.leaks, fmt.Sprintf("event holds a caller-set agent of %d bytes and session of %d bytes (bound %d)", len(e.Agent), len(e.Session), maxCallerBytes))
		}
	}
	refusedByGate := false
	switch {
	case resp != nil:
		for k, vs := range resp.Header {
			if !strings.HasPrefix(strings.ToLower(k), "x-toolgate-") {
				continue
			}
			for _, val := range vs {
				if strings.Contains(val, "forged-by-upstream") {
					v.leaks = append(v.leaks, fmt.Sprintf("upstream's own %s header reached the caller", k))
				}
			}
		}
		code := resp.Header.Get(proxy.HeaderErrorCode)
		refusedByGate = (code != "" && !strings.Contains(code, "forged")) || resp.StatusCode >= 400
		v.notes = append(v.notes, fmt.Sprintf("answer %d %s", resp.StatusCode, code))
	case sendErr != nil:
		refusedByGate = true
		v.notes = append(v.notes, "no answer: "+shorten(sendErr.Error(), 80))
	}
	switch {
	case len(v.leaks) > 0:
		v.outcome = outLeaked
	case toolHits > 0:
		v.outcome = outChecked
	case len(hits) == 0 && refusedByGate:
		v.outcome = outRefused
	default:
		v.outcome = outMissed
	}
	return v
}

func (j *judge) upstreamByName(name string) *upstream {
	for _, u := range j.w.all() {
		if u.name == name {
			return u
		}
	}
	j.t.Fatalf("no upstream %q", name)
	return nil
}

// newTrace returns a W3C trace id and the traceparent header that carries
// it, so events and upstream hits of one attack can be told apart.
func newTrace() (id, header string) {
	var b [16]byte
	rand.Read(b[:])
	id = hex.EncodeToString(b[:])
	return id, "00-" + id + "-0000000000000001-01"
}

func traceOf(tp string) string {
	if len(tp) >= 35 && tp[2] == '-' {
		return tp[3:35]
	}
	return ""
}

// exchange sends raw bytes on a new connection to addr and reads one answer
// (for method, which matters for HEAD). The connection is closed after.
func exchange(addr string, raw []byte, method string, timeout time.Duration) (*http.Response, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(raw); err != nil {
		return nil, err
	}
	return readAnswer(c, method)
}

// readAnswer reads one final answer and its body (bounded) from c,
// skipping interim 1xx answers (100 Continue).
func readAnswer(c net.Conn, method string) (*http.Response, error) {
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(br, &http.Request{Method: method})
	}
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// tally counts outcomes for the summary line.
type tally map[string]int

func (t tally) String() string {
	tried := 0
	for _, n := range t {
		tried += n
	}
	return fmt.Sprintf("tried %d, refused %d, passed checked %d, reached no tool %d, leaked %d",
		tried, t[outRefused], t[outChecked], t[outMissed], t[outLeaked])
}

// reportOnly is set by TOOLGATE_ADVERSARIAL_REPORT=1: list every result
// and never fail on a leak.
func reportOnly() bool { return os.Getenv("TOOLGATE_ADVERSARIAL_REPORT") != "" }

// report is the table of results of one test, printed at its end.
type report struct {
	rows  []string
	count tally
	leaky map[string]bool // attack names with a leak
}

func newReport() *report { return &report{count: tally{}, leaky: map[string]bool{}} }

// add records one attack's verdict on one cell; point is the issue 13
// item the attack belongs to ("v" for a variant, "control" for a control).
func (r *report) add(t *testing.T, attack, point, cell string, v verdict) {
	t.Helper()
	r.count[v.outcome]++
	row := fmt.Sprintf("%-7s %-7s %-34s %-26s %s", v.outcome, point, attack, cell, strings.Join(v.notes, "; "))
	if len(v.leaks) > 0 {
		r.leaky[attack] = true
		ls := v.leaks
		if len(ls) > 4 {
			ls = append(ls[:4:4], fmt.Sprintf("(and %d more)", len(v.leaks)-4))
		}
		row += "\n        " + strings.Join(ls, "\n        ")
	}
	r.rows = append(r.rows, row)
	if len(v.leaks) > 0 && !reportOnly() {
		t.Errorf("%s: leaked:\n  %s", cell, strings.Join(v.leaks, "\n  "))
	}
}

func (r *report) print(t *testing.T, title string) {
	t.Helper()
	var b strings.Builder
	if reportOnly() {
		for _, row := range r.rows {
			b.WriteString(row + "\n")
		}
	}
	names := make([]string, 0, len(r.leaky))
	for n := range r.leaky {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "%s: %s", title, r.count)
	if len(names) > 0 {
		fmt.Fprintf(&b, "\n%s: attacks with a leak (%d): %s", title, len(names), strings.Join(names, ", "))
	}
	t.Log("\n" + b.String())
}
