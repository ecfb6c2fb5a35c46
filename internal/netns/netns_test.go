//go:build linux

package netns

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/proxy/tlsca"
	"github.com/toolgate/toolgate/sink"
)

// The world side: the child process that serves the demo tools inside the
// world namespace is this test binary, re-executed with worldEnv set.
const (
	worldEnv     = "TOOLGATE_NETNS_WORLD"
	worldCertEnv = "TOOLGATE_NETNS_WORLD_CA"
	toolgateUID  = 1337
	podIP        = "10.77.0.1"
	worldIP      = "10.77.0.2"
	pythonBin    = "/usr/bin/python3" // Debian's, with python3-requests
)

func TestMain(m *testing.M) {
	if os.Getenv(worldEnv) != "" {
		os.Exit(serveWorld())
	}
	os.Exit(m.Run())
}

// serveWorld serves the demo tools on :80 (plain) and :443 (TLS, a leaf
// per SNI from the world CA, which only toolgate trusts), prints "ready",
// and serves until killed.
func serveWorld() int {
	dir := os.Getenv(worldCertEnv)
	ca, err := tlsca.Load(filepath.Join(dir, "world-ca.crt"), filepath.Join(dir, "world-ca.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "world:", err)
		return 1
	}
	h := withHeaderEcho(demotools.New().Handler())
	plain, err := net.Listen("tcp", ":80")
	if err != nil {
		fmt.Fprintln(os.Stderr, "world:", err)
		return 1
	}
	secure, err := tls.Listen("tcp", ":443", &tls.Config{
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) { return ca.Leaf(hello.ServerName) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "world:", err)
		return 1
	}
	errc := make(chan error, 2)
	go func() { errc <- http.Serve(plain, h) }()
	go func() { errc <- http.Serve(secure, h) }()
	fmt.Println("ready")
	fmt.Fprintln(os.Stderr, "world:", <-errc)
	return 1
}

// withHeaderEcho answers GET /headers with the headers the request arrived
// with, as JSON, so a test can compare them with what its client sent.
func withHeaderEcho(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/headers" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(r.Header)
	})
}

// rig is the two namespaces and the files toolgate runs with.
type rig struct {
	pod, world string // namespace names
	dir        string // toolgate's folder: binary, config, CA, schemas, events
	bin        string // the toolgate binary
	bundle     string // system roots + toolgate's CA
	worldCA    string // the world's CA certificate
}

func TestTransparentInNetworkNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and iptables rules (run the tests as root, as make test in CI does)")
	}
	for _, tool := range []string{"ip", "iptables", "curl", pythonBin} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/testdeps.sh installs it): %v", tool, err)
		}
	}
	if err := exec.Command(pythonBin, "-c", "import requests").Run(); err != nil {
		t.Skipf("%s cannot import requests (python3-requests; scripts/testdeps.sh installs it)", pythonBin)
	}
	start := time.Now()
	r := newRig(t)

	// toolgate, as uid 1337, behind the pod's redirect rules.
	tg := r.startToolgate(t, toolgateUID, "toolgate.yaml")

	bundleEnv := []string{"SSL_CERT_FILE=" + r.bundle, "REQUESTS_CA_BUNDLE=" + r.bundle}
	typo, valid := "/esearch?term=x&retmx=5", "/esearch?term=crispr&retmax=2"
	clients := []struct {
		name string
		argv []string // the URL is appended
		env  []string
	}{
		{"curl", []string{"curl", "-sS", "--max-time", "10", "--cacert", r.bundle, "-w", "\n%{http_code}"}, nil},
		{"urllib", []string{pythonBin, "-c", pyURLLib}, bundleEnv},
		{"requests", []string{pythonBin, "-c", pyRequests}, bundleEnv},
	}
	calls := 0
	for _, c := range clients {
		for _, scheme := range []string{"http", "https"} {
			base := scheme + "://api.world.test"
			t.Run(c.name+"/"+scheme, func(t *testing.T) {
				status, body := r.client(t, c.argv, c.env, base+typo)
				var env struct {
					OK    bool `json:"ok"`
					Error *struct {
						Code, Reason string
						Violations   []struct{ Path string }
					} `json:"error"`
				}
				if status != 422 || json.Unmarshal([]byte(body), &env) != nil || env.Error == nil {
					t.Fatalf("typo: status %d body %q, want 422 and an envelope", status, body)
				}
				if env.Error.Code != "validation" || env.Error.Reason != "unknown_field" || len(env.Error.Violations) == 0 || env.Error.Violations[0].Path != "/retmx" {
					t.Errorf("typo refused as %+v, want validation/unknown_field at /retmx", env.Error)
				}
				status, body = r.client(t, c.argv, c.env, base+valid)
				if status != 200 || !strings.Contains(body, `"esearchresult"`) || !strings.Contains(body, `"crispr"`) {
					t.Errorf("valid call: status %d body %q, want upstream's 200", status, body)
				}
			})
			calls += 2
		}
	}

	// The world gets the caller's headers as sent, none added by toolgate's
	// HTTP client (curl's own User-Agent and Accept are switched off, so
	// the request has Host and X-Probe only).
	echoed := 0
	for _, scheme := range []string{"http", "https"} {
		status, body := r.client(t, []string{"curl", "-sS", "--max-time", "10", "--cacert", r.bundle, "-H", "User-Agent:", "-H", "Accept:", "-H", "X-Probe: " + scheme, "-w", "\n%{http_code}"}, nil,
			scheme+"://api.world.test/headers")
		var got map[string][]string
		if status != 200 || json.Unmarshal([]byte(body), &got) != nil {
			t.Errorf("headers over %s: %d %q", scheme, status, body)
		} else if len(got) != 1 || len(got["X-Probe"]) != 1 || got["X-Probe"][0] != scheme {
			t.Errorf("over %s the world received headers %v; the client sent only X-Probe: %s (and Host)", scheme, got, scheme)
		}
		calls++
		echoed++
	}

	// A host no tool matches is tunnelled untouched: the client sees the
	// world's own certificate (it trusts only the world CA here).
	status, body := r.client(t, []string{"curl", "-sS", "--max-time", "10", "--cacert", r.worldCA, "-w", "\n%{http_code}"}, nil,
		"https://other.world.test/faults/text")
	if status != 200 || body != "pong" {
		t.Errorf("tunnelled call: %d %q, want 200 pong", status, body)
	}
	calls++

	// The admin listener serves the CA; a connection straight to the
	// transparent listener is refused as a loop.
	caPEM, _ := os.ReadFile(filepath.Join(r.dir, "ca", "ca.crt"))
	if status, body := r.client(t, []string{"curl", "-sS", "-w", "\n%{http_code}"}, nil, "http://127.0.0.1:18090/ca.crt"); status != 200 || body != strings.TrimSpace(string(caPEM)) {
		t.Errorf("GET /ca.crt: %d %q, want the CA certificate", status, body)
	}
	if out, err := r.inPod([]string{"curl", "-sS", "--max-time", "5", "http://127.0.0.1:15001/esearch?term=x"}, nil); err == nil {
		t.Errorf("a call straight to the transparent listener was answered: %s", out)
	}
	metrics := r.metrics(t)
	if !strings.Contains(metrics, "toolgate_proxy_loops_total 1\n") {
		t.Errorf("loops_total after one direct connection: %s", grepLines(metrics, "toolgate_proxy_loops_total"))
	}
	if !strings.Contains(metrics, `toolgate_proxy_intercept_connections_total{listener="transparent",outcome="tunnelled"} 1`) {
		t.Errorf("tunnelled connections: %s", grepLines(metrics, "intercept_connections_total"))
	}

	tg.stop(t)
	evs := r.events(t)
	if len(evs) != calls {
		t.Fatalf("%d events for %d calls: %+v", len(evs), calls, evs)
	}
	var refused, forwarded, tunnelled int
	for _, ev := range evs {
		switch {
		case ev.Listener != "transparent":
			t.Errorf("event from listener %q, want transparent", ev.Listener)
		case ev.Reason == "tunnel" && ev.Host == "other.world.test" && ev.OK:
			tunnelled++
		case ev.Tool == "headers_echo" && ev.OK && ev.UpstreamStatus == 200:
			echoed--
		case ev.Tool != "pubmed_search" || ev.Host != "api.world.test":
			t.Errorf("event for tool %q host %q", ev.Tool, ev.Host)
		case ev.Refused && ev.ErrorCode == "validation" && ev.Reason == "unknown_field" && ev.UpstreamStatus == 0:
			refused++
		case ev.OK && ev.UpstreamStatus == 200:
			forwarded++
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	if echoed != 0 {
		t.Errorf("%d headers_echo calls without an ok event", echoed)
	}
	if refused != len(clients)*2 || forwarded != len(clients)*2 || tunnelled != 1 {
		t.Errorf("events: %d refused, %d forwarded, %d tunnelled; want %d, %d, 1", refused, forwarded, tunnelled, len(clients)*2, len(clients)*2)
	}

	// The loop the owner rule prevents, caught anyway: toolgate running as
	// a uid the rules do not exempt sees its own upstream connection come
	// back, refuses it, and the caller gets an upstream error, once.
	tg = r.startToolgate(t, 0, "toolgate.yaml")
	status, body = r.client(t, []string{"curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}"}, nil, "http://api.world.test"+valid)
	if status != 502 || !strings.Contains(body, `"code":"upstream"`) {
		t.Errorf("call through a looping toolgate: %d %q, want 502 upstream", status, body)
	}
	if m := r.metrics(t); !strings.Contains(m, "toolgate_proxy_loops_total 1\n") {
		t.Errorf("loops_total after one looped call: %s", grepLines(m, "toolgate_proxy_loops_total"))
	}
	tg.stop(t)
	if !strings.Contains(tg.stderr.String(), "routing loop") {
		t.Errorf("the loop was not logged; stderr:\n%s", tg.stderr)
	}

	// unmatched: deny. TLS to a host without tools is intercepted too, so
	// the call is refused with the envelope instead of a silent reset.
	tg = r.startToolgate(t, toolgateUID, "toolgate-deny.yaml")
	status, body = r.client(t, []string{"curl", "-sS", "--max-time", "10", "--cacert", r.bundle, "-w", "\n%{http_code}"}, nil,
		"https://other.world.test/faults/text")
	if status != 403 || !strings.Contains(body, `"reason":"not_allowlisted"`) {
		t.Errorf("unmatched host under deny: %d %q, want 403 policy/not_allowlisted", status, body)
	}
	tg.stop(t)
	if evs := r.events(t); len(evs) != 1 || !evs[0].Refused || evs[0].Host != "other.world.test" || evs[0].Listener != "transparent" {
		t.Errorf("deny events = %+v, want one refused call to other.world.test", evs)
	}
	t.Logf("netns end-to-end test took %v", time.Since(start).Round(time.Millisecond))
}

const pyURLLib = `import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=10)
    code, body = r.status, r.read()
except urllib.error.HTTPError as e:
    code, body = e.code, e.read()
sys.stdout.write(body.decode() + "\n" + str(code))
`

const pyRequests = `import sys, requests
r = requests.get(sys.argv[1], timeout=10)
sys.stdout.write(r.text + "\n" + str(r.status_code))
`

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// newRig builds toolgate, the CA and the bundle, the namespaces, the world
// servers and the pod's redirect rules. Cleanup undoes all of it, even when
// the test fails halfway.
func newRig(t *testing.T) *rig {
	var sfx [3]byte
	rand.Read(sfx[:])
	id := hex.EncodeToString(sfx[:])
	r := &rig{pod: "tgpod-" + id, world: "tgworld-" + id}

	// toolgate's folder: readable by uid 1337, events writable by it.
	dir, err := os.MkdirTemp("", "toolgate-netns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	r.dir = dir
	r.bin, err = testutil.ToolgateBinary("../..", dir)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd(t, r.bin, "ca", "init", "--dir", filepath.Join(dir, "ca"))
	must(t, os.Chown(filepath.Join(dir, "ca", "ca.key"), toolgateUID, toolgateUID))
	r.bundle = filepath.Join(dir, "bundle.pem")
	r.cmd(t, r.bin, "ca", "bundle", "--ca", filepath.Join(dir, "ca", "ca.crt"), "--out", r.bundle)
	r.worldCA = filepath.Join(dir, "world-ca.crt")
	certPEM, keyPEM, err := tlsca.Generate("netns world CA", time.Hour, time.Now())
	must(t, err)
	must(t, os.WriteFile(r.worldCA, certPEM, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "world-ca.key"), keyPEM, 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "schemas"), 0o755))
	schema, err := os.ReadFile("../demo/schemas/pubmed_search.json")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "schemas", "pubmed_search.json"), schema, 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "events"), 0o755))
	must(t, os.Chown(filepath.Join(dir, "events"), toolgateUID, toolgateUID))
	must(t, os.WriteFile(filepath.Join(dir, "toolgate.yaml"), []byte(podConfig), 0o644))
	deny := strings.Replace(podConfig, "unmatched: pass", "unmatched: deny", 1)
	must(t, os.WriteFile(filepath.Join(dir, "toolgate-deny.yaml"), []byte(deny), 0o644))

	// The namespaces, joined by a veth pair.
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", r.pod).Run()
		exec.Command("ip", "netns", "del", r.world).Run()
		os.RemoveAll(filepath.Join("/etc/netns", r.pod))
		os.Remove("/etc/netns") // only when no other namespace has files there
	})
	vp, vw := "tgp"+id, "tgw"+id
	for _, c := range [][]string{
		{"ip", "netns", "add", r.pod},
		{"ip", "netns", "add", r.world},
		{"ip", "link", "add", vp, "type", "veth", "peer", "name", vw},
		{"ip", "link", "set", vp, "netns", r.pod},
		{"ip", "link", "set", vw, "netns", r.world},
		{"ip", "-n", r.pod, "addr", "add", podIP + "/24", "dev", vp},
		{"ip", "-n", r.world, "addr", "add", worldIP + "/24", "dev", vw},
		{"ip", "-n", r.pod, "link", "set", "lo", "up"},
		{"ip", "-n", r.world, "link", "set", "lo", "up"},
		{"ip", "-n", r.pod, "link", "set", vp, "up"},
		{"ip", "-n", r.world, "link", "set", vw, "up"},
	} {
		r.cmd(t, c...)
	}
	// Names the pod's clients resolve: `ip netns exec` mounts
	// /etc/netns/POD/hosts over /etc/hosts for them. toolgate never
	// resolves them: it dials each connection's original destination.
	must(t, os.MkdirAll(filepath.Join("/etc/netns", r.pod), 0o755))
	must(t, os.WriteFile(filepath.Join("/etc/netns", r.pod, "hosts"),
		[]byte("127.0.0.1 localhost\n"+worldIP+" api.world.test other.world.test\n"), 0o644))

	// The world's servers.
	self, err := os.Executable()
	must(t, err)
	world := exec.Command("ip", "netns", "exec", r.world, self, "-test.run=^$")
	world.Env = append(os.Environ(), worldEnv+"=1", worldCertEnv+"="+dir)
	stdout, err := world.StdoutPipe()
	must(t, err)
	var werr bytes.Buffer
	world.Stderr = &werr
	must(t, world.Start())
	t.Cleanup(func() { world.Process.Kill(); world.Wait() })
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
		io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("world servers did not start: %s", werr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("world servers did not start in 20s: %s", werr.String())
	}

	// The pod's redirect rules: the script the init container runs.
	script, err := filepath.Abs("../../deploy/k8s/base/toolgate-iptables.sh")
	must(t, err)
	r.cmd(t, "ip", "netns", "exec", r.pod, "sh", script, "install")
	return r
}

