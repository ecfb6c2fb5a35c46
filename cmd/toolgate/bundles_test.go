package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/opacli"
	"github.com/toolgate/toolgate/internal/testutil"
)

// bundleServer serves the files of a folder as Go's file server does,
// with a strong ETag (a hash of the content) so If-None-Match is answered
// 304, on a listener that can be stopped and started again on the same
// address. It counts what it answered.
type bundleServer struct {
	dir  string
	addr string
	mu   sync.Mutex
	srv  *http.Server

	ok, notModified atomic.Int64
}

func startBundleServer(t *testing.T) *bundleServer {
	t.Helper()
	s := &bundleServer{dir: t.TempDir()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *bundleServer) serve(ln net.Listener) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(filepath.Join(s.dir, filepath.Base(r.URL.Path)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(b)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
		rec := &statusRecorder{ResponseWriter: w}
		http.ServeContent(rec, r, "bundle.tar.gz", time.Time{}, strings.NewReader(string(b)))
		switch rec.status {
		case http.StatusOK:
			s.ok.Add(1)
		case http.StatusNotModified:
			s.notModified.Add(1)
		}
	})
	s.mu.Lock()
	s.srv = &http.Server{Handler: h}
	srv := s.srv
	s.mu.Unlock()
	go srv.Serve(ln)
}

// down stops the server: connections are refused until up.
func (s *bundleServer) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// up listens on the same address again.
func (s *bundleServer) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// url is the URL of a file the server serves.
func (s *bundleServer) url(name string) string { return "http://" + s.addr + "/" + name }

// publish puts the file at src in place as name, by rename: a poll reads
// the old bundle or the new, never half of one.
func (s *bundleServer) publish(t *testing.T, src, name string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s.publishBytes(t, b, name)
}

func (s *bundleServer) publishBytes(t *testing.T, b []byte, name string) {
	t.Helper()
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		t.Fatal(err)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// writeKeyPair writes an RSA key pair as PEM files (private.pem,
// public.pem) into a new folder and returns it.
func writeKeyPair(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	writeFile(t, filepath.Join(dir, "private.pem"), string(priv))
	writeFile(t, filepath.Join(dir, "public.pem"), string(pub))
	return dir
}

// bundleSrc is the source of a test bundle: the bounds policy at bound,
// its unit tests, and toolgate's settings binding it to pubmed_search in
// mode.
type bundleSrc struct {
	bound int
	mode  string
	// policy, when set, replaces the policy's source.
	policy string
}

// buildBundle builds src with the real opa CLI (opa build --revision
// REV, signed with keys' private key when keys is not "") and returns the
// tarball's path.
func buildBundle(t *testing.T, src bundleSrc, rev, keys string) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "src")
	if err := os.MkdirAll(filepath.Join(root, "toolgate", "bounds"), 0o755); err != nil {
		t.Fatal(err)
	}
	policy := boundsPolicy(src.bound)
	if src.policy != "" {
		policy = src.policy
	}
	writeFile(t, filepath.Join(root, "toolgate", "bounds", "bounds.rego"), policy)
	writeFile(t, filepath.Join(root, "toolgate", "bounds", "bounds_test.rego"), boundsTests)
	settings := map[string]any{
		"policies": []map[string]any{{"name": "bounds", "package": "toolgate.bounds", "mode": src.mode}},
		"tools":    map[string]any{"pubmed_search": []string{"bounds"}},
	}
	b, _ := json.Marshal(settings)
	writeFile(t, filepath.Join(root, "toolgate", "data.json"), string(b))
	out := filepath.Join(dir, "bundle.tar.gz")
	args := []string{"build", "--bundle", "src", "--revision", rev, "-o", out}
	if keys != "" {
		args = append(args, "--signing-key", filepath.Join(keys, "private.pem"))
	}
	opacli.Run(t, dir, args...)
	return out
}

// bundleConfig is a sidecar whose one tool takes its policy from the
// bundle at URL, verified with the key at KEY, polled every second.
const bundleConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: bundles
  file: {path: events.ndjson}
  queue: {flush_interval: 50ms}
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
    schema_file: pubmed_search.json
