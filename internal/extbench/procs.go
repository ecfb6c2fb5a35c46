//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/toolgate/toolgate/internal/demotools"
)

// roleEnv makes this binary (or the test binary) play a part instead of
// benchmarking, in its own process like every other part: "upstream"
// serves the demo tools, "goproxy" is a bare goproxy forward proxy,
// "relay" a bare TCP relay to the address in relayEnv.
const roleEnv = "EXTBENCH_ROLE"

// relayEnv is the address the "relay" role relays to.
const relayEnv = "EXTBENCH_RELAY_TO"

// serveRole plays the part roleEnv names and reports whether it named one,
// with the exit code: it starts the part's server on a free loopback
// port, prints the address on stdout and serves until stdin closes (the
// parent holds the pipe open) or a signal arrives.
func serveRole(stdout, stderr io.Writer) (int, bool) {
	role := os.Getenv(roleEnv)
	var start func() (string, io.Closer, error)
	switch role {
	case "upstream":
		start = startDemoTools
	case "goproxy":
		start = startGoproxy
	case "relay":
		start = func() (string, io.Closer, error) { return startRelay(os.Getenv(relayEnv)) }
	default:
		return 0, false
	}
	addr, srv, err := start()
	if err != nil {
		fmt.Fprintf(stderr, "extbench %s: %v\n", role, err)
		return 1, true
	}
	fmt.Fprintln(stdout, addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0, true
}

// startTimeout bounds the wait for a started process to answer.
const startTimeout = 60 * time.Second

// startDemoTools serves the demo tools, the upstream of every path.
func startDemoTools() (string, io.Closer, error) {
	s, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return s.Addr(), s, nil
}

// startGoproxy serves the proxy library toolgate is built on with nothing
// of toolgate's on it: goproxy's own forwarding of plain HTTP through a Go
// transport, no checks, no events, no envelope. It is the floor the
// table puts toolgate's paths against. The transport keeps 512 idle
// connections per host, as toolgate's does (Go's default of 2 makes 30 of
// 32 connections dial afresh for every call).
func startGoproxy() (string, io.Closer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	gp := goproxy.NewProxyHttpServer()
	gp.Tr = &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	srv := &http.Server{Handler: gp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv, nil
}

// startRelay serves a TCP relay to upstream: each connection accepted is
// paired with one connection to upstream, and a goroutine per direction
// reads what arrives and writes it on, byte for byte. No HTTP is parsed
// and nothing is checked, pooled or recorded: it is the floor of a proxy
// written in Go with a goroutine per connection, which every forwarder
// that reads a call and writes it on pays at least (the kernel's two
// extra sockets and the runtime's wake-ups), so the table can say how
// much of a path's cost is the hop itself and how much is the work on it.
func startRelay(upstream string) (string, io.Closer, error) {
	if upstream == "" {
		return "", nil, fmt.Errorf("%s is not set", relayEnv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				u, err := net.DialTimeout("tcp", upstream, 10*time.Second)
				if err != nil {
					c.Close()
					return
				}
				go pump(u, c)
				pump(c, u)
			}()
		}
	}()
	return ln.Addr().String(), ln, nil
}

// pump copies src to dst through a buffer of its own (plain reads and
// writes, as a proxy that looks at the bytes must make; Go's io.Copy
// would splice(2) between two TCP connections) until either side ends,
// then closes dst.
func pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
}

// proc is a process the benchmark started, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string // where its output goes
}

// procs owns every process the benchmark started and stops them all.
type procs struct {
	mu   sync.Mutex
	list []*proc
	dir  string
}

// start starts a process whose output goes to dir/name.log. stdin, when
// not nil, is kept as the process's standard input.
func (ps *procs) start(name string, stdin io.Reader, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(ps.dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = lf, lf, stdin
	cmd.Env = append(os.Environ(), env...)
	// Its own group, so stop reaches its children; killed with the
	// benchmark if the benchmark dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// exited reports whether p has ended, with its log's tail.
func (p *proc) exited() error {
	select {
	case <-p.done:
		b, _ := os.ReadFile(p.log)
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		return fmt.Errorf("%s exited (%v): %s", p.name, p.err, strings.TrimSpace(string(b)))
	default:
		return nil
	}
}

// stopAll stops every process: SIGTERM to its group, SIGKILL after 5 s.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for _, p := range list {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	for _, p := range list {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

// freePort returns a loopback port the kernel chose; the caller binds it
// soon after (a small race that start's readiness check catches).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts connections or p exits.
func waitListening(ctx context.Context, p *proc, addr string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if e := p.exited(); e != nil {
			return e
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing listens on %s after %s", p.name, addr, startTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startRole starts this binary in a child process playing role (see
// roleEnv) and returns the address it printed.
// env adds to the child's environment.
func (ps *procs) startRole(ctx context.Context, role string, env ...string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	pr, pw, err := os.Pipe() // the child's stdin: it ends when the pipe closes
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role, "GOMAXPROCS="), env...)
	cmd.Stdin = pr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	lf, err := os.Create(filepath.Join(ps.dir, role+".log"))
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", role, err)
	}
	pr.Close()
	p := &proc{name: role, cmd: cmd, done: make(chan struct{}), log: lf.Name()}
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			addrc <- strings.TrimSpace(sc.Text())
		}
		close(addrc)
		_, _ = io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		pw.Close()
		lf.Close()
		close(p.done)
	}()
	select {
	case addr, ok := <-addrc:
		if !ok {
			return nil, "", fmt.Errorf("%s printed no address (log %s)", role, lf.Name())
		}
		return p, addr, nil
	case <-time.After(startTimeout):
		return nil, "", fmt.Errorf("%s did not start", role)
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// clkTck is the kernel's clock tick for /proc/PID/stat's CPU fields; 100
// on every Linux user space.
const clkTck = 100

// cpuTime is a process tree's CPU time so far, in user space and in the
// kernel.
type cpuTime struct{ user, sys time.Duration }

// total is user and system time together.
func (c cpuTime) total() time.Duration { return c.user + c.sys }

// cpuOf returns the CPU time used so far by pid and all its descendants,
// from /proc.
func cpuOf(pid int) cpuTime {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return cpuTime{}
	}
	type st struct {
		ppid      int
		user, sys int64
	}
	all := map[int]st{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stt, _ := strconv.ParseInt(f[12], 10, 64)
		all[n] = st{ppid: ppid, user: ut, sys: stt}
	}
	var user, sys int64
	var add func(int, int)
	add = func(p, depth int) {
		user += all[p].user
		sys += all[p].sys
		if depth > 8 {
			return
		}
		for c, s := range all {
			if s.ppid == p {
				add(c, depth+1)
			}
		}
	}
	add(pid, 0)
	return cpuTime{user: time.Duration(user) * time.Second / clkTck, sys: time.Duration(sys) * time.Second / clkTck}
}
