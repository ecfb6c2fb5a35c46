package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
)

// reloadConfig is a sidecar with one tool whose schema is a file and whose
// calls a Rego policy bounds; UPSTREAM is the demo upstream's URL (only
// the events name it). Policy evaluation gets a generous deadline: the
// race detector is slow, and a timeout would be a refusal for the wrong
// reason.
const reloadConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: reload
  file: {path: events.ndjson}
  queue: {flush_interval: 50ms}
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
    schema_file: schemas/pubmed_search.json
    policies: [bounds]
policies:
  deadline: 5s
  rego:
    - name: bounds
      path: policies/bounds
`

// pubmedSchema is the tool's schema with retmax at most max.
func pubmedSchema(max int) string {
	return fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "term": {"type": "string", "minLength": 1},
    "retmax": {"type": "integer", "minimum": 1, "maximum": %d}
  },
  "required": ["term"]
}
`, max)
}

// boundsPolicy denies a retmax above bound.
func boundsPolicy(bound int) string {
	return fmt.Sprintf(`package toolgate.bounds

max_retmax := %d

deny contains {"msg": sprintf("retmax must be at most %%d", [max_retmax]), "path": "/retmax"} if {
	input.arguments.retmax > max_retmax
}
`, bound)
}

// boundsTests hold for every bound from 1 to 999.
const boundsTests = `package toolgate.bounds_test

import data.toolgate.bounds

test_one_allowed if {
	count(bounds.deny) == 0 with input as {"arguments": {"term": "x", "retmax": 1}}
}

test_thousand_denied if {
	count(bounds.deny) == 1 with input as {"arguments": {"term": "x", "retmax": 1000}}
}
`

// Files of a reload fixture, relative to its folder.
var (
	schemaPath = filepath.Join("schemas", "pubmed_search.json")
	policyPath = filepath.Join("policies", "bounds", "bounds.rego")
	testPath   = filepath.Join("policies", "bounds", "bounds_test.rego")
)

// writeReloadFixture writes the schema (retmax at most 100) and the policy
// (bounded at bound) that reloadConfig names, into dir.
func writeReloadFixture(t *testing.T, dir string, bound int) {
	t.Helper()
	for _, d := range []string{"schemas", filepath.Join("policies", "bounds")} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, schemaPath), pubmedSchema(100))
	writeFile(t, filepath.Join(dir, policyPath), boundsPolicy(bound))
	writeFile(t, filepath.Join(dir, testPath), boundsTests)
}

