package schemasuggest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
)

// learnCall is one call of the learning check: to one of the demo's tools,
// valid or with one mistake of a kind.
type learnCall struct {
	tool   string
	method string
	target string // path and query
	ctype  string
	body   string
	kind   string // "valid", "typo", "wrong_type"
}

var learnWords = []string{"crispr", "egfr", "braf", "kras", "tp53", "brca1", "insulin", "hemoglobin", "p53 pathway", "cas9 off-target"}

// typo misspells a name as callers do: two letters swapped, one dropped or
// doubled; never into another of the tool's names.
func typo(r *rand.Rand, name string, avoid ...string) string {
	for {
		b := []byte(name)
		i := r.IntN(len(b) - 1)
		var out string
		switch r.IntN(3) {
		case 0:
			b[i], b[i+1] = b[i+1], b[i]
			out = string(b)
		case 1:
			out = name[:i] + name[i+1:]
		default:
			out = name[:i+1] + name[i:]
		}
		ok := out != name
		for _, a := range avoid {
			ok = ok && out != a
		}
		if ok {
			return out
		}
	}
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// pickKey picks one of m's keys, the same for the same generator state
// (map order is random; the traffic must not be).
func pickKey[V any](r *rand.Rand, m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return pick(r, keys...)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The demo's tools, and how valid calls to each look (the hand-written
// schemas in internal/demo/schemas say the same; pubmed_search also takes
// mindate, a date, as E-utilities does).

func pubmedCall(r *rand.Rand, kind string) learnCall {
	q := url.Values{"term": {pick(r, learnWords...)}}
	if r.Float64() < 0.7 {
		q.Set("retmax", fmt.Sprint(1+r.IntN(100)))
	}
	if r.Float64() < 0.25 {
		for range 1 + r.IntN(3) {
			q.Add("pmid", fmt.Sprint(10000+r.IntN(9000000)))
		}
	}
	if r.Float64() < 0.3 {
		q.Set("mindate", time.Date(2015+r.IntN(10), time.Month(1+r.IntN(12)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC).Format(time.DateOnly))
	}
	names := []string{"term", "retmax", "pmid", "mindate"}
	switch kind {
	case "typo":
		var present []string
		for _, n := range names {
			if q.Has(n) {
				present = append(present, n)
			}
		}
		n := pick(r, present...)
		q[typo(r, n, names...)] = q[n]
		delete(q, n)
	case "wrong_type":
		if r.IntN(2) == 0 {
			q.Set("retmax", pick(r, "many", "ten", "5.5", "all"))
		} else {
			q.Set("mindate", pick(r, "yesterday", "last week", "2024/01/15", "15.01.2024"))
		}
	}
	return learnCall{tool: "pubmed_search", method: "GET", target: "/esearch?" + q.Encode(), kind: kind}
}

func structureCall(r *rand.Rand) learnCall {
	const alnum = "ABCDEFGHIJKLMNOPRSTUVWXYZ0123456789" // no Q: Q99999 is the upstream's hidden error
	b := make([]byte, 6+r.IntN(5))
	for i := range b {
		b[i] = alnum[r.IntN(len(alnum))]
	}
	b[0] = 'A' + byte(r.IntN(15)) // never P00000
	return learnCall{tool: "structure_lookup", method: "GET", target: "/v1/structure/" + string(b), kind: "valid"}
}

func targetsCall(r *rand.Rand, kind string) learnCall {
	args := map[string]any{"query": pick(r, learnWords...)}
	if r.Float64() < 0.8 {
		args["organism"] = pick(r, "human", "mouse", "rat")
	}
	if r.Float64() < 0.5 {
		args["limit"] = 1 + r.IntN(50)
	}
	var filters map[string]any
	if r.Float64() < 0.4 || kind != "valid" && r.IntN(3) == 0 {
		filters = map[string]any{}
		if r.Float64() < 0.7 {
			filters["phase_min"] = r.IntN(5)
		}
		if r.Float64() < 0.5 || len(filters) == 0 {
			filters["modality"] = pick(r, "small_molecule", "antibody", "protein")
		}
		args["filters"] = filters
	}
	switch kind {
	case "typo":
		if filters != nil && r.IntN(2) == 0 {
			k := pickKey(r, filters)
			v := filters[k]
			delete(filters, k)
			filters[typo(r, k, "phase_min", "modality")] = v
		} else {
			names := []string{"query", "organism", "limit", "filters"}
			var present []string
			for _, n := range names {
				if _, ok := args[n]; ok {
					present = append(present, n)
				}
			}
			n := pick(r, present...)
			args[typo(r, n, names...)] = args[n]
			delete(args, n)
		}
	case "wrong_type":
		switch r.IntN(5) {
		case 0:
			args["limit"] = fmt.Sprint(1 + r.IntN(50))
		case 1:
			args["query"] = r.IntN(1000)
		case 2:
			args["organism"] = 9606
		case 3:
			args["filters"] = "phase>=2"
		default:
			args["filters"] = map[string]any{"phase_min": fmt.Sprint(r.IntN(5))}
		}
	}
	return learnCall{tool: "drug_targets", method: "POST", target: "/v1/targets/search", ctype: "application/json", body: mustJSON(args), kind: kind}
}

func editCall(r *rand.Rand, kind string) learnCall {
	var reqs []any
	for range 1 + r.IntN(3) {
		if r.IntN(3) > 0 {
			reqs = append(reqs, map[string]any{"insertText": map[string]any{"text": pick(r, "Hello", "Results: see table 2", "TODO"), "index": 1 + r.IntN(500)}})
		} else {
			s := 1 + r.IntN(400)
			reqs = append(reqs, map[string]any{"deleteRange": map[string]any{"startIndex": s, "endIndex": s + 1 + r.IntN(50)}})
		}
	}
	args := map[string]any{"requests": reqs}
	switch kind {
	case "typo":
		if r.IntN(3) == 0 {
			args[typo(r, "requests")] = reqs
			delete(args, "requests")
		} else { // deep in an array: the lost edit
			it := reqs[r.IntN(len(reqs))].(map[string]any)
			op := pickKey(r, it)
			inner := it[op].(map[string]any)
			if r.IntN(2) == 0 {
				delete(it, op)
				it[typo(r, op, "insertText", "deleteRange")] = inner
			} else {
				k := pickKey(r, inner)
				x := inner[k]
				delete(inner, k)
				inner[typo(r, k, "text", "index", "startIndex", "endIndex")] = x
			}
		}
	case "wrong_type":
		switch r.IntN(3) {
		case 0:
			args["requests"] = reqs[0]
		case 1:
			args["requests"] = []any{map[string]any{"insertText": map[string]any{"text": "Hello", "index": "1"}}}
		default:
			args["requests"] = []any{map[string]any{"insertText": map[string]any{"text": 42, "index": 1}}}
		}
	}
	return learnCall{tool: "docs_edit", method: "POST", target: fmt.Sprintf("/v1/documents/d%d:batchUpdate", r.IntN(1000)), ctype: "application/json", body: mustJSON(args), kind: kind}
}

func notesCall(r *rand.Rand, kind string) learnCall {
	f := url.Values{"title": {pick(r, "Assay plan", "Meeting notes", "Q3 review", "Reagents")}}
	if r.Float64() < 0.6 {
		f.Set("body", pick(r, "call the vendor", "see attached", "n=12 per arm"))
	}
	for range r.IntN(4) {
		f.Add("tags", pick(r, "lab", "q3", "urgent", "assay"))
	}
	if kind == "typo" {
		names := []string{"title", "body", "tags"}
		var present []string
		for _, n := range names {
			if f.Has(n) {
				present = append(present, n)
			}
		}
		n := pick(r, present...)
		f[typo(r, n, names...)] = f[n]
		delete(f, n)
	}
	return learnCall{tool: "notes_create", method: "POST", target: "/v1/notes", ctype: "application/x-www-form-urlencoded", body: f.Encode(), kind: kind}
}

// learnTraffic is a mixed set of calls: valid per tool each, and typos and
// wrong types in the numbers given, shuffled.
func learnTraffic(seed uint64, valid, typos, wrong int) []learnCall {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []learnCall
	for range valid {
		out = append(out, pubmedCall(r, "valid"), structureCall(r), targetsCall(r, "valid"), editCall(r, "valid"), notesCall(r, "valid"))
	}
	for i := range typos {
		switch i % 4 {
		case 0:
			out = append(out, pubmedCall(r, "typo"))
		case 1:
			out = append(out, targetsCall(r, "typo"))
		case 2:
			out = append(out, editCall(r, "typo"))
		default:
			out = append(out, notesCall(r, "typo"))
		}
	}
	for i := range wrong {
		switch i % 3 {
		case 0:
			out = append(out, pubmedCall(r, "wrong_type"))
		case 1:
			out = append(out, targetsCall(r, "wrong_type"))
		default:
			out = append(out, editCall(r, "wrong_type"))
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// learnGate is a real toolgate (proxy.Server on a loopback forward
// listener) writing its events to an NDJSON file.
type learnGate struct {
	srv    *proxy.Server
	queue  *sink.Queue
	events string
}

func startLearnGate(t *testing.T, cfgYAML, dir string) *learnGate {
	t.Helper()
	var cfg proxy.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decode config: %v\n%s", err, cfgYAML)
	}
	if err := cfg.Validate(dir); err != nil {
		t.Fatalf("validate config: %v\n%s", err, cfgYAML)
	}
	g := &learnGate{events: filepath.Join(t.TempDir(), "events.ndjson")}
	f, err := sink.OpenFile(sink.FileConfig{Path: g.events})
	if err != nil {
		t.Fatal(err)
	}
	g.queue, err = sink.NewQueue(f, sink.QueueConfig{FlushInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.srv, err = proxy.New(proxy.Snapshot{Config: &cfg, Version: "learn"}, proxy.Options{Recorder: g.queue, Sidecar: "learn"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.srv.Shutdown(ctx)
		<-done
		g.queue.Close(ctx)
		f.Close()
	})
	return g
}

// send sends c through the gate as a legacy service does (the proxy
// variable) and reports whether the demo upstream's handler received it.
func (g *learnGate) send(t *testing.T, up *demotools.Server, c learnCall) (reached bool, code string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: g.srv.Addr("forward", 0)})}}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, "http://"+up.Addr()+c.target, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	}
	before := up.TotalHits()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.target, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	return up.TotalHits() > before, resp.Header.Get("X-Toolgate-Error-Code")
}

var learnTools = []struct{ name, match, extra string }{
	{"pubmed_search", "method: GET, path: /esearch", ""},
	{"structure_lookup", `method: GET, path: "/v1/structure/{uniprot_id}"`, ""},
	{"drug_targets", "method: POST, path: /v1/targets/search", ""},
	{"docs_edit", `method: POST, path: "/v1/documents/{doc_id}:batchUpdate"`, ""},
	{"notes_create", "method: POST, path: /v1/notes", ", args: [form]"},
}

// TestLearnFromObservedCalls is the check of issue 46's learning half: the
// demo's kind of traffic (valid calls with typos and wrong types mixed in)
// goes through a live toolgate with every tool in observe mode to the demo
// upstream; toolgate schema suggest proposes a schema per tool from the
// events; a second toolgate enforces those schemas on a second, separate
// set of calls. Judged by what the upstream received: no valid call may be
// refused, and most typo and wrong-type calls must be.
func TestLearnFromObservedCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("sends about a thousand calls")
	}
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	dir := t.TempDir()

	// 1. Observe: no schemas, every tool observing.
	var b strings.Builder
	b.WriteString("listen:\n  forward: 127.0.0.1:0\ntools:\n")
	for _, tl := range learnTools {
		obs := "observe: true"
		if tl.name == "drug_targets" {
			obs = "observe: {enum_fields: [organism, filters.modality]}"
		}
		fmt.Fprintf(&b, "  - {name: %s, match: {host: %q, %s}%s, %s}\n", tl.name, up.Addr(), tl.match, tl.extra, obs)
	}
	observing := startLearnGate(t, b.String(), dir)
	observed := learnTraffic(1, 60, 8, 6)
	for _, c := range observed {
		if reached, code := observing.send(t, up, c); !reached {
			t.Fatalf("observe mode refused %s %s (%s, %s): it must refuse nothing", c.method, c.target, c.kind, code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := observing.queue.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	if os.Getenv(writeExampleEnv) != "" {
		writeObservedExample(t, observing.events)
	}
	second := learnTraffic(2, 50, 60, 45)
	// 2 and 3, without a minimum share (every observed name and type is
	// learned, the callers' mistakes too) and with 5%.
	for _, minShare := range []float64{0, 0.05} {
		t.Run(fmt.Sprintf("min-share-%g", minShare), func(t *testing.T) {
			learnAndEnforce(t, up, observing.events, second, minShare, len(observed))
		})
	}
}

// learnAndEnforce suggests a schema per tool from the events (as toolgate
// schema suggest does), starts a toolgate enforcing them, and sends the
// second set of calls through it.
func learnAndEnforce(t *testing.T, up *demotools.Server, events string, second []learnCall, minShare float64, nObserved int) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("listen:\n  forward: 127.0.0.1:0\ntools:\n")
	for _, tl := range learnTools {
		f, err := os.Open(events)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := Read(f, tl.name)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		sg, err := Suggest(obs, Options{MinShare: minShare})
		if err != nil {
			t.Fatal(err)
		}
		var ev strings.Builder
		sg.WriteEvidence(&ev)
		t.Logf("%s\n%s", ev.String(), sg.Schema)
		file := filepath.Join(dir, tl.name+".json")
		if err := os.WriteFile(file, sg.Schema, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - {name: %s, match: {host: %q, %s}%s, schema_file: %s}\n", tl.name, up.Addr(), tl.match, tl.extra, file)
	}
	enforcing := startLearnGate(t, b.String(), dir)
	type tally struct{ sent, refused int }
	counts := map[string]*tally{}
	var falseRefusals []string
	for _, c := range second {
		reached, code := enforcing.send(t, up, c)
		k := c.kind
		if counts[k] == nil {
			counts[k] = &tally{}
		}
		counts[k].sent++
		if !reached {
			counts[k].refused++
			if c.kind == "valid" {
				falseRefusals = append(falseRefusals, fmt.Sprintf("%s %s %s (%s)", c.method, c.target, c.body, code))
			}
		}
	}
	share := func(k string) float64 { return float64(counts[k].refused) / float64(counts[k].sent) }
	t.Logf("min share %g: observed %d calls (%d valid, 8 typos, 6 wrong types); enforced on %d others: valid %d sent, %d refused; typos %d sent, %d caught (%.0f%%); wrong types %d sent, %d caught (%.0f%%)",
		minShare, nObserved, nObserved-14, len(second), counts["valid"].sent, counts["valid"].refused,
		counts["typo"].sent, counts["typo"].refused, 100*share("typo"), counts["wrong_type"].sent, counts["wrong_type"].refused, 100*share("wrong_type"))
	if len(falseRefusals) > 0 {
		t.Errorf("%d valid calls refused by the learned schemas:\n%s", len(falseRefusals), strings.Join(falseRefusals, "\n"))
	}
	// Without a minimum share the mistakes observed are learned as valid;
	// only new ones are caught, so the bar is lower.
	wantTypo, wantWrong := 0.95, 0.9
	if minShare == 0 {
		wantTypo, wantWrong = 0.8, 0.4
	}
	if share("typo") < wantTypo {
		t.Errorf("learned schemas caught %.0f%% of typo calls; want at least %.0f%%", 100*share("typo"), 100*wantTypo)
	}
	if share("wrong_type") < wantWrong {
		t.Errorf("learned schemas caught %.0f%% of wrong-type calls; want at least %.0f%%", 100*share("wrong_type"), 100*wantWrong)
	}
}

// writeExampleEnv, set, makes TestLearnFromObservedCalls rewrite the
// example events file docs/schema-suggest.md reads
// (examples/observe/drug_targets.ndjson): the drug_targets events its
// observing toolgate wrote.
const writeExampleEnv = "TOOLGATE_WRITE_OBSERVE_EXAMPLE"

func writeObservedExample(t *testing.T, events string) {
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.Contains(line, `"tool":"drug_targets"`) {
			out = append(out, line...)
		}
	}
	dst := filepath.Join("..", "..", "..", "..", "examples", "observe", "drug_targets.ndjson")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", dst, len(out))
}
