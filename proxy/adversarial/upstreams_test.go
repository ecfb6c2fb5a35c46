package adversarial_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// arg is one argument as an upstream's framework parsed it.
type arg struct {
	// Source names the parser: query, form, files (multipart file parts),
	// json (a JSON object decoded whole), json_pairs (every top-level pair
	// in order, as a parser that keeps the first duplicate sees them) or
	// json_struct (Go's case-insensitive decoding into a struct).
	Source string `json:"source"`
	Key    string `json:"key"`
	// Value is a string for query, form and files, JSON text otherwise.
	Value string `json:"value"`
	JSON  bool   `json:"json"`
}

// hit is one request an upstream served.
type hit struct {
	// Kind is "tool" for the handler of the tools' path (/v1/tools, as the
	// framework routes it) and "other" for anything else.
	Kind   string `json:"kind"`
	Method string `json:"method"`
	Path   string `json:"path"`
	RawURI string `json:"raw_uri"`
	Host   string `json:"host"`
	Secret string `json:"secret"` // the X-Api-Key header, where secrets are injected
	Trace  string `json:"trace"`  // the Traceparent header
	Src    []arg  `json:"src"`

	upstream string // which upstream served it
}

// upstream is one server the tools call, and how to read what it served.
type upstream struct {
	name   string // go, flask, nginx, tls
	scheme string
	port   string
	take   func() ([]hit, error) // the hits since the last take
}

// authority is the host:port the tools name for this upstream.
func (u *upstream) authority() string { return "localhost:" + u.port }

// origin is the upstream's scheme://authority.
func (u *upstream) origin() string { return u.scheme + "://" + u.authority() }

// goRecorder is a Go service on net/http's ServeMux. Its tool handler reads
// arguments the ways Go services do: r.URL.Query(), ParseMultipartForm and
// FormValue's PostForm, and encoding/json on the body whatever its
// Content-Type.
type goRecorder struct {
	mu   sync.Mutex
	hits []hit
	next int
	srv  *httptest.Server
}

func newGoRecorder(useTLS bool) *goRecorder {
	g := &goRecorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/tools", g.serve("tool"))
	mux.HandleFunc("/v1/tools/{$}", g.serve("tool"))
	mux.HandleFunc("/", g.serve("other"))
	srv := httptest.NewUnstartedServer(mux)
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	g.srv = srv
	return g
}

func (g *goRecorder) port() string {
	_, p, _ := net.SplitHostPort(g.srv.Listener.Addr().String())
	return p
}

func (g *goRecorder) take() ([]hit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := append([]hit(nil), g.hits[g.next:]...)
	g.next = len(g.hits)
	return out, nil
}

const maxValue = 4096

func (g *goRecorder) serve(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := hit{Kind: kind, Method: r.Method, Path: r.URL.Path, RawURI: r.RequestURI, Host: r.Host,
			Secret: r.Header.Get("X-Api-Key"), Trace: r.Header.Get("Traceparent")}
		add := func(source, k, v string, isJSON bool) {
			if len(v) > maxValue {
				v = v[:maxValue]
			}
			h.Src = append(h.Src, arg{Source: source, Key: k, Value: v, JSON: isJSON})
		}
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(raw))
		for k, vs := range r.URL.Query() {
			for _, v := range vs {
				add("query", k, v, false)
			}
		}
		// FormValue's view: ParseMultipartForm runs ParseForm, which reads
		// an urlencoded body for POST, PUT and PATCH.
		if err := r.ParseMultipartForm(1 << 20); err == nil || errors.Is(err, http.ErrNotMultipart) {
			for k, vs := range r.PostForm {
				for _, v := range vs {
					add("form", k, v, false)
				}
			}
			if r.MultipartForm != nil {
				for k, fhs := range r.MultipartForm.File {
					for _, fh := range fhs {
						if f, err := fh.Open(); err == nil {
							b, _ := io.ReadAll(io.LimitReader(f, maxValue))
							f.Close()
							add("files", k, string(b), false)
						}
					}
				}
			}
		}
		// encoding/json views of the body, whatever its Content-Type.
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			for k, v := range m {
				add("json", k, string(v), true)
			}
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.Token(); err == nil && tok == json.Delim('{') {
			for dec.More() {
				kt, err := dec.Token()
				k, ok := kt.(string)
				var v json.RawMessage
				if err != nil || !ok || dec.Decode(&v) != nil {
					break
				}
				add("json_pairs", k, string(v), true)
			}
		}
		var st struct {
			Term   json.RawMessage `json:"term"`
			Retmax json.RawMessage `json:"retmax"`
		}
		if json.NewDecoder(bytes.NewReader(raw)).Decode(&st) == nil {
			if st.Term != nil {
				add("json_struct", "term", string(st.Term), true)
			}
			if st.Retmax != nil {
				add("json_struct", "retmax", string(st.Retmax), true)
			}
		}
		g.mu.Lock()
		g.hits = append(g.hits, h)
		g.mu.Unlock()
		if kind != "tool" {
			http.NotFound(w, r)
			return
		}
		// The tool's answer carries toolgate's own header names, as an
		// upstream may: they must never reach the caller as toolgate's.
		w.Header().Set("X-Toolgate-Error-Code", "forged-by-upstream")
		w.Header().Set("X-Toolgate-Forged", "forged-by-upstream")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}
}

// flaskApp is testdata/flask_upstream.py run by Debian's python3.
type flaskApp struct {
	cmd   *exec.Cmd
	stdin io.Closer
	port  string
	next  int
	cl    *http.Client
}

const debianPython = "/usr/bin/python3"

