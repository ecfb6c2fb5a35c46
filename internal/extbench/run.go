//go:build linux

package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

//go:embed testdata/*.tmpl
var templates embed.FS

// benchBody is the call every path carries: the in-process benchmark's
// 150-byte JSON body, five arguments the bench schema and policy accept.
const benchBody = `{"query":"EGFR kinase inhibitors","organism":"human","limit":20,"filters":{"phase_min":2,"modality":"small_molecule"},"ids":["P00533","P04626"]}`

// badBody fails the bench schema (query must be a string): the preflight
// sends it to every checking path to prove the check is on.
const badBody = `{"query":1}`

// options are the command line's settings.
type options struct {
	rounds      int
	duration    time.Duration // each 32-connection run
	latDuration time.Duration // each one-connection run
	warmup      time.Duration // each path's warm-up run, before the first round (0: none)
	conns       int
	threads     int
	only        *regexp.Regexp
	builds      []build
	jsonOut     string
	pprof       bool
	clickhouse  bool
	hold        bool
	together    bool // the two builds' paths at once, each with half the connections
	root        string
}

// build is one toolgate binary under test.
type build struct{ name, path string }

type buildFlag struct{ list *[]build }

func (b buildFlag) String() string { return "" }
func (b buildFlag) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("want NAME=PATH, got %q", v)
	}
	*b.list = append(*b.list, build{name, path})
	return nil
}

// run is the command: it parses args, starts everything, measures, prints
// the table, and stops everything it started.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("extbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds; the table shows medians")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "each path's run with -conns connections, per round (whole seconds)")
	fs.DurationVar(&o.latDuration, "latency-duration", 5*time.Second, "each path's run with one connection, per round (whole seconds)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "each path's warm-up run before the first round (whole seconds; 0 for none)")
	fs.IntVar(&o.conns, "conns", 32, "connections of the throughput runs")
	fs.IntVar(&o.threads, "threads", 2, "wrk threads of the throughput runs")
	only := fs.String("only", "", "run only the paths whose key matches this regular expression (direct always runs)")
	fs.Var(buildFlag{&o.builds}, "toolgate", "NAME=PATH of a toolgate binary to measure; repeat for an A/B run (default: built from this tree)")
	fs.StringVar(&o.jsonOut, "json", "", "also write every round's figures to this file")
	fs.BoolVar(&o.pprof, "pprof", false, "serve net/http/pprof on each toolgate's admin listener and print the addresses")
	fs.BoolVar(&o.clickhouse, "clickhouse", true, "measure the events-to-ClickHouse path (needs clickhouse-server)")
	fs.BoolVar(&o.hold, "hold", false, "start every path, print how to reach each, and wait for Ctrl-C instead of measuring (for profiling by hand)")
	fs.BoolVar(&o.together, "together", false, "with two -toolgate builds: run each toolgate path of both builds at the same time, each with half the connections, and compare their CPU per call round by round (a small difference on a noisy machine)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.together && len(o.builds) != 2 {
		fmt.Fprintln(stderr, "extbench: -together compares two builds: give -toolgate twice")
		return 2
	}
	if o.together && o.conns < 2 {
		fmt.Fprintln(stderr, "extbench: -together splits -conns between two builds: need -conns ≥ 2")
		return 2
	}
	if o.rounds < 1 || o.duration < time.Second || o.latDuration < time.Second || (o.warmup != 0 && o.warmup < time.Second) || o.conns < 1 || o.threads < 1 || o.threads > o.conns {
		fmt.Fprintln(stderr, "extbench: need -rounds ≥ 1, durations ≥ 1s, -warmup 0 or ≥ 1s, 1 ≤ -threads ≤ -conns")
		return 2
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(stderr, "extbench: -only:", err)
			return 2
		}
		o.only = re
	}
	res, err := bench(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "extbench:", err)
		return 1
	}
	if o.together {
		printTogether(stdout, o, res)
	} else {
		printTable(stdout, o, res)
		printPaired(stdout, o, res)
	}
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(stderr, "extbench:", err)
			return 1
		}
	}
	return 0
}