policies:
  deadline: 5s
  bundles:
    - name: main
      url: URL
      min_delay: 1s
      max_delay: 1s
      signing:
        public_key: KEY
`

// bundleStatus reads the one bundle's /status.
func bundleStatus(t *testing.T, c *http.Client, admin string) sidecar.BundleStatus {
	t.Helper()
	a := do(t, c, "GET", "http://"+admin+"/status", nil)
	var d struct {
		Bundles []sidecar.BundleStatus `json:"bundles"`
	}
	if err := json.Unmarshal([]byte(a.body), &d); err != nil || len(d.Bundles) != 1 {
		t.Fatalf("/status bundles: %v\n%s", err, a.body)
	}
	return d.Bundles[0]
}

// waitBundle polls /status until cond holds, for at most limit.
func waitBundle(t *testing.T, c *http.Client, admin, what string, limit time.Duration, cond func(sidecar.BundleStatus) bool) sidecar.BundleStatus {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := bundleStatus(t, c, admin)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, the bundle is still not %s: %+v", limit, what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bundleRig is a sidecar polling a bundle server.
type bundleRig struct {
	dir    string
	srv    *bundleServer
	keys   string
	sc     *sidecar.Sidecar
	up     string
	admin  *http.Client
	client *http.Client
	logs   *testutil.SyncBuffer
}

// startBundleRig serves first (built and signed) and starts a sidecar
// polling it.
func startBundleRig(t *testing.T, first bundleSrc, rev string) *bundleRig {
	t.Helper()
	return startBundleRigWith(t, first, rev, func(*bundleServer) {}, func(c string) string { return c })
}

// startBundleRigWith is startBundleRig with before run on the server
// before the sidecar starts.
func startBundleRigWith(t *testing.T, first bundleSrc, rev string, before func(*bundleServer), edit func(string) string) *bundleRig {
	t.Helper()
	r := &bundleRig{dir: t.TempDir(), srv: startBundleServer(t), keys: writeKeyPair(t), logs: new(testutil.SyncBuffer)}
	r.srv.publish(t, buildBundle(t, first, rev, r.keys), "bundle.tar.gz")
	before(r.srv)
	path := filepath.Join(r.dir, "toolgate.yaml")
	cfg := edit(strings.NewReplacer("URL", r.srv.url("bundle.tar.gz"), "KEY", filepath.Join(r.keys, "public.pem")).Replace(bundleConfig))
	writeFile(t, path, cfg)
	writeFile(t, filepath.Join(r.dir, "pubmed_search.json"), pubmedSchema(1000))
	lc, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r.sc, err = sidecar.Start(lc, sidecar.Options{Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), ReloadPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sidecar.ShutdownGrace)
		defer cancel()
		r.sc.Stop(ctx)
	})
	r.up = startUpstream(t).URL()
	r.admin, r.client = directClient(t), proxyClient(t, r.sc.ProxyAddr("forward", 0))
	return r
}

// TestBundleLifecycle runs a sidecar on a bundle built and signed by the
// real opa CLI and served over HTTP, through every kind of failure: the
// bundle activates and decides calls, polls are answered 304, a bundle
// signed with another key, a corrupt tarball, a bundle whose policy does
// not compile and a server that is down are each refused with the last
// good revision kept deciding, and a good bundle activates afterwards.
func TestBundleLifecycle(t *testing.T) {
	t.Parallel()
	r := startBundleRig(t, bundleSrc{bound: 50}, "r1")
	st := waitBundle(t, r.admin, r.sc.AdminAddr(), "at r1", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r1" })
	if st.ActivatedAt == nil || !st.OK || st.ETag == "" {
		t.Errorf("after activation: %+v, want activated_at, ok, an etag", st)
	}
	if a := do(t, r.admin, "GET", "http://"+r.sc.AdminAddr()+"/readyz", nil); a.status != http.StatusOK {
		t.Errorf("/readyz after activation: %d, want 200", a.status)
	}
	// r1 bounds retmax at 50.
	if got := esearch(t, r.client, r.up, 60); got != http.StatusForbidden {
		t.Errorf("retmax=60 under r1 (bound 50): status %d, want 403", got)
	}
	if got := esearch(t, r.client, r.up, 40); got != http.StatusOK {
		t.Errorf("retmax=40 under r1: status %d, want 200", got)
	}
	// Polls of an unchanged bundle are answered 304, and counted.
	waitBundle(t, r.admin, r.sc.AdminAddr(), "answered 304 twice", 30*time.Second, func(st sidecar.BundleStatus) bool {
		return st.Downloads.NotModified >= 2
	})
	if n := r.srv.notModified.Load(); n < 2 {
		t.Errorf("the server answered 304 %d times, want at least 2", n)
	}
	if v := metricValue(t, r.admin, r.sc.AdminAddr(), `toolgate_bundle_info{bundle="main",revision="r1"}`); v != "1" {
		t.Errorf("toolgate_bundle_info for r1 = %q, want 1", v)
	}

	otherKeys := writeKeyPair(t)
	// Every bundle is built before the failures start: a bundle that
	// fails is fetched again at each poll, so a build (seconds on a loaded
	// machine) between reading the counts and publishing let the previous
	// failure count as the next one.
	built := func(src bundleSrc, rev, keys string) func() {
		path := buildBundle(t, src, rev, keys)
		return func() { r.srv.publish(t, path, "bundle.tar.gz") }
	}
	corrupt, err := os.ReadFile(buildBundle(t, bundleSrc{bound: 5}, "corrupt", r.keys))
	if err != nil {
		t.Fatal(err)
	}
	failures := []struct {
		name    string
		publish func()
		wantErr string // in last_error
		// activation is true when the bundle downloads and fails to activate.
		activation bool
	}{
		{"signed with another key", built(bundleSrc{bound: 5}, "evil", otherKeys), "verif", false},
		{"unsigned", built(bundleSrc{bound: 5}, "unsigned", ""), "signature", false},
		{"corrupt tarball", func() { r.srv.publishBytes(t, corrupt[:len(corrupt)/2], "bundle.tar.gz") }, "", false},
		{"failing unit test", built(bundleSrc{bound: 0}, "failingtest", r.keys), "test", true},
		{"builtin toolgate refuses", built(bundleSrc{policy: boundsPolicy(50) + "\nfetched := http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1:1/\"})\n"}, "httpsend", r.keys), "http.send", true},
		{"server down", func() { r.srv.down() }, "connect", false},
	}
	for _, f := range failures {
		before := bundleStatus(t, r.admin, r.sc.AdminAddr())
		f.publish()
		// A poll under way when the counts were read may still end in the
		// previous failure: this one's is the first with another error.
		st := waitBundle(t, r.admin, r.sc.AdminAddr(), f.name+": refused", 30*time.Second, func(st sidecar.BundleStatus) bool {
			if st.LastError == before.LastError {
				return false
			}
			if f.activation {
				return st.Activations.Failed > before.Activations.Failed
			}
			return st.Downloads.Failed > before.Downloads.Failed
		})
		if st.Revision != "r1" || st.OK || !strings.Contains(strings.ToLower(st.LastError), f.wantErr) {
			t.Errorf("%s: revision %q, ok %v, last_error %q; want r1 kept, not ok, an error with %q", f.name, st.Revision, st.OK, st.LastError, f.wantErr)
		}
		if got := esearch(t, r.client, r.up, 60); got != http.StatusForbidden {
			t.Errorf("%s: retmax=60 under r1 kept: status %d, want 403", f.name, got)
		}
		if got := esearch(t, r.client, r.up, 40); got != http.StatusOK {
			t.Errorf("%s: retmax=40 under r1 kept: status %d, want 200", f.name, got)
		}
	}
	if a := do(t, r.admin, "GET", "http://"+r.sc.AdminAddr()+"/readyz", nil); a.status != http.StatusOK {
		t.Errorf("/readyz with the last good revision in force: %d, want 200", a.status)
	}
	// The server comes back with a good bundle: it activates.
	r.srv.publish(t, buildBundle(t, bundleSrc{bound: 30}, "r2", r.keys), "bundle.tar.gz")
	r.srv.up(t)
	st = waitBundle(t, r.admin, r.sc.AdminAddr(), "at r2", 60*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r2" })
	if !st.OK {
		t.Errorf("after r2 activated: %+v, want ok", st)
	}
	if got := esearch(t, r.client, r.up, 40); got != http.StatusForbidden {
		t.Errorf("retmax=40 under r2 (bound 30): status %d, want 403", got)
	}
	t.Logf("activation of r2 took %.1fms (compile, tests, swap)", st.ActivationMS)

	// Each event names the revision that decided it.
	evs := readShipped(t, r.admin, r.sc.AdminAddr(), filepath.Join(r.dir, "events.ndjson"))
	seen := map[string]int{}
	for _, e := range evs {
		seen[e.PolicyVersion]++
	}
	if seen["r1"] == 0 || seen["r2"] == 0 || len(seen) != 2 {
		t.Errorf("events by policy_version: %v, want r1 and r2 only", seen)
	}
}

// TestBundleRolloutAndSwitchUnderLoad rolls a policy out as platform teams
// do: a revision marks it dry-run (calls it would refuse pass, and their
// events say it would have), then a revision enforces it. Then, while
// four clients call without pause, the bundle switches revision 20
// times: no call may fail, and every event names a revision that was
// served.
func TestBundleRolloutAndSwitchUnderLoad(t *testing.T) {
	t.Parallel()
	// The switches go back and forth between two revisions: the operator
	// allows rollback.
	r := startBundleRigWith(t, bundleSrc{bound: 50, mode: "dry_run"}, "dry", func(*bundleServer) {}, func(c string) string {
		return strings.Replace(c, "      min_delay: 1s\n", "      min_delay: 1s\n      allow_rollback: true\n", 1)
	})
	admin := r.sc.AdminAddr()
	waitBundle(t, r.admin, admin, "at dry", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "dry" })
	if got := esearch(t, r.client, r.up, 60); got != http.StatusOK {
		t.Errorf("retmax=60 with bounds in dry run: status %d, want 200", got)
	}
	r.srv.publish(t, buildBundle(t, bundleSrc{bound: 50}, "enforce", r.keys), "bundle.tar.gz")
	waitBundle(t, r.admin, admin, "at enforce", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "enforce" })
	if got := esearch(t, r.client, r.up, 60); got != http.StatusForbidden {
		t.Errorf("retmax=60 with bounds enforced: status %d, want 403", got)
	}

	const switches, clients = 20, 4
	revs := [2]string{"s0", "s1"}
	tarballs := [2]string{
		buildBundle(t, bundleSrc{bound: 50}, revs[0], r.keys),
		buildBundle(t, bundleSrc{bound: 60, mode: "dry_run"}, revs[1], r.keys),
	}
	var calls, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := fetch(r.client, "GET", r.up+"/esearch?term=x&retmax=10", nil)
				calls.Add(1)
				if err != nil || a.status != http.StatusOK {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d, err %v, body %.200s", a.status, err, a.body))
				}
			}
		}()
	}
	var activation []float64
	start := time.Now()
	for i := range switches {
		rev := revs[i%2]
		r.srv.publish(t, tarballs[i%2], "bundle.tar.gz")
		st := waitBundle(t, r.admin, admin, "at "+rev, 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == rev })
		activation = append(activation, st.ActivationMS)
	}
	took := time.Since(start)
	close(stop)
	wg.Wait()
	st := bundleStatus(t, r.admin, admin)
	if st.Activations.OK < switches+2 || st.Activations.Failed != 0 {
		t.Errorf("activations %+v, want at least %d ok and none failed", st.Activations, switches+2)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d calls failed during %d revision switches; first: %v", n, calls.Load(), switches, firstErr.Load())
	}
	slices.Sort(activation)
	t.Logf("%d calls, %d failed, during %d switches in %s; activation (compile, tests, swap) median %.1fms, max %.1fms",
		calls.Load(), failed.Load(), switches, took.Round(time.Millisecond), activation[len(activation)/2], activation[len(activation)-1])

	byVersion := map[string]int{}
	dryDenied := 0
	for _, e := range readShipped(t, r.admin, r.sc.AdminAddr(), filepath.Join(r.dir, "events.ndjson")) {
		byVersion[e.PolicyVersion]++
		if e.DryRunDenied {
			dryDenied++
			if e.PolicyVersion != "dry" {
				t.Errorf("a dry-run refusal under revision %q, want only under dry", e.PolicyVersion)
			}
		}
	}
	if dryDenied != 1 {
		t.Errorf("%d events with dry_run_denied, want 1 (retmax=60 under the dry revision)", dryDenied)
	}
	for v := range byVersion {
		if !slices.Contains([]string{"dry", "enforce", "s0", "s1"}, v) {
			t.Errorf("an event names policy_version %q, which no bundle served", v)
		}
	}
	if byVersion["s0"] == 0 || byVersion["s1"] == 0 {
		t.Errorf("events by policy_version: %v, want calls under s0 and s1", byVersion)
	}
}

// TestBundlePendingRefuses starts a sidecar while its bundle's server is
// down: it is not ready, and it refuses calls (pending: refuse, the
// default) rather than let them through unchecked, until the bundle is
// activated.
func TestBundlePendingRefuses(t *testing.T) {
	t.Parallel()
	r := startBundleRigWith(t, bundleSrc{bound: 50}, "r1", func(s *bundleServer) { s.down() }, func(c string) string { return c })
	admin := r.sc.AdminAddr()
	if a := do(t, r.admin, "GET", "http://"+admin+"/readyz", nil); a.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the bundle's first activation: %d, want 503", a.status)
	}
	a := do(t, r.client, "GET", r.up+"/esearch?term=x&retmax=10", map[string]string{"X-Toolgate-Envelope": "1"})
	if a.status != http.StatusForbidden || !strings.Contains(a.body, `policy bundle \"main\" has not been activated yet`) {
		t.Errorf("a call before activation: %d %s; want 403 naming the bundle", a.status, a.body)
	}
	waitBundle(t, r.admin, admin, "failing to download", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Downloads.Failed > 0 })
	r.srv.up(t)
	waitBundle(t, r.admin, admin, "at r1", 60*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r1" })
	if got := esearch(t, r.client, r.up, 10); got != http.StatusOK {
		t.Errorf("retmax=10 after activation: status %d, want 200", got)
	}
	if a := do(t, r.admin, "GET", "http://"+admin+"/readyz", nil); a.status != http.StatusOK {
		t.Errorf("/readyz after activation: %d, want 200", a.status)
	}

	// The bundle sources are set up at start: a reload that changes them
	// is refused, and the bundle keeps deciding.
	path := filepath.Join(r.dir, "toolgate.yaml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, path, strings.Replace(string(cfg), "max_delay: 1s", "max_delay: 2s", 1))
	code, ra := postReload(t, r.admin, admin)
	if code != http.StatusUnprocessableEntity || !strings.Contains(ra.Error, "restart") || ra.PolicyVersion != "r1" {
		t.Errorf("POST /reload with policies.bundles changed: %d %+v; want 422 saying restart, r1 in force", code, ra)
	}
	if got := esearch(t, r.client, r.up, 10); got != http.StatusOK {
		t.Errorf("retmax=10 after the refused reload: status %d, want 200", got)
	}
}

// TestPolicyBuildBundle builds a signed bundle with `toolgate policy build
// --bundle` and hands it to the real opa: opa inspect shows its revision
// and files, opa eval -b decides with it, and opa verifies its signature
// with the public key (and refuses another key). `toolgate policy test`
// runs its tests, and a sidecar activates it.
func TestPolicyBuildBundle(t *testing.T) {
	t.Parallel()
	keys := writeKeyPair(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(filepath.Join(src, "toolgate", "bounds"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "toolgate", "bounds", "bounds.rego"), boundsPolicy(50))
	writeFile(t, filepath.Join(src, "toolgate", "bounds", "bounds_test.rego"), boundsTests)
	writeFile(t, filepath.Join(src, "toolgate", "data.json"),
		`{"policies": [{"name": "bounds", "package": "toolgate.bounds"}], "tools": {"pubmed_search": ["bounds"]}}`)
	out := filepath.Join(dir, "bundle.tar.gz")
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"policy", "build", "--bundle", src, "--revision", "tb1",
		"--signing-key", filepath.Join(keys, "private.pem"), "-o", out}, &stdout, &stderr)
	if code != exitOK || !strings.Contains(stdout.String(), `revision "tb1", 1 policies, signed RS256`) {
		t.Fatalf("policy build --bundle = %d\n%s%s", code, stdout.String(), stderr.String())
	}

	inspect := opacli.Run(t, dir, "inspect", out)
	for _, want := range []string{"tb1", "/toolgate/bounds/bounds.rego", "data.toolgate.bounds"} {
		if !strings.Contains(inspect, want) {
			t.Errorf("opa inspect does not show %q:\n%s", want, inspect)
		}
	}
	writeFile(t, filepath.Join(dir, "input.json"), `{"arguments": {"term": "x", "retmax": 60}}`)
	if got := opacli.Run(t, dir, "eval", "-b", out, "-i", "input.json", "-f", "raw", "count(data.toolgate.bounds.deny)"); strings.TrimSpace(got) != "1" {
		t.Errorf("opa eval -b: count(deny) for retmax 60 = %q, want 1", got)
	}
	opacli.Run(t, dir, "build", "-b", out, "--verification-key", filepath.Join(keys, "public.pem"), "-o", filepath.Join(dir, "verified.tar.gz"))
	other := writeKeyPair(t)
	if msg, err := opacli.Try(t, dir, "build", "-b", out, "--verification-key", filepath.Join(other, "public.pem"), "-o", filepath.Join(dir, "x.tar.gz")); err == nil || !strings.Contains(msg, "verif") {
		t.Errorf("opa verified the bundle with another key: %v\n%s", err, msg)
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"policy", "test", out}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "PASS bounds/test_one_allowed") || !strings.Contains(stdout.String(), "2 passed, 0 failed") {
		t.Errorf("policy test BUNDLE = %d\n%s%s", code, stdout.String(), stderr.String())
	}

	// A sidecar takes the bundle toolgate built.
	srv := startBundleServer(t)
	srv.publish(t, out, "bundle.tar.gz")
	cfgDir := t.TempDir()
	path := filepath.Join(cfgDir, "toolgate.yaml")
	writeFile(t, path, strings.NewReplacer("URL", srv.url("bundle.tar.gz"), "KEY", filepath.Join(keys, "public.pem")).Replace(bundleConfig))
	writeFile(t, filepath.Join(cfgDir, "pubmed_search.json"), pubmedSchema(1000))
	lc, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sidecar.Start(lc, sidecar.Options{Logger: slog.New(slog.DiscardHandler), ReloadPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sidecar.ShutdownGrace)
		defer cancel()
		sc.Stop(ctx)
	})
	waitBundle(t, directClient(t), sc.AdminAddr(), "at tb1", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "tb1" })
	up := startUpstream(t)
	if got := esearch(t, proxyClient(t, sc.ProxyAddr("forward", 0)), up.URL(), 60); got != http.StatusForbidden {
		t.Errorf("retmax=60 under the built bundle: status %d, want 403", got)
	}
}