func startFlask() (*flaskApp, error) {
	script, err := filepath.Abs("testdata/flask_upstream.py")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(debianPython, script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = io.Discard
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start flask (python3-flask; run scripts/testdeps.sh): %w", err)
	}
	f := &flaskApp{cmd: cmd, stdin: stdin, cl: &http.Client{Timeout: 10 * time.Second}}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, out)
	}()
	select {
	case p := <-line:
		if _, err := strconv.Atoi(p); err != nil {
			f.stop()
			return nil, fmt.Errorf("flask app did not print its port (is python3-flask installed? run scripts/testdeps.sh); got %q", p)
		}
		f.port = p
	case <-time.After(30 * time.Second):
		f.stop()
		return nil, errors.New("flask app did not start within 30s")
	}
	return f, nil
}

func (f *flaskApp) take() ([]hit, error) {
	resp, err := f.cl.Get(fmt.Sprintf("http://127.0.0.1:%s/__seen?from=%d", f.port, f.next))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var hs []hit
	if err := json.NewDecoder(resp.Body).Decode(&hs); err != nil {
		return nil, fmt.Errorf("read flask records: %w", err)
	}
	f.next += len(hs)
	return hs, nil
}

func (f *flaskApp) stop() {
	f.stdin.Close()
	if f.cmd.Process != nil {
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		f.cmd.Wait()
	}
}

// nginxFront is Debian's nginx as a reverse proxy that cleans paths (it
// decodes, resolves dot segments and merges slashes, then passes the
// normalised URI) in front of a Go recorder. It runs from a private prefix
// with its own temp folders, on a free loopback port.
type nginxFront struct {
	cmd    *exec.Cmd
	dir    string
	port   string
	exited chan struct{}
}

const nginxBinary = "/usr/sbin/nginx"

const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    listen 127.0.0.1:%[2]s;
    location / {
      # A URI on proxy_pass makes nginx send its normalised path upstream.
      proxy_pass http://%[3]s/;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
    }
  }
}
`

func startNginx(upstreamAddr string) (*nginxFront, error) {
	if _, err := os.Stat(nginxBinary); err != nil {
		return nil, fmt.Errorf("nginx is not installed (run scripts/testdeps.sh): %w", err)
	}
	var err error
	for range 5 { // the free port may be taken before nginx binds it
		var n *nginxFront
		if n, err = tryNginx(upstreamAddr); err == nil {
			return n, nil
		}
	}
	return nil, err
}

func tryNginx(upstreamAddr string) (*nginxFront, error) {
	dir, err := os.MkdirTemp("", "toolgate-nginx-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, port, upstreamAddr), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(nginxBinary, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	n := &nginxFront{cmd: cmd, dir: dir, port: port, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(n.exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("nginx exited at start: %s", bytes.TrimSpace(b))
		default:
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
			c.Close()
			return n, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.stop()
	return nil, errors.New("nginx did not accept connections within 15s")
}

func (n *nginxFront) stop() {
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	os.RemoveAll(n.dir)
}

// freePort asks the kernel for a free loopback port, for a server (nginx)
// that cannot report the port it bound.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p, nil
}

// world is the upstreams every test of the binary shares: started once,
// stopped by TestMain.
type world struct {
	goUp, behindNginx, tlsUp *goRecorder
	flask                    *flaskApp
	nginx                    *nginxFront
	ups                      []*upstream // go, flask, nginx: the plain-HTTP upstreams
	tls                      *upstream
}

var (
	sharedOnce  sync.Once
	sharedWorld *world
	sharedErr   error
)

// shared starts the upstreams on first use.
func shared(t testing.TB) *world {
	t.Helper()
	sharedOnce.Do(func() { sharedWorld, sharedErr = startWorld() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedWorld
}

func startWorld() (*world, error) {
	w := &world{goUp: newGoRecorder(false), behindNginx: newGoRecorder(false), tlsUp: newGoRecorder(true)}
	var err error
	if w.flask, err = startFlask(); err != nil {
		w.stop()
		return nil, err
	}
	if w.nginx, err = startNginx(w.behindNginx.srv.Listener.Addr().String()); err != nil {
		w.stop()
		return nil, err
	}
	w.ups = []*upstream{
		{name: "go", scheme: "http", port: w.goUp.port(), take: w.goUp.take},
		{name: "flask", scheme: "http", port: w.flask.port, take: w.flask.take},
		{name: "nginx", scheme: "http", port: w.nginx.port, take: w.behindNginx.take},
	}
	w.tls = &upstream{name: "tls", scheme: "https", port: w.tlsUp.port(), take: w.tlsUp.take}
	return w, nil
}

func (w *world) stop() {
	if w == nil {
		return
	}
	for _, g := range []*goRecorder{w.goUp, w.behindNginx, w.tlsUp} {
		if g != nil {
			g.srv.Close()
		}
	}
	if w.flask != nil {
		w.flask.stop()
	}
	if w.nginx != nil {
		w.nginx.stop()
	}
}

// all is every upstream, the TLS one included, for draining hits.
func (w *world) all() []*upstream {
	out := append([]*upstream(nil), w.ups...)
	if w.tls != nil {
		out = append(out, w.tls)
	}
	return out
}

// tlsClientConfig lets an attacker's TLS client talk to anything: it does
// not care whose certificate it gets.
func tlsClientConfig(sni string) *tls.Config {
	return &tls.Config{ServerName: sni, InsecureSkipVerify: true} //nolint:gosec // the attacker trusts anything
}

func TestMain(m *testing.M) {
	code := m.Run()
	sharedWorld.stop()
	os.Exit(code)
}
