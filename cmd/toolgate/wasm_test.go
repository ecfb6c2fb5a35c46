package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
)

// wasmConfig binds WASM policies to three tools in front of the demo
// upstream: a toolgate-ABI module written in WAT (denies any call whose
// input holds "forbidden"), a module that loops forever, and the bench Rego
// policy run on the wasm engine. One tool dry-runs the WAT module.
const wasmConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: wasm
  file: {path: events.ndjson}
  queue: {flush_interval: 20ms}
policies:
  deadline: 2s
  rego:
    - name: bench
      path: bench.rego
      engine: wasm
  wasm:
    - name: words
      path: words.wasm
      deadline: 1s
    - name: loop
      path: loop.wasm
      deadline: 50ms
tools:
  - name: search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
    policies: [words]
  - name: search_dry
    match: {host: 127.0.0.1, method: GET, path: /echo}
    args: [query]
    policies: [words]
    policy_mode: dry_run
  - name: stuck
    match: {host: 127.0.0.1, method: GET, path: /faults/text}
    policies: [loop]
  - name: bench
    match: {host: "UPHOSTPORT", method: POST, path: /bench/policy}
    inject_over_http: true # the bench policy injects a header; the test upstream speaks plain HTTP
    envelope: always
    schema:
      type: object
      properties:
        query: {type: string}
        organism: {type: string}
        limit: {type: integer}
      required: [query, organism, limit]
    policies: [bench]