// podConfig is toolgate's configuration inside the pod.
const podConfig = `
listen:
  forward: "off"
  transparent: 127.0.0.1:15001
admin:
  listen: 127.0.0.1:18090
unmatched: pass
egress:
  allow: [10.77.0.2] # the world's address: private, and reached through the pod's transparent listener
tls:
  ca_cert: ca/ca.crt
  ca_key: ca/ca.key
  upstream_ca: [world-ca.crt]
events:
  sidecar: netns
  file:
    path: events/events.ndjson
  queue:
    flush_interval: 20ms
tools:
  - name: pubmed_search
    match: {host: api.world.test, method: GET, path: /esearch}
    schema_file: schemas/pubmed_search.json
  - name: headers_echo
    match: {host: api.world.test, method: GET, path: /headers}
`

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cmd runs a command that must succeed.
func (r *rig) cmd(t *testing.T, argv ...string) {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// inPod runs an unmodified client in the pod namespace with only PATH and
// env in its environment: no proxy variable.
func (r *rig) inPod(argv []string, env []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", r.pod}, argv...)...)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent"}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// client runs a client whose output ends in "\n<status>".
func (r *rig) client(t *testing.T, argv, env []string, url string) (int, string) {
	t.Helper()
	out, err := r.inPod(append(append([]string(nil), argv...), url), env)
	if err != nil {
		t.Fatalf("%s %s: %v (%s)", argv[0], url, err, out)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	var status int
	fmt.Sscan(s[i+1:], &status)
	return status, strings.TrimSpace(s[:max(i, 0)])
}

// metrics reads toolgate's /metrics from inside the pod.
func (r *rig) metrics(t *testing.T) string {
	t.Helper()
	out, err := r.inPod([]string{"curl", "-sS", "--max-time", "5", "http://127.0.0.1:18090/metrics"}, nil)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return string(out)
}

// events reads the events toolgate wrote.
func (r *rig) events(t *testing.T) []sink.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(r.dir, "events", "events.ndjson"))
	must(t, err)
	defer f.Close()
	evs, err := sink.ReadEvents(f)
	must(t, err)
	return evs
}