// path is one way from wrk to the upstream.
type path struct {
	Key   string `json:"key"`   // short name, for -only
	Label string `json:"label"` // the table's row name
	// Build and Variant name a toolgate path's build and variant ("rego");
	// both are empty for the other paths.
	Build   string `json:"build,omitempty"`
	Variant string `json:"variant,omitempty"`
	// Checks says the path refuses badBody (a schema is on).
	Checks bool `json:"checks"`
	// Envelope says the answer is toolgate's envelope.
	Envelope bool `json:"envelope"`

	connect string  // the URL wrk connects to
	uri     string  // the request target wrk sends
	proxy   string  // the forward proxy's URL, for the preflight
	target  string  // the upstream URL, for the preflight
	proc    *proc   // the process in the middle; nil for direct
	also    []*proc // more processes in the middle, counted in its CPU
}

// sample is one path's figures in one round.
type sample struct {
	RPS          float64 `json:"rps"`
	Requests     int64   `json:"requests"`
	ProxyCPUus   float64 `json:"proxy_cpu_us"`    // per request, the middle process(es)
	ProxyUserus  float64 `json:"proxy_user_us"`   // of it, in user space (the rest is the kernel's)
	UpstreamCPUs float64 `json:"upstream_cpu_us"` // per request
	// ProxyCPU1us is the middle process(es)' CPU per request at one
	// connection, where each call wakes its threads on its own.
	ProxyCPU1us float64 `json:"proxy_cpu1_us"`
	P50us       float64 `json:"p50_us"` // one connection
	P99us       float64 `json:"p99_us"` // one connection
}

// result is the whole run.
type result struct {
	Started  time.Time           `json:"started"`
	Rounds   int                 `json:"rounds"`
	Duration string              `json:"duration"`
	Conns    int                 `json:"conns"`
	Paths    []path              `json:"paths"`
	Samples  map[string][]sample `json:"samples"` // by path key, one per round
	// Together holds -together's rounds, by variant.
	Together map[string][]pairSample `json:"together,omitempty"`
	Elapsed  string                  `json:"elapsed"`
}