// TestBundlePollingCost measures what polling costs calls: four clients
// call as fast as they can through two sidecars deciding with the same
// bundle, one polling it every second (each poll a 304), one polling once
// an hour, in alternating rounds (which goes first alternates too), and it
// logs the median calls per second of each. It is a measurement, skipped
// unless TOOLGATE_MEASURE=1:
//
//	TOOLGATE_MEASURE=1 go test -count=1 -run TestBundlePollingCost -v ./cmd/toolgate/
func TestBundlePollingCost(t *testing.T) {
	if os.Getenv("TOOLGATE_MEASURE") != "1" {
		t.Skip("a measurement; set TOOLGATE_MEASURE=1")
	}
	same := func(c string) string { return c }
	hourly := func(c string) string {
		return strings.NewReplacer("min_delay: 1s", "min_delay: 3600s", "max_delay: 1s", "max_delay: 3600s").Replace(c)
	}
	polled := startBundleRigWith(t, bundleSrc{bound: 50}, "r1", func(*bundleServer) {}, same)
	quiet := startBundleRigWith(t, bundleSrc{bound: 50}, "r1", func(*bundleServer) {}, hourly)
	for _, r := range []*bundleRig{polled, quiet} {
		waitBundle(t, r.admin, r.sc.AdminAddr(), "at r1", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r1" })
	}
	round := func(r *bundleRig) float64 {
		var n atomic.Int64
		stop := time.Now().Add(2 * time.Second)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if a, err := fetch(r.client, "GET", r.up+"/esearch?term=x&retmax=10", nil); err == nil && a.status == http.StatusOK {
						n.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / 2
	}
	const rounds = 7
	var fast, slow []float64
	for i := range rounds {
		if i%2 == 0 {
			fast = append(fast, round(polled))
			slow = append(slow, round(quiet))
		} else {
			slow = append(slow, round(quiet))
			fast = append(fast, round(polled))
		}
	}
	slices.Sort(fast)
	slices.Sort(slow)
	st := bundleStatus(t, polled.admin, polled.sc.AdminAddr())
	t.Logf("calls/s, median of %d alternating 2s rounds, 4 clients: polled every 1s %.0f (%d polls answered 304 meanwhile), polled hourly %.0f",
		rounds, fast[rounds/2], st.Downloads.NotModified, slow[rounds/2])
}

// TestBundleRolloutIntoClickHouse rolls a policy out by bundle with events
// going to a real ClickHouse: the dry-run revision's would-be refusal and
// the enforcing revision's refusal are there, each under its revision's
// policy_version, as an analyst finds them.
func TestBundleRolloutIntoClickHouse(t *testing.T) {
	t.Parallel()
	ch := chtest.Shared(t)
	db := ch.Database(t)
	toCH := func(c string) string {
		return strings.Replace(c, "  file: {path: events.ndjson}\n",
			"  spool: {segment_age: 20ms, retry_min: 50ms, retry_max: 200ms}\n  clickhouse:\n    addr: ["+ch.Addr()+"]\n    database: "+db+"\n", 1)
	}
	r := startBundleRigWith(t, bundleSrc{bound: 50, mode: "dry_run"}, "dry", func(*bundleServer) {}, toCH)
	admin := r.sc.AdminAddr()
	waitBundle(t, r.admin, admin, "at dry", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "dry" })
	if got := esearch(t, r.client, r.up, 60); got != http.StatusOK {
		t.Errorf("retmax=60 in dry run: status %d, want 200", got)
	}
	r.srv.publish(t, buildBundle(t, bundleSrc{bound: 50}, "enforce", r.keys), "bundle.tar.gz")
	waitBundle(t, r.admin, admin, "at enforce", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "enforce" })
	if got := esearch(t, r.client, r.up, 60); got != http.StatusForbidden {
		t.Errorf("retmax=60 enforced: status %d, want 403", got)
	}
	const want = "dry 1  ['retmax must be at most 50'];enforce 0 policy [];"
	got := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rows, err := ch.TryQuery("SELECT policy_version, dry_run_denied, error_code, dry_run_violations FROM " + db + ".events FINAL ORDER BY time, time_us")
		if err != nil {
			continue // the database is created by the sidecar's first batch
		}
		got = ""
		for _, row := range rows {
			got += strings.Join(row, " ") + ";"
		}
		if got == want {
			return
		}
	}
	t.Errorf("events in ClickHouse = %q, want %q", got, want)
}