`

// statusPolicies is /status's list of policies and their engines.
func statusPolicies(t *testing.T, admin *http.Client, addr string) []sidecar.PolicyStatus {
	t.Helper()
	var st struct{ Policies []sidecar.PolicyStatus }
	if err := json.Unmarshal([]byte(do(t, admin, "GET", "http://"+addr+"/status", nil).body), &st); err != nil {
		t.Fatal(err)
	}
	return st.Policies
}

func copyFixture(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, to, string(b))
}

// TestWasmPoliciesInTheSidecar runs WASM policies through the real
// listener: a denial never reaches upstream, dry-run records and forwards,
// a module that never returns is stopped and fails its call closed while
// the other tools keep answering, Rego on the wasm engine decides as Rego
// does, and a changed module file is reloaded (a trapping module fails
// closed; putting the good one back restores service).
func TestWasmPoliciesInTheSidecar(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	words := filepath.Join(dir, "words.wasm")
	copyFixture(t, "../../wasm/testdata/allow.wasm", words)
	copyFixture(t, "../../wasm/testdata/loop.wasm", filepath.Join(dir, "loop.wasm"))
	copyFixture(t, "../../policies/testdata/bench/bench.rego", filepath.Join(dir, "bench.rego"))
	base := up.URL()
	r := startRun(t, dir, strings.ReplaceAll(wasmConfig, "UPHOSTPORT", strings.TrimPrefix(base, "http://")))
	l := r.running(t)
	admin, client := directClient(t), proxyClient(t, l.Forward)

	get := func(path string) answer { return do(t, client, "GET", base+path, nil) }
	post := func(body string) answer {
		req, _ := http.NewRequest("POST", base+"/bench/policy", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}

	want := []sidecar.PolicyStatus{{Name: "bench", Engine: "wasm"}, {Name: "words", Engine: "wasm"}, {Name: "loop", Engine: "wasm"}}
	if got := statusPolicies(t, admin, l.Admin); !reflect.DeepEqual(got, want) {
		t.Errorf("/status policies = %+v, want %+v", got, want)
	}
	if a := get("/esearch?term=x&query=fine"); a.status != 200 {
		t.Fatalf("allowed call: status %d, want 200: %s", a.status, a.body)
	}
	hits := up.Hits("GET /esearch")
	a := get("/esearch?term=x&query=forbidden")
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "input holds a forbidden word") || a.header.Get("X-Toolgate-Error-Code") != "policy" {
		t.Errorf("denied call: status %d, code %q, body %s; want 403 policy with the module's message", a.status, a.header.Get("X-Toolgate-Error-Code"), a.body)
	}
	if up.Hits("GET /esearch") != hits {
		t.Error("a call the WASM policy denied reached upstream")
	}
	if a := get("/echo?query=forbidden"); a.status != 200 {
		t.Errorf("dry-run tool: status %d, want 200 (forwarded)", a.status)
	}

	start := time.Now()
	a = get("/faults/text")
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "policy_timeout") {
		t.Errorf("looping module: status %d, body %s; want 403 policy_timeout", a.status, a.body)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("looping module held the call %s; its deadline is 50ms", took)
	}
	if up.Hits("GET /faults/text") != 0 {
		t.Error("the call the looping module could not decide reached upstream")
	}
	if a := get("/esearch?term=x&query=still-fine"); a.status != 200 {
		t.Errorf("after the looping module: status %d, want 200", a.status)
	}

	if a := post(`{"query":"q","organism":"human","limit":20}`); a.status != 200 {
		t.Errorf("bench within bounds: status %d, want 200: %s", a.status, a.body)
	}
	if a := post(`{"query":"q","organism":"cat","limit":80}`); a.status != http.StatusForbidden {
		t.Errorf("bench out of bounds: status %d, want 403", a.status)
	}

	// A module replaced by one that traps fails its calls closed; the good
	// module back restores them. Both arrive through the file watcher.
	version := getReload(t, admin, l.Admin).Reload.PolicyVersion
	copyFixture(t, "../../wasm/testdata/trap.wasm", words)
	d := waitReload(t, admin, l.Admin, "a new policy version", func(d reloadDoc) bool {
		return d.Reload.PolicyVersion != version
	})
	a = get("/esearch?term=x&query=fine")
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "policy_error") || !strings.Contains(a.body, "trapped") {
		t.Errorf("trapping module: status %d, body %s; want 403 policy_error naming the trap", a.status, a.body)
	}
	copyFixture(t, "../../wasm/testdata/allow.wasm", words)
	waitReload(t, admin, l.Admin, "the first policy version again", func(d2 reloadDoc) bool {
		return d2.Reload.PolicyVersion == version && d2.Reload.PolicyVersion != d.Reload.PolicyVersion
	})
	if a := get("/esearch?term=x&query=fine"); a.status != 200 {
		t.Errorf("good module back: status %d, want 200", a.status)
	}

	r.stop(t)
	evs := readEvents(t, filepath.Join(dir, "events.ndjson"))
	var denied, dry, timedOut int
	for _, e := range evs {
		if e.PolicyVersion == "" {
			t.Errorf("event for %s %s has no policy version", e.Tool, e.Reason)
		}
		switch {
		case e.Tool == "search" && e.Reason == "policy_denied":
			denied++
		case e.Tool == "search_dry" && e.DryRunDenied:
			dry++
		case e.Tool == "stuck" && e.Reason == "policy_timeout":
			timedOut++
		}
	}
	if denied != 1 || dry != 1 || timedOut != 1 {
		t.Errorf("events: %d denied, %d dry-run denied, %d timed out; want 1 each", denied, dry, timedOut)
	}
}

// TestWasmCacheFromConfig checks that policies.wasm_cache, a folder
// relative to the configuration file, is where the WASM engine keeps its
// compilation cache, and that "off" keeps none on disk.
func TestWasmCacheFromConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cache string
		wantFiles   bool
	}{
		{"relative folder", "wazero-cache", true},
		{"off", "off", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFixture(t, "../../wasm/testdata/allow.wasm", filepath.Join(dir, "words.wasm"))
			path := filepath.Join(dir, "toolgate.yaml")
			writeFile(t, path, "listen: {forward: 127.0.0.1:0}\nadmin: {listen: 'off'}\n"+
				"policies:\n  wasm_cache: "+tc.cache+"\n  wasm: [{name: words, path: words.wasm}]\n"+
				"tools:\n  - {name: search, match: {host: 127.0.0.1, path: /esearch}, policies: [words]}\n")
			if code, stdout, stderr := runArgs("policy", "check", "--config", path); code != 0 {
				t.Fatalf("policy check: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			var files int
			filepath.WalkDir(filepath.Join(dir, "wazero-cache"), func(_ string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files++
				}
				return nil
			})
			if (files > 0) != tc.wantFiles {
				t.Errorf("%d files in %s, want files: %v", files, filepath.Join(dir, "wazero-cache"), tc.wantFiles)
			}
		})
	}
}
