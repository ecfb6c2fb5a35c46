package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVersionFlag checks that `toolgate --version` prints what `toolgate
// version` prints.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	var a, b, errb bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &a, &errb); code != exitOK {
		t.Fatalf("--version = %d: %s", code, errb.String())
	}
	if code := run(context.Background(), []string{"version"}, &b, &errb); code != exitOK {
		t.Fatalf("version = %d: %s", code, errb.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "toolgate ") {
		t.Errorf("--version printed %q, version printed %q", a.String(), b.String())
	}
}

// TestPolicyCheckNamesTakenAddress checks that `policy check` says ok for a
// valid file and names a listen address another process holds.
func TestPolicyCheckNamesTakenAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, path, "listen:\n  forward: "+ln.Addr().String()+"\nadmin:\n  listen: \"off\"\n")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"policy", "check", "--config", path}, &out, &errb); code != exitOK {
		t.Fatalf("policy check = %d: %s", code, errb.String())
	}
	want := "note: listen.forward: " + ln.Addr().String() + " is in use by another process"
	if !strings.HasPrefix(out.String(), "ok: ") || !strings.Contains(out.String(), want) {
		t.Errorf("policy check printed:\n%s\nwant ok and %q", out.String(), want)
	}
}

// TestPolicyTestOneRegoFile checks that `policy test` on one .rego file runs
// the tests of the policy it belongs to.
func TestPolicyTestOneRegoFile(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"bounds.rego", "bounds_test.rego"} {
		var out, errb bytes.Buffer
		path := filepath.Join("..", "..", "examples", "policies", "bounds", f)
		if code := run(context.Background(), []string{"policy", "test", path}, &out, &errb); code != exitOK {
			t.Errorf("policy test %s = %d:\n%s%s", f, code, out.String(), errb.String())
			continue
		}
		if !strings.Contains(out.String(), "PASS bounds/test_over_bounds_denied") || !strings.HasSuffix(out.String(), " passed, 0 failed\n") {
			t.Errorf("policy test %s printed:\n%s", f, out.String())
		}
	}
}

// TestRunningLineNamesReverseListeners checks that the start log line names
// the reverse listeners' addresses, and that run --help names transparent
// mode.
func TestRunningLineNamesReverseListeners(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := startRun(t, dir, "listen:\n  forward: 127.0.0.1:0\n  reverse:\n    - {listen: 127.0.0.1:0, upstream: http://127.0.0.1:9}\n    - {listen: 127.0.0.1:0, upstream: http://127.0.0.1:10}\nadmin:\n  listen: 127.0.0.1:0\nevents:\n  file: {path: ev.ndjson}\n")
	r.running(t)
	var line struct {
		Msg     string   `json:"msg"`
		Reverse []string `json:"reverse"`
	}
	for _, l := range strings.Split(r.stderr.String(), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "toolgate running" {
			break
		}
	}
	if len(line.Reverse) != 2 {
		t.Fatalf("reverse in the running line = %q, want two addresses; stderr:\n%s", line.Reverse, r.stderr)
	}
	for _, a := range line.Reverse {
		c, err := net.DialTimeout("tcp", a, 10*time.Second)
		if err != nil {
			t.Errorf("reverse listener %s: %v", a, err)
			continue
		}
		c.Close()
	}
	var help, errb bytes.Buffer
	run(context.Background(), []string{"run", "--help"}, &help, &errb)
	if !strings.Contains(help.String(), "transparent") {
		t.Errorf("run --help does not name transparent mode:\n%s", help.String())
	}
}

// TestPolicyTestExamplesWithoutSecrets runs `toolgate policy test
// examples/policies` as given, with neither secret the example
// configuration names set: nothing is sent, so none is needed. policy eval
// shows the injected secrets as "(set)", and policy check, which loads as
// run does, still asks for them.
func TestPolicyTestExamplesWithoutSecrets(t *testing.T) {
	for _, k := range []string{"PUBMED_API_KEY", "DOCS_TOKEN"} {
		t.Setenv(k, "") // restored at the end
		os.Unsetenv(k)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"policy", "test", filepath.Join("..", "..", "examples", "policies")}, &out, &errb); code != exitOK {
		t.Fatalf("policy test examples/policies = %d:\n%s%s", code, out.String(), errb.String())
	}
	if !strings.HasSuffix(out.String(), " passed, 0 failed\n") || !strings.Contains(out.String(), "PASS cases/examples.cases.yaml") {
		t.Errorf("policy test printed:\n%s", out.String())
	}
	out.Reset()
	code := run(context.Background(), []string{"policy", "eval", "--config", examplePath, "--tool", "pubmed_search", "--args", `{"term":"crispr"}`}, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), "inject       X-Api-Key: (set)") {
		t.Errorf("policy eval = %d, printed:\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"policy", "check", "--config", examplePath}, &out, &errb); code == exitOK ||
		!strings.Contains(errb.String(), "environment variable PUBMED_API_KEY is not set or empty") {
		t.Errorf("policy check without the secrets = %d, stderr %q; want a failure naming PUBMED_API_KEY", code, errb.String())
	}
}

// TestPolicyEvalSaysWhatItDoesNotCoerce checks that eval, refusing a
// query-string tool's "5" as wrong_type, says the sidecar would coerce it
// and eval does not.
func TestPolicyEvalSaysWhatItDoesNotCoerce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, path, "admin:\n  listen: \"off\"\ntools:\n  - name: forecast\n    match: {host: api.example.org, method: GET, path: /forecast}\n    args: [query]\n    schema:\n      type: object\n      properties:\n        days: {type: integer}\n")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"policy", "eval", "--config", path, "--tool", "forecast", "--args", `{"days":"5"}`}, &out, &errb)
	if code != exitRefused || !strings.Contains(out.String(), `the sidecar turns "5" into 5`) {
		t.Errorf("eval = %d, printed:\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"policy", "eval", "--config", path, "--tool", "forecast", "--args", `{"days":5}`}, &out, &errb); code != exitOK {
		t.Errorf("eval with a JSON number = %d, printed:\n%s%s", code, out.String(), errb.String())
	}
}