// replaceFile writes body beside path and renames it over path, as
// editors and ConfigMap updates do: readers see the old file or the new,
// never half of one.
func replaceFile(t testing.TB, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// boundsVersion is the policy version config.Load computes for the policy
// files in dir as they are now, without running their tests.
func boundsVersion(t testing.TB, dir string) string {
	t.Helper()
	l, err := policies.Config{Rego: []policies.RegoConfig{{Name: "bounds", Path: "policies/bounds"}}}.Load(dir, policies.LoadOptions{Rego: rego.Host{}})
	if err != nil {
		t.Fatal(err)
	}
	return l.Version()
}

// configVersion is the configuration version of the file at path as it is now.
func configVersion(t testing.TB, path string) string {
	t.Helper()
	lc, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return lc.Version
}

// reloadDoc is the part of /status the reload tests read.
type reloadDoc struct {
	ConfigVersion string               `json:"config_version"`
	Sidecar       string               `json:"sidecar"`
	Reload        sidecar.ReloadStatus `json:"reload"`
}

func getReload(t *testing.T, c *http.Client, admin string) reloadDoc {
	t.Helper()
	a := do(t, c, "GET", "http://"+admin+"/status", nil)
	var d reloadDoc
	if err := json.Unmarshal([]byte(a.body), &d); err != nil {
		t.Fatalf("/status is not JSON: %v\n%s", err, a.body)
	}
	return d
}

// waitReload polls /status until cond holds, for at most 5s.
func waitReload(t *testing.T, c *http.Client, admin, what string, cond func(reloadDoc) bool) reloadDoc {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := getReload(t, c, admin)
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s, /status still not %s: %+v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func postReload(t *testing.T, c *http.Client, admin string) (int, sidecar.ReloadAnswer) {
	t.Helper()
	a := do(t, c, "POST", "http://"+admin+"/reload", map[string]string{sidecar.AdminHeader: "1"})
	var ra sidecar.ReloadAnswer
	if err := json.Unmarshal([]byte(a.body), &ra); err != nil {
		t.Fatalf("POST /reload answered %d, not JSON: %v\n%s", a.status, err, a.body)
	}
	return a.status, ra
}

// metricValue returns the value of one series in /metrics, or "" when it
// is absent.
func metricValue(t *testing.T, c *http.Client, admin, series string) string {
	t.Helper()
	a := do(t, c, "GET", "http://"+admin+"/metrics", nil)
	for _, line := range strings.Split(a.body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// logLines returns the JSON log lines whose msg is msg.
func logLines(log, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// esearch calls the tool through the forward proxy with retmax and returns
// the status.
func esearch(t *testing.T, c *http.Client, upstream string, retmax int) int {
	t.Helper()
	return do(t, c, "GET", fmt.Sprintf("%s/esearch?term=x&retmax=%d", upstream, retmax), nil).status
}

// TestReloadSchemaFileEdit edits a tool's schema file while the sidecar
// runs, in place and by rename: each edit is in force within seconds
// without a request to reload, and decides the next call.
func TestReloadSchemaFileEdit(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	writeReloadFixture(t, dir, 999)
	r := startRun(t, dir, reloadConfig)
	l := r.running(t)
	admin, client := directClient(t), proxyClient(t, l.Forward)
	schema := filepath.Join(dir, schemaPath)

	if got := esearch(t, client, up.URL(), 50); got != http.StatusOK {
		t.Fatalf("retmax=50 before any edit: status %d, want 200", got)
	}
	steps := []struct {
		name       string
		write      func(t testing.TB, path, body string)
		max        int
		wantStatus int // of a call with retmax=50
	}{
		{"in place, retmax at most 20", writeFile, 20, http.StatusUnprocessableEntity},
		{"by rename, retmax at most 100", replaceFile, 100, http.StatusOK},
		{"by rename, retmax at most 30", replaceFile, 30, http.StatusUnprocessableEntity},
	}
	for _, s := range steps {
		s.write(t, schema, pubmedSchema(s.max))
		want := configVersion(t, r.path)
		d := waitReload(t, admin, l.Admin, "at config_version "+want, func(d reloadDoc) bool {
			return d.Reload.ConfigVersion == want
		})
		if d.ConfigVersion != want || !d.Reload.OK || d.Reload.LastSuccess == nil {
			t.Errorf("%s: /status config_version %q, reload %+v; want %q, ok, last_success set", s.name, d.ConfigVersion, d.Reload, want)
		}
		if got := esearch(t, client, up.URL(), 50); got != s.wantStatus {
			t.Errorf("%s: retmax=50 got status %d, want %d", s.name, got, s.wantStatus)
		}
	}
	if lines := logLines(r.stderr.String(), "configuration reloaded"); len(lines) < len(steps) || lines[0]["trigger"] != "file" {
		t.Errorf("log has %d \"configuration reloaded\" lines (first %v), want at least %d, triggered by file", len(lines), lines, len(steps))
	}
}

// TestReloadAdminEndpoint drives reloads with POST /reload: it answers
// after the reload with the versions in force, feeds the metrics, and
// applies what can change live while saying what needs a restart.
func TestReloadAdminEndpoint(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	writeReloadFixture(t, dir, 50)
	r := startRun(t, dir, reloadConfig)
	l := r.running(t)
	admin, client := directClient(t), proxyClient(t, l.Forward)
	v0 := boundsVersion(t, dir)

	if a := do(t, admin, "GET", "http://"+l.Admin+"/reload", nil); a.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /reload = %d, want 405", a.status)
	}
	if got := esearch(t, client, up.URL(), 40); got != http.StatusOK {
		t.Errorf("retmax=40 under bound 50: status %d, want 200", got)
	}

	// Nothing changed: the same versions, reloaded.
	code, a := postReload(t, admin, l.Admin)
	if want := (sidecar.ReloadAnswer{OK: true, ConfigVersion: r.version, PolicyVersion: v0}); code != http.StatusOK || a.OK != want.OK ||
		a.ConfigVersion != want.ConfigVersion || a.PolicyVersion != want.PolicyVersion || a.Error != "" {
		t.Errorf("POST /reload, nothing changed = %d %+v, want 200 %+v", code, a, want)
	}

	// A new bound: a new policy version, the same configuration version.
	replaceFile(t, filepath.Join(dir, policyPath), boundsPolicy(30))
	v1 := boundsVersion(t, dir)
	code, a = postReload(t, admin, l.Admin)
	if code != http.StatusOK || !a.OK || a.PolicyVersion != v1 || a.ConfigVersion != r.version || v1 == v0 {
		t.Errorf("POST /reload, new bound = %d %+v; want 200, policy_version %q (was %q), config_version %q", code, a, v1, v0, r.version)
	}
	if got := esearch(t, client, up.URL(), 40); got != http.StatusForbidden {
		t.Errorf("retmax=40 under bound 30: status %d, want 403", got)
	}

	// The events section cannot change live: the reload applies the rest
	// (a tool's bound) and says the events section waits for a restart.
	writeFile(t, filepath.Join(dir, policyPath), boundsPolicy(45))
	cfg := strings.Replace(reloadConfig, "sidecar: reload", "sidecar: renamed", 1)
	writeFile(t, r.path, cfg)
	code, a = postReload(t, admin, l.Admin)
	if want := configVersion(t, r.path); code != http.StatusOK || !a.OK || a.ConfigVersion != want ||
		strings.Join(a.RestartNeeded, ",") != "events" {
		t.Errorf("POST /reload, events changed = %d %+v; want 200, config_version %q, restart_needed [events]", code, a, want)
	}
	if got := esearch(t, client, up.URL(), 40); got != http.StatusOK {
		t.Errorf("retmax=40 under bound 45: status %d, want 200", got)
	}
	d := getReload(t, admin, l.Admin)
	if d.Sidecar != "reload" {
		t.Errorf("/status sidecar = %q after a reload that renamed it, want %q: the events section in force did not change", d.Sidecar, "reload")
	}
	if warns := logLines(r.stderr.String(), "configuration sections changed that take effect only on restart; the rest is in force"); len(warns) == 0 {
		t.Errorf("no warning that the events section needs a restart; stderr:\n%s", r.stderr)
	}

	// The metrics agree with /status.
	series := []struct{ name, want string }{
		{`toolgate_config_last_reload_successful`, "1"},
		{fmt.Sprintf(`toolgate_config_info{config_version="%s",policy_version="%s"}`, d.Reload.ConfigVersion, d.Reload.PolicyVersion), "1"},
		{`toolgate_config_reloads_total{result="error"}`, "0"},
	}
	for _, s := range series {
		if got := metricValue(t, admin, l.Admin, s.name); got != s.want {
			t.Errorf("%s = %q, want %q", s.name, got, s.want)
		}
	}
	// The file watcher may reload too, so the count is at least ours.
	if n, err := strconv.Atoi(metricValue(t, admin, l.Admin, `toolgate_config_reloads_total{result="ok"}`)); err != nil || n < 3 {
		t.Errorf(`toolgate_config_reloads_total{result="ok"} = %d (%v), want at least 3`, n, err)
	}
	if d.Reload.Reloads.OK < 3 || d.ConfigVersion != d.Reload.ConfigVersion {
		t.Errorf("/status config_version %q, reload %+v; want at least 3 reloads and the same config_version", d.ConfigVersion, d.Reload)
	}
}

// TestReloadBrokenEdits makes one broken edit after another: each leaves
// the configuration in force as it was, calls still decided by the old
// policy, and the failure visible in the answer, /status, the metrics and
// the log; a fixed edit then recovers.
func TestReloadBrokenEdits(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	writeReloadFixture(t, dir, 50)
	r := startRun(t, dir, reloadConfig)
	l := r.running(t)
	admin, client := directClient(t), proxyClient(t, l.Forward)
	good := boundsVersion(t, dir)

	// Each step edits files in the order given, chosen so that a reload
	// the file watcher starts between two edits fails or loads what is in
	// force already: only the step's own POST /reload decides.
	type edit struct{ file, body string }
	config, policy, tests := r.path, filepath.Join(dir, policyPath), filepath.Join(dir, testPath)
	steps := []struct {
		name    string
		edits   []edit
		wantErr string // "" when the reload succeeds
		bound   int    // the bound in force afterwards
	}{
		{
			name:    "invalid YAML",
			edits:   []edit{{config, reloadConfig + "tools: [\n"}},
			wantErr: r.path + ":",
			bound:   50,
		},
		{
			name:    "Rego syntax error",
			edits:   []edit{{policy, "package toolgate.bounds\n\nmax_retmax := \n"}, {config, reloadConfig}},
			wantErr: "bounds.rego:",
			bound:   50,
		},
		{
			name: "a failing policy test",
			edits: []edit{
				{tests, boundsTests + "\ntest_eighty_allowed if {\n\tcount(bounds.deny) == 0 with input as {\"arguments\": {\"retmax\": 80}}\n}\n"},
				{policy, boundsPolicy(70)},
			},
			wantErr: "1 policy test(s) failed: data.toolgate.bounds_test.test_eighty_allowed",
			bound:   50,
		},
		{
			name:    "a listener change",
			edits:   []edit{{config, strings.Replace(reloadConfig, "forward: 127.0.0.1:0", "forward: 127.0.0.1:1", 1)}, {tests, boundsTests}},
			wantErr: "listen and upstream settings changed",
			bound:   50,
		},
		{
			name:  "fixed",
			edits: []edit{{config, reloadConfig}},
			bound: 70,
		},
	}
	for _, s := range steps {
		for _, e := range s.edits {
			replaceFile(t, e.file, e.body)
		}
		wantPolicy, wantOK, wantCode, wantMetric := good, false, http.StatusUnprocessableEntity, "0"
		if s.wantErr == "" {
			wantPolicy, wantOK, wantCode, wantMetric = boundsVersion(t, dir), true, http.StatusOK, "1"
		}

		code, a := postReload(t, admin, l.Admin)
		if code != wantCode || a.OK != wantOK || !strings.Contains(a.Error, s.wantErr) || a.PolicyVersion != wantPolicy || a.ConfigVersion != r.version {
			t.Errorf("%s: POST /reload = %d %+v;\nwant %d, ok %v, error containing %q, policy_version %q, config_version %q",
				s.name, code, a, wantCode, wantOK, s.wantErr, wantPolicy, r.version)
		}
		d := getReload(t, admin, l.Admin)
		if d.Reload.OK != wantOK || !strings.Contains(d.Reload.Error, s.wantErr) || (s.wantErr == "") != (d.Reload.Error == "") ||
			d.Reload.PolicyVersion != wantPolicy || d.ConfigVersion != r.version || d.Reload.LastAttempt == nil {
			t.Errorf("%s: /status config_version %q, reload %+v;\nwant ok %v, error containing %q, policy_version %q", s.name, d.ConfigVersion, d.Reload, wantOK, s.wantErr, wantPolicy)
		}
		if got := metricValue(t, admin, l.Admin, "toolgate_config_last_reload_successful"); got != wantMetric {
			t.Errorf("%s: toolgate_config_last_reload_successful = %q, want %s", s.name, got, wantMetric)
		}
		for _, retmax := range []int{40, 60} {
			want := http.StatusOK
			if retmax > s.bound {
				want = http.StatusForbidden
			}
			if got := esearch(t, client, up.URL(), retmax); got != want {
				t.Errorf("%s: retmax=%d got status %d, want %d (bound %d in force)", s.name, retmax, got, want, s.bound)
			}
		}
		if s.wantErr == "" {
			continue
		}
		logged := false
		for _, line := range logLines(r.stderr.String(), "reload failed; the configuration in force is unchanged") {
			if err, _ := line["err"].(string); line["level"] == "ERROR" && strings.Contains(err, s.wantErr) {
				logged = true
			}
		}
		if !logged {
			t.Errorf("%s: no error line in the log with %q; stderr:\n%s", s.name, s.wantErr, r.stderr)
		}
	}
	d := getReload(t, admin, l.Admin)
	failed := metricValue(t, admin, l.Admin, `toolgate_config_reloads_total{result="error"}`)
	if d.Reload.Reloads.Failed < 4 || failed != fmt.Sprint(d.Reload.Reloads.Failed) {
		t.Errorf("reloads failed: /status %d, metric %s; want the same, at least 4", d.Reload.Reloads.Failed, failed)
	}
}

// TestReloadOnSignal reloads on a signal delivered on the channel the
// sidecar was given, once per burst, and not after the sidecar stopped.
func TestReloadOnSignal(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	writeReloadFixture(t, dir, 50)
	path := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, path, reloadConfig)
	lc, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(testutil.SyncBuffer)
	const settle = 300 * time.Millisecond
	// Only the signal may reload: the files are not polled.
	sc, err := sidecar.Start(lc, sidecar.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		ReloadPoll: time.Hour, ReloadSettle: settle})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			ctx, cancel := context.WithTimeout(context.Background(), sidecar.ShutdownGrace)
			defer cancel()
			sc.Stop(ctx)
		}
	}
	t.Cleanup(stop)
	hup := make(chan os.Signal)
	sc.Watch(hup)
	admin, client := directClient(t), proxyClient(t, sc.ProxyAddr("forward", 0))

	replaceFile(t, filepath.Join(dir, policyPath), boundsPolicy(30))
	want := boundsVersion(t, dir)
	for range 5 {
		hup <- syscall.SIGHUP
	}
	waitReload(t, admin, sc.AdminAddr(), "at policy_version "+want, func(d reloadDoc) bool {
		return d.Reload.PolicyVersion == want
	})
	if got := esearch(t, client, up.URL(), 40); got != http.StatusForbidden {
		t.Errorf("retmax=40 under bound 30: status %d, want 403", got)
	}
	time.Sleep(2 * settle)
	if d := getReload(t, admin, sc.AdminAddr()); d.Reload.Reloads.OK != 1 {
		t.Errorf("%d reloads after a burst of 5 signals, want 1", d.Reload.Reloads.OK)
	}
	lines := logLines(logs.String(), "configuration reloaded")
	// The file changed too, and its notification may join the signals'
	// reload: one reload either way, and the signals asked for it.
	if len(lines) != 1 {
		t.Fatalf("log lines \"configuration reloaded\" = %v, want one", lines)
	}
	trig, _ := lines[0]["trigger"].(string)
	if !strings.Contains(trig, "signal") || lines[0]["policy_version"] != want {
		t.Errorf("log lines \"configuration reloaded\" = %v, want one with trigger signal, policy_version %s", lines, want)
	}

	stop()
	select {
	case hup <- syscall.SIGHUP:
		t.Error("a signal was taken after the sidecar stopped")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestReloadOnSIGHUP sends a real SIGHUP to the test process while `toolgate
// run` handles it. It is not parallel: run's signal.Notify is in place from
// before the "toolgate running" line until run returns, and no other test
// runs a sidecar meanwhile, so the signal reaches only this one.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	writeReloadFixture(t, dir, 50)
	r := startRun(t, dir, reloadConfig)
	l := r.running(t)
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Signal(syscall.SIGHUP); err != nil {
		t.Skipf("cannot send SIGHUP here: %v", err)
	}
	waitReload(t, directClient(t), l.Admin, "reloaded once", func(d reloadDoc) bool { return d.Reload.Reloads.OK == 1 })
	if lines := logLines(r.stderr.String(), "configuration reloaded"); len(lines) != 1 || lines[0]["trigger"] != "signal" {
		t.Errorf("log lines \"configuration reloaded\" = %v, want one with trigger signal", lines)
	}
	if code := r.stop(t); code != exitOK {
		t.Errorf("run = %d after SIGHUP and a stop, want 0; stderr:\n%s", code, r.stderr)
	}
}

// TestReloadHammer rewrites the policy 100 times, valid and broken versions
// alternating, while four clients call through the forward proxy without
// pause. No call may fail because of a reload; every call must be decided
// by exactly one valid version, the one its event names; no broken version
// may ever decide a call.
func TestReloadHammer(t *testing.T) {
	t.Parallel()
	const (
		writes  = 100
		clients = 4
		maxK    = 100 // calls ask for retmax 1..maxK
	)
	// The bound of the j-th valid write: distinct for each, and far from
	// the one before, so that most calls would be decided differently by
	// the version before or after the one in force.
	boundOf := func(j int) int {
		if j%2 == 0 {
			return 5 + j
		}
		return 60 + j
	}
	up := startUpstream(t)
	dir := t.TempDir()
	writeReloadFixture(t, dir, 80)
	// Each POST /reload first waits reload.settle for the files to read
	// the same (TestReloadWaitsForWholeFiles checks that); replaceFile
	// renames whole files into place, so the hammer keeps it short: at the
	// default 250ms, 100 rewrites spent 25 s asleep while the clients
	// filled the events file.
	r := startRun(t, dir, reloadConfig+"reload: {settle: 20ms}\n")
	l := r.running(t)
	admin := directClient(t)
	bounds := map[string]int{boundsVersion(t, dir): 80} // every valid policy version: its bound
	broken := map[string]bool{}                         // versions of policies whose tests fail
	policy := filepath.Join(dir, policyPath)

	// The traffic.
	type call struct {
		k      int
		status int
		code   string // X-Toolgate-Error-Code
	}
	var (
		mu       sync.Mutex
		calls    = map[string]call{} // by session
		failures []string
		wg       sync.WaitGroup
	)
	done := make(chan struct{})
	for g := range clients {
		client := proxyClient(t, l.Forward)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				k := rand.IntN(maxK) + 1
				session := fmt.Sprintf("c%d-%d", g, n)
				a, err := fetch(client, "GET", fmt.Sprintf("%s/esearch?term=x&retmax=%d", up.URL(), k),
					map[string]string{"X-Toolgate-Session": session})
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s retmax=%d: %v", session, k, err))
				case a.status == http.StatusOK:
				case a.status == http.StatusForbidden && a.header.Get("X-Toolgate-Error-Code") == "policy" && isRefusal(a.body, "policy"):
				default:
					failures = append(failures, fmt.Sprintf("%s retmax=%d: status %d, code %q, body %s",
						session, k, a.status, a.header.Get("X-Toolgate-Error-Code"), a.body))
				}
				calls[session] = call{k: k, status: a.status, code: a.header.Get("X-Toolgate-Error-Code")}
				mu.Unlock()
			}
		}()
	}

	// The rewrites: even ones valid with a new bound, odd ones broken.
	start := time.Now()
	for i := range writes {
		var body, kind string
		switch {
		case i%2 == 0:
			body, kind = boundsPolicy(boundOf(i/2)), "valid"
		case i%4 == 1:
			body, kind = "package toolgate.bounds\n\nmax_retmax := {\n", "syntax error"
		default:
			body, kind = boundsPolicy(0), "failing test" // test_one_allowed fails
		}
		replaceFile(t, policy, body)
		switch kind {
		case "valid":
			bounds[boundsVersion(t, dir)] = boundOf(i / 2)
		case "failing test":
			broken[boundsVersion(t, dir)] = true
		}
		code, a := postReload(t, admin, l.Admin)
		wantCode := http.StatusOK
		if kind != "valid" {
			wantCode = http.StatusUnprocessableEntity
		}
		if code != wantCode {
			t.Errorf("write %d (%s): POST /reload = %d %+v, want %d", i, kind, code, a, wantCode)
		}
		if bound, ok := bounds[a.PolicyVersion]; !ok || (kind == "valid" && bound != boundOf(i/2)) {
			t.Errorf("write %d (%s): policy_version in force %q has bound %d (known %v), want %d", i, kind, a.PolicyVersion, bound, ok, boundOf(i/2))
		}
	}
	rewrites := time.Since(start)
	close(done)
	wg.Wait()
	if code := r.stop(t); code != exitOK {
		t.Fatalf("run = %d, want 0; stderr:\n%s", code, r.stderr)
	}
	t.Logf("%d rewrites in %v; %d calls", writes, rewrites.Round(time.Millisecond), len(calls))
	for i, f := range failures {
		if i == 10 {
			t.Errorf("... and %d more failed calls", len(failures)-10)
			break
		}
		t.Errorf("call failed during reloads: %s", f)
	}

	evs := readEvents(t, filepath.Join(dir, "events.ndjson"))
	if len(evs) != len(calls) {
		t.Errorf("%d events for %d calls, want one each", len(evs), len(calls))
	}
	used := map[string]int{}
	var wrong []string
	for _, e := range evs {
		c, ok := calls[e.Session]
		bound, known := bounds[e.PolicyVersion]
		allowed := e.OK && !e.Refused
		switch {
		case !ok:
			wrong = append(wrong, fmt.Sprintf("event for an unknown call: %+v", e))
		case broken[e.PolicyVersion]:
			wrong = append(wrong, fmt.Sprintf("%s retmax=%d: decided by policy version %s, whose tests fail", e.Session, c.k, e.PolicyVersion))
		case !known:
			wrong = append(wrong, fmt.Sprintf("%s retmax=%d: decided by policy version %q, which no valid write produced", e.Session, c.k, e.PolicyVersion))
		case e.ConfigVersion != r.version:
			wrong = append(wrong, fmt.Sprintf("%s: config_version %q, want %q", e.Session, e.ConfigVersion, r.version))
		case allowed != (c.k <= bound) || (c.status == http.StatusOK) != allowed || (!allowed && e.ErrorCode != "policy"):
			wrong = append(wrong, fmt.Sprintf("%s retmax=%d under bound %d (version %s): event ok=%v refused=%v code=%q, caller got %d",
				e.Session, c.k, bound, e.PolicyVersion, e.OK, e.Refused, e.ErrorCode, c.status))
		default:
			used[e.PolicyVersion]++
		}
	}
	for i, w := range wrong {
		if i == 10 {
			t.Errorf("... and %d more", len(wrong)-10)
			break
		}
		t.Error(w)
	}
	// The reloads happened under traffic: calls were decided by many versions.
	if len(used) < 10 {
		t.Errorf("calls were decided by %d policy versions in all, want at least 10 of %d: the traffic did not overlap the reloads", len(used), len(bounds))
	}
}