// bench starts the upstream and every path, checks each path answers as
// it should, then runs the rounds.
func bench(ctx context.Context, o options, logw io.Writer) (*result, error) {
	start := time.Now()
	for _, bin := range []string{"wrk", "nginx", "squid"} {
		if _, err := lookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found: install it (scripts/testdeps.sh --bench does)", bin)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	o.root = root
	dir, err := os.MkdirTemp("", "extbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// nginx's workers and squid run as unprivileged users when started as
	// root; they need to reach their folders.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	ps := &procs{dir: dir}
	defer ps.stopAll()
	up, paths, err := setup(ctx, o, ps, dir, logw)
	if err != nil {
		return nil, err
	}
	if o.hold {
		for _, p := range paths {
			pid := 0
			if p.proc != nil {
				pid = p.proc.cmd.Process.Pid
			}
			also := ""
			for _, a := range p.also {
				also += fmt.Sprintf(" (and %s pid %d)", a.name, a.cmd.Process.Pid)
			}
			fmt.Fprintf(logw, "extbench: %-12s pid %-7d wrk ... %s  (wrk.path = %q)%s\n", p.Key, pid, p.connect, p.uri, also)
		}
		fmt.Fprintf(logw, "extbench: upstream pid %d; holding until Ctrl-C\n", up.cmd.Process.Pid)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	res := &result{Started: start.UTC(), Rounds: o.rounds, Duration: o.duration.String(), Conns: o.conns,
		Paths: paths, Samples: map[string][]sample{}}

	// A short warm-up of each path: connection pools, JIT-free but
	// cache- and GC-warm processes.
	for _, p := range paths {
		if o.warmup == 0 {
			break
		}
		if _, err := runWrk(ctx, dir, p, 1, 1, o.warmup); err != nil {
			return nil, err
		}
	}
	if o.together {
		pairs := pairUp(paths, o.builds)
		if len(pairs) == 0 {
			return nil, fmt.Errorf("-together: -only selects no toolgate variant both builds run")
		}
		res.Together = map[string][]pairSample{}
		for r := 0; r < o.rounds; r++ {
			fmt.Fprintf(logw, "extbench: round %d of %d (together)\n", r+1, o.rounds)
			for _, pr := range pairs {
				s, err := measureTogether(ctx, o, dir, pr, r%2 == 1)
				if err != nil {
					return nil, err
				}
				res.Together[pr[0].Variant] = append(res.Together[pr[0].Variant], s)
			}
		}
		res.Elapsed = time.Since(start).Round(time.Second).String()
		return res, nil
	}
	for r := 0; r < o.rounds; r++ {
		fmt.Fprintf(logw, "extbench: round %d of %d\n", r+1, o.rounds)
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			s, err := measure(ctx, o, dir, p, up)
			if err != nil {
				return nil, err
			}
			res.Samples[p.Key] = append(res.Samples[p.Key], s)
		}
	}
	res.Elapsed = time.Since(start).Round(time.Second).String()
	return res, nil
}

// setup builds toolgate when no build is given, starts the upstream and
// every path, checks each path answers as it should and, with the nginx +
// OPA peer among them, that it and toolgate's schema + Rego paths decide
// the agreement calls alike.
func setup(ctx context.Context, o options, ps *procs, dir string, logw io.Writer) (*proc, []path, error) {
	if len(o.builds) == 0 {
		bin := filepath.Join(dir, "toolgate")
		fmt.Fprintln(logw, "extbench: building toolgate")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/toolgate")
		cmd.Dir, cmd.Stdout, cmd.Stderr = o.root, logw, logw
		if err := cmd.Run(); err != nil {
			return nil, nil, fmt.Errorf("build toolgate: %w", err)
		}
		o.builds = []build{{"toolgate", bin}}
	}

	up, upAddr, err := ps.startRole(ctx, "upstream")
	if err != nil {
		return nil, nil, err
	}
	paths, err := startPaths(ctx, o, ps, dir, upAddr, logw)
	if err != nil {
		return nil, nil, err
	}
	for i := range paths {
		if err := preflight(ctx, paths[i]); err != nil {
			return nil, nil, err
		}
	}
	var peer, checked []path
	for _, p := range paths {
		switch {
		case p.Key == peerKey:
			peer = append(peer, p)
		case p.Envelope && p.Checks && (strings.HasSuffix(p.Key, "rego") || strings.HasSuffix(p.Key, "reverse")):
			checked = append(checked, p)
		}
	}
	if len(peer) > 0 {
		if len(checked) == 0 { // startPaths starts the peer only beside one
			return nil, nil, fmt.Errorf("no toolgate schema + Rego path to check %s against", peerKey)
		}
		if err := agree(ctx, agreementCalls, append(checked, peer...)...); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(logw, "extbench: %s and toolgate's schema + Rego paths decide the %d agreement calls alike\n", peerKey, len(agreementCalls))
	}
	return up, paths, nil
}

// measure runs one path once with o.conns connections and once with one.
func measure(ctx context.Context, o options, dir string, p path, up *proc) (sample, error) {
	var s sample
	pcpu0, ucpu0 := p.cpu(), cpuOf(up.cmd.Process.Pid)
	w, err := runWrk(ctx, dir, p, o.threads, o.conns, o.duration)
	if err != nil {
		return s, err
	}
	pcpu1, ucpu1 := p.cpu(), cpuOf(up.cmd.Process.Pid)
	s.RPS, s.Requests = w.rps, w.requests
	if w.requests > 0 {
		s.ProxyCPUus = perRequest(pcpu1.total()-pcpu0.total(), w.requests)
		s.ProxyUserus = perRequest(pcpu1.user-pcpu0.user, w.requests)
		s.UpstreamCPUs = perRequest(ucpu1.total()-ucpu0.total(), w.requests)
	}
	pcpu0 = p.cpu()
	l, err := runWrk(ctx, dir, p, 1, 1, o.latDuration)
	if err != nil {
		return s, err
	}
	if pcpu1 = p.cpu(); l.requests > 0 {
		s.ProxyCPU1us = perRequest(pcpu1.total()-pcpu0.total(), l.requests)
	}
	s.P50us, s.P99us = l.p50, l.p99
	return s, nil
}

// perRequest is d per request, in µs.
func perRequest(d time.Duration, requests int64) float64 {
	return float64(d) / float64(time.Microsecond) / float64(requests)
}

// cpu is the CPU time of the path's middle process(es) so far.
func (p path) cpu() cpuTime {
	if p.proc == nil {
		return cpuTime{}
	}
	c := cpuOf(p.proc.cmd.Process.Pid)
	for _, a := range p.also {
		ac := cpuOf(a.cmd.Process.Pid)
		c.user, c.sys = c.user+ac.user, c.sys+ac.sys
	}
	return c
}

// startPaths starts nginx, squid, a private ClickHouse when asked and
// available, and one toolgate per variant and build.
func startPaths(ctx context.Context, o options, ps *procs, dir, upAddr string, logw io.Writer) ([]path, error) {
	upURL := "http://" + upAddr
	want := func(key string) bool { return key == "direct" || o.only == nil || o.only.MatchString(key) }
	paths := []path{{Key: "direct", Label: "direct (Go net/http upstream)", connect: upURL, uri: "/bench/direct", target: upURL + "/bench/direct"}}

	if want("nginx") {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		nd := filepath.Join(dir, "nginx")
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		conf, err := render(nd, "nginx.conf.tmpl", map[string]any{"Dir": nd, "Upstream": upAddr, "Listen": listen})
		if err != nil {
			return nil, err
		}
		p, err := ps.start("nginx", nil, nil, mustLook("nginx"), "-p", nd, "-c", conf, "-e", filepath.Join(nd, "nginx-error.log"))
		if err != nil {
			return nil, err
		}
		if err := waitListening(ctx, p, listen); err != nil {
			return nil, err
		}
		paths = append(paths, reversePath("nginx", "nginx reverse proxy, 2 workers", listen, "/bench/nginx", p, false, false))
	}
	policy := filepath.Join(o.root, "policies", "testdata", "bench")
	checkedWanted := false
	for _, b := range o.builds {
		checkedWanted = checkedWanted || want(key(b, o, "rego")) || want(key(b, o, "reverse"))
	}
	if want(peerKey) && !checkedWanted {
		fmt.Fprintf(logw, "extbench: %s left out: its agreement check needs a toolgate schema + Rego path; let -only select rego or reverse too\n", peerKey)
	} else if want(peerKey) {
		p, err := startOPAPeer(ctx, ps, dir, upAddr, policy, logw)
		switch {
		case errors.Is(err, errPeerMissing):
			fmt.Fprintf(logw, "extbench: %s left out: %v\n", peerKey, err)
		case err != nil:
			return nil, err
		default:
			paths = append(paths, p)
		}
	}
	if want("squid") {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		sd := filepath.Join(dir, "squid")
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		conf, err := render(sd, "squid.conf.tmpl", map[string]any{"Dir": sd, "Listen": listen})
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(sd, 0o777); err != nil { // squid drops to its own user
			return nil, err
		}
		p, err := ps.start("squid", nil, nil, mustLook("squid"), "-N", "-f", conf)
		if err != nil {
			return nil, err
		}
		if err := waitListening(ctx, p, listen); err != nil {
			return nil, err
		}
		paths = append(paths, forwardPath("squid", "squid forward proxy", listen, upURL+"/bench/squid", p, false, false))
	}

	if want("relay") {
		p, listen, err := ps.startRole(ctx, "relay", relayEnv+"="+upAddr)
		if err != nil {
			return nil, err
		}
		paths = append(paths, reversePath("relay", "Go TCP relay (no HTTP, no checks: the floor)", listen, "/bench/relay", p, false, false))
	}
	if want("goproxy") {
		p, listen, err := ps.startRole(ctx, "goproxy")
		if err != nil {
			return nil, err
		}
		paths = append(paths, forwardPath("goproxy", "bare goproxy forward proxy (no checks)", listen, upURL+"/bench/goproxy", p, false, false))
	}

	chAddr := ""
	chWanted := false
	for _, b := range o.builds {
		chWanted = chWanted || want(key(b, o, "clickhouse"))
	}
	if o.clickhouse && chWanted {
		if _, err := lookPath("clickhouse-server"); err != nil {
			return nil, fmt.Errorf("clickhouse-server not found: install it (scripts/clickhouse.sh install) or pass -clickhouse=false")
		}
		addr, err := startClickHouse(ctx, ps, filepath.Join(dir, "clickhouse"), o.root)
		if err != nil {
			return nil, err
		}
		chAddr = addr
	}

	for _, b := range o.builds {
		type variant struct {
			key, label   string
			route        string
			reverse, ch  bool
			checks, envl bool
			writeFile    bool // events.file.journal: false
		}
		for _, v := range []variant{
			{"pass", "forward, passthrough", "pass", false, false, false, false, false},
			{"schema", "forward, strict schema", "schema", false, false, true, true, false},
			{"rego", "forward, schema + 5-rule Rego", "rego", false, false, true, true, false},
			{"reverse", "reverse, schema + 5-rule Rego", "rego", true, false, true, true, false},
			{"filewrite", "forward, schema + Rego, each event written to the file (no journal)", "rego", false, false, true, true, true},
			{"clickhouse", "forward, schema + Rego, events to ClickHouse", "rego", false, true, true, true, false},
		} {
			k := key(b, o, v.key)
			if !want(k) || (v.ch && chAddr == "") {
				continue
			}
			td := filepath.Join(dir, k)
			fport, err := freePort()
			if err != nil {
				return nil, err
			}
			forward := fmt.Sprintf("127.0.0.1:%d", fport)
			reverse := ""
			if v.reverse {
				rport, err := freePort()
				if err != nil {
					return nil, err
				}
				reverse = fmt.Sprintf("127.0.0.1:%d", rport)
			}
			admin := "off"
			if o.pprof {
				aport, err := freePort()
				if err != nil {
					return nil, err
				}
				admin = fmt.Sprintf("127.0.0.1:%d", aport)
			}
			data := map[string]any{"Name": k, "Dir": td, "Forward": forward, "Reverse": reverse, "Upstream": upAddr,
				"Admin": admin, "Pprof": o.pprof, "Policy": policy, "ClickHouse": "", "Database": "", "WriteFile": v.writeFile}
			if v.ch {
				data["ClickHouse"] = chAddr
				data["Database"] = "extbench_" + strings.ReplaceAll(k, "-", "_")
			}
			conf, err := render(td, "toolgate.yaml.tmpl", data)
			if err != nil {
				return nil, err
			}
			p, err := ps.start(k, nil, nil, b.path, "run", "--config", conf)
			if err != nil {
				return nil, err
			}
			listen := forward
			if v.reverse {
				listen = reverse
			}
			if err := waitListening(ctx, p, listen); err != nil {
				return nil, err
			}
			if o.pprof {
				fmt.Fprintf(logw, "extbench: %s pprof at http://%s/debug/pprof/\n", k, admin)
			}
			label := "toolgate " + v.label
			if len(o.builds) > 1 {
				label = b.name + ": " + label
			}
			route := "/bench/" + v.route
			var tp path
			if v.reverse {
				tp = reversePath(k, label, reverse, route, p, v.checks, v.envl)
			} else {
				tp = forwardPath(k, label, forward, upURL+route, p, v.checks, v.envl)
			}
			tp.Build, tp.Variant = b.name, v.key
			paths = append(paths, tp)
		}
	}
	return paths, nil
}

// key is a toolgate path's key: the variant, prefixed by the build's name
// when there are several builds.
func key(b build, o options, variant string) string {
	if len(o.builds) > 1 {
		return b.name + "-" + variant
	}
	return variant
}

// forwardPath is a path through a forward proxy at listen: wrk connects to
// the proxy and sends the absolute URL.
func forwardPath(k, label, listen, target string, p *proc, checks, envl bool) path {
	return path{Key: k, Label: label, Checks: checks, Envelope: envl,
		connect: "http://" + listen, uri: target, proxy: "http://" + listen, target: target, proc: p}
}

// reversePath is a path through a server at listen that forwards what it
// is sent (a reverse proxy, the relay): wrk connects to it and sends route.
func reversePath(k, label, listen, route string, p *proc, checks, envl bool) path {
	return path{Key: k, Label: label, Checks: checks, Envelope: envl,
		connect: "http://" + listen, uri: route, target: "http://" + listen + route, proc: p}
}

// startClickHouse starts a private ClickHouse server in dir (its config
// written by scripts/clickhouse.sh, as internal/chtest does) and returns
// its native address.
func startClickHouse(ctx context.Context, ps *procs, dir, root string) (string, error) {
	bin, err := lookPath("clickhouse-server")
	if err != nil {
		return "", err
	}
	tcp, err := freePort()
	if err != nil {
		return "", err
	}
	httpPort, err := freePort()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "clickhouse.sh")
	if out, err := exec.CommandContext(ctx, "bash", script, "config", dir, strconv.Itoa(tcp), strconv.Itoa(httpPort)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s config: %w: %s", script, err, out)
	}
	p, err := ps.start("clickhouse", nil, nil, bin, "--config-file="+filepath.Join(dir, "config.xml"))
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", tcp)
	if err := waitListening(ctx, p, addr); err != nil {
		return "", err
	}
	return addr, nil
}

// render writes the named template, filled with data, into dir and
// returns the file's path.
func render(dir, name string, data map[string]any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	t, err := template.ParseFS(templates, "testdata/"+name)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", err
	}
	out := filepath.Join(dir, strings.TrimSuffix(name, ".tmpl"))
	return out, os.WriteFile(out, b.Bytes(), 0o644)
}