// toolgate is a running toolgate process in the pod.
type toolgate struct {
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	done   chan error
}

// startToolgate runs toolgate in the pod namespace as uid with the
// configuration file config (in the rig's folder), and waits until it is
// serving.
func (r *rig) startToolgate(t *testing.T, uid int, config string) *toolgate {
	t.Helper()
	os.Remove(filepath.Join(r.dir, "events", "events.ndjson"))
	tg := &toolgate{stderr: new(testutil.SyncBuffer), done: make(chan error, 1)}
	tg.cmd = exec.Command(r.bin, "run", "--config", filepath.Join(r.dir, config))
	tg.cmd.Dir = r.dir
	tg.cmd.Env = []string{"PATH=/usr/bin:/bin"}
	tg.cmd.Stderr = tg.stderr
	tg.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	must(t, startInNetns(r.pod, tg.cmd))
	go func() { tg.done <- tg.cmd.Wait() }()
	t.Cleanup(func() {
		tg.cmd.Process.Kill()
		<-tg.done
		tg.done <- nil // for a later stop
	})
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(tg.stderr.String(), `"msg":"toolgate running"`) {
		select {
		case err := <-tg.done:
			t.Fatalf("toolgate exited: %v\n%s", err, tg.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("toolgate did not start in 15s:\n%s", tg.stderr)
		}
	}
	return tg
}

// stop stops toolgate gracefully (SIGTERM: queued events are written).
func (tg *toolgate) stop(t *testing.T) {
	t.Helper()
	tg.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-tg.done:
		if err != nil {
			t.Errorf("toolgate exited with %v:\n%s", err, tg.stderr)
		}
		tg.done <- nil
	case <-time.After(15 * time.Second):
		t.Fatalf("toolgate did not stop in 15s:\n%s", tg.stderr)
	}
}

// startInNetns starts cmd inside the named network namespace: a thread
// locked to this goroutine enters the namespace and forks the child there
// (the child inherits the thread's namespace; cmd's Credential applies
// as usual). The thread is never unlocked, so it dies with the goroutine
// instead of running other goroutines in the wrong namespace.
func startInNetns(name string, cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/var/run/netns", name))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