// isRefusal reports whether body is a refusal envelope with code.
func isRefusal(body, code string) bool {
	var env struct {
		OK    bool `json:"ok"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(body), &env) == nil && !env.OK && env.Error != nil && env.Error.Code == code
}

// TestReloadSwitchesEngine: a Rego policy runs on the compiled engine
// unless the configuration names another; switching it to the interpreter
// and back is a live reload, /status names the engine in force (and
// whether the compiled engine's first pass decides the policy), and each
// engine decides the same calls the same way.
func TestReloadSwitchesEngine(t *testing.T) {
	t.Parallel()
	up := startUpstream(t)
	dir := t.TempDir()
	writeReloadFixture(t, dir, 50)
	r := startRun(t, dir, reloadConfig)
	l := r.running(t)
	admin, client := directClient(t), proxyClient(t, l.Forward)
	for _, engine := range []string{"compiled", "interpreter", "compiled"} {
		cfg := reloadConfig
		if engine != "compiled" {
			cfg = strings.Replace(cfg, "  deadline: 5s\n", "  deadline: 5s\n  engine: "+engine+"\n", 1)
		}
		writeFile(t, r.path, cfg)
		if code, a := postReload(t, admin, l.Admin); code != http.StatusOK || !a.OK {
			t.Fatalf("reload to engine %s = %d %+v", engine, code, a)
		}
		// The bound is a rule the compiled engine's first pass decides.
		if got, want := statusPolicies(t, admin, l.Admin), []sidecar.PolicyStatus{{Name: "bounds", Engine: engine, FirstPass: engine == "compiled"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("/status policies = %+v, want %+v", got, want)
		}
		if got := esearch(t, client, up.URL(), 40); got != http.StatusOK {
			t.Errorf("%s: retmax=40 under bound 50: status %d, want 200", engine, got)
		}
		if got := esearch(t, client, up.URL(), 60); got != http.StatusForbidden {
			t.Errorf("%s: retmax=60 over bound 50: status %d, want 403", engine, got)
		}
	}
}