// preflight sends the bench call along p with Go's client and checks the
// answer; on a checking path it also checks that a call failing the
// schema is refused (by toolgate as a validation failure).
func preflight(ctx context.Context, p path) error {
	st, body, err := post(ctx, p, benchBody)
	switch {
	case err != nil:
		return fmt.Errorf("preflight %s: %w", p.Key, err)
	case st != http.StatusOK:
		return fmt.Errorf("preflight %s: status %d: %.300s", p.Key, st, body)
	case p.Envelope && !strings.HasPrefix(body, `{"ok":true`):
		return fmt.Errorf("preflight %s: want an envelope, got %.300s", p.Key, body)
	case !p.Envelope && !strings.Contains(body, `"bench"`) && !strings.HasPrefix(body, "{"):
		return fmt.Errorf("preflight %s: want the upstream's answer, got %.300s", p.Key, body)
	}
	if p.Checks {
		st, body, err := post(ctx, p, badBody)
		if err != nil {
			return fmt.Errorf("preflight %s (bad call): %w", p.Key, err)
		}
		if st < 400 || st > 499 || (p.Envelope && !strings.Contains(body, `"validation"`)) {
			return fmt.Errorf("preflight %s: a call failing the schema got %d %.300s, want a 4xx validation refusal", p.Key, st, body)
		}
	}
	return nil
}

// moduleRoot is the folder of go.mod, found from the working directory up.
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("go.mod not found from the working directory up: run from the repository")
		}
		d = parent
	}
}

// lookPath finds a command on PATH or in the sbin folders Debian puts
// servers in.
func lookPath(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, bin)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", bin)
}

func mustLook(bin string) string {
	p, _ := lookPath(bin)
	return p
}
