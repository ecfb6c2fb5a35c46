// Package redistest starts private Redis servers for tests: Debian's
// redis-server (scripts/testdeps.sh installs it), each on a free port on
// 127.0.0.1 with its data in t.TempDir(), killed in t.Cleanup; a Redis
// Cluster of three such servers, its slots spread over them; and a master
// with one replica watched by one Sentinel (redis-server --sentinel).
//
// When redis-server is not installed, Start, StartCluster and
// StartSentinel skip the test saying so, unless CI is set: under CI a
// missing server fails the test.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
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

// Server is one private redis-server.
type Server struct {
	dir  string
	port int
	bin  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// bins returns redis-server's path (and redis-cli's), or skips or fails
// the test when it is missing.
func bins(t testing.TB) (string, string) {
	t.Helper()
	srv, err := exec.LookPath("redis-server")
	if err != nil {
		if _, err2 := os.Stat("/usr/bin/redis-server"); err2 == nil {
			srv = "/usr/bin/redis-server"
		}
	}
	cli, _ := exec.LookPath("redis-cli")
	if srv == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("redistest: redis-server is not installed and CI is set (scripts/testdeps.sh installs it)")
		}
		t.Skip("redistest: redis-server is not installed; run scripts/testdeps.sh (make test does) to run the fleet state tests")
	}
	return srv, cli
}

// Start starts a private standalone server and kills it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, _ := bins(t)
	s := &Server{dir: t.TempDir(), bin: bin}
	if err := s.startFresh(nil); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Logf("redistest: redis-server at %s in %s", s.Addr(), s.dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("redistest: %s log tail:\n%s", s.Addr(), s.logTail())
		}
		s.Kill()
	})
	return s
}

// startFresh picks a free port and starts the server there, trying again
// when another process took the port first.
func (s *Server) startFresh(extra []string) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		s.port = port
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--dir", s.dir, "--save", "", "--appendonly", "no",
			"--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no",
			"--maxmemory", "256mb", "--maxmemory-policy", "noeviction",
		}, extra...)
		if err = s.launch(); err == nil {
			return nil
		}
	}
	return err
}

func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, s.logTail())
		default:
		}
		if out, err := s.Do("PING"); err == nil && out == "PONG" {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("redis-server on port %d did not answer PING within 20s: %s", s.port, s.logTail())
}

// Addr is the server's host:port on 127.0.0.1.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// CPUTime is the CPU time (user and system) the running server used so
// far, from /proc (0 where there is none).
func (s *Server) CPUTime() time.Duration {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which ends with ')'): utime is the
	// 14th field of the line, stime the 15th, in clock ticks (100 a second
	// on Linux).
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Kill kills the server (SIGKILL) and waits for it to exit; its data,
// never saved, is gone.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Restart starts the killed server again on its port, empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	var err error
	for attempt := 0; attempt < 50; attempt++ { // the port may linger a moment
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("redistest: restart: %v", err)
}

// Do sends one command (inline protocol) and returns the first line of the
// answer without its type byte, or an error for an error answer.
func (s *Server) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty answer")
	}
	switch line[0] {
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line[1:], nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster is a Redis Cluster of three masters on loopback, with or
// without a replica each.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts three servers with cluster mode on, joins them with
// redis-cli --cluster create (the 16384 slots split three ways), waits
// until every node reports cluster_state:ok, and kills them in t.Cleanup.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return startCluster(t, 0)
}

// StartClusterWithReplicas is StartCluster with one replica per master
// (six servers): killing a master lets its replica take over (failover
// after the node timeout, 2s).
func StartClusterWithReplicas(t testing.TB) *Cluster {
	t.Helper()
	return startCluster(t, 1)
}

func startCluster(t testing.TB, replicas int) *Cluster {
	t.Helper()
	bin, cli := bins(t)
	if cli == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("redistest: redis-cli is not installed and CI is set")
		}
		t.Skip("redistest: redis-cli is not installed (package redis-tools); the cluster tests need it")
	}
	c := &Cluster{}
	dirs := make([]string, 3*(1+replicas))
	for i := range dirs {
		dirs[i] = t.TempDir() // before the cleanup below, which runs first
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			if t.Failed() {
				t.Logf("redistest: cluster node %s log tail:\n%s", n.Addr(), n.logTail())
			}
			n.Kill()
		}
	})
	var addrs []string
	for i := range dirs {
		s := &Server{dir: dirs[i], bin: bin}
		if err := s.startFresh([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0"}); err != nil {
			t.Fatalf("redistest: cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok within 30s: %q %v", n.Addr(), info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A replica can take over only once it has synced with its master.
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("INFO", "replication")
			if err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not in sync within 30s: %q %v", n.Addr(), info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("redistest: cluster at %v", addrs)
	return c
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// Sentinel is a Redis master with one replica, watched by one Sentinel
// (quorum 1) whose down-after-milliseconds is 500: killing the master
// makes the Sentinel promote the replica within a few seconds.
type Sentinel struct {
	Master, Replica *Server
	// Sentinel is the Sentinel process (redis-server --sentinel).
	Sentinel *Server
	// MasterName is the name the Sentinel knows the master by.
	MasterName string
}

// StartSentinel starts a master, its replica (synced) and a Sentinel
// monitoring them, each on a free port on 127.0.0.1 with its files in its
// own t.TempDir(); it waits until the Sentinel knows the replica, and kills
// all three in t.Cleanup. The Sentinel is Debian's redis-server run with
// --sentinel (no redis-sentinel package needed).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	bin, _ := bins(t)
	sn := &Sentinel{MasterName: "toolgate-test"}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()} // before the cleanup below, which runs first
	t.Cleanup(func() {
		for _, s := range []*Server{sn.Sentinel, sn.Replica, sn.Master} {
			if s == nil {
				continue
			}
			if t.Failed() {
				t.Logf("redistest: %s log tail:\n%s", s.Addr(), s.logTail())
			}
			s.Kill()
		}
	})
	sn.Master = &Server{dir: dirs[0], bin: bin}
	if err := sn.Master.startFresh([]string{"--repl-diskless-sync-delay", "0"}); err != nil {
		t.Fatalf("redistest: sentinel's master: %v", err)
	}
	sn.Replica = &Server{dir: dirs[1], bin: bin}
	if err := sn.Replica.startFresh([]string{"--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", strconv.Itoa(sn.Master.port)}); err != nil {
		t.Fatalf("redistest: sentinel's replica: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := sn.Replica.Do("INFO", "replication")
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica %s not in sync within 30s: %q %v", sn.Replica.Addr(), info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sn.Sentinel = &Server{dir: dirs[2], bin: bin}
	if err := sn.Sentinel.startSentinel(sn.MasterName, sn.Master.Addr()); err != nil {
		t.Fatalf("redistest: sentinel: %v", err)
	}
	for {
		info, err := sn.Sentinel.Do("INFO", "sentinel")
		if err == nil && strings.Contains(info, "status=ok") && strings.Contains(info, "slaves=1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel %s does not see the master and its replica within 30s: %q %v", sn.Sentinel.Addr(), info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("redistest: master %s, replica %s, sentinel %s (master name %s)", sn.Master.Addr(), sn.Replica.Addr(), sn.Sentinel.Addr(), sn.MasterName)
	return sn
}

// startSentinel writes a sentinel.conf monitoring master (the Sentinel
// rewrites it as it learns) and starts the Sentinel on a free port.
func (s *Server) startSentinel(name, master string) error {
	host, port, _ := net.SplitHostPort(master)
	conf := filepath.Join(s.dir, "sentinel.conf")
	body := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 1\n"+
		"sentinel down-after-milliseconds %[1]s 500\n"+
		"sentinel failover-timeout %[1]s 10000\n"+
		"sentinel parallel-syncs %[1]s 1\n", name, host, port)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return err
		}
		if s.port, err = freePort(); err != nil {
			return err
		}
		s.args = []string{conf, "--sentinel",
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no"}
		if err = s.launch(); err == nil {
			return nil
		}
	}
	return err
}

// InSync waits until the replica has every write the master acknowledged
// (their replication offsets agree), so that a failover loses nothing.
func (sn *Sentinel) InSync(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err1 := sn.Master.Do("INFO", "replication")
		r, err2 := sn.Replica.Do("INFO", "replication")
		mo, ro := infoField(m, "master_repl_offset"), infoField(r, "slave_repl_offset")
		if err1 == nil && err2 == nil && mo != "" && mo == ro {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica not in sync within 30s: master offset %q, replica offset %q (%v, %v)", mo, ro, err1, err2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Failover kills the master and waits until the Sentinel names the
// replica as the master (+switch-master), at most 60s.
func (sn *Sentinel) Failover(t testing.TB) {
	t.Helper()
	sn.Master.Kill()
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := sn.Sentinel.Do("INFO", "sentinel")
		if err == nil && strings.Contains(info, "address="+sn.Replica.Addr()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the sentinel did not promote the replica %s within 60s: %q %v", sn.Replica.Addr(), info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// infoField returns field's value in an INFO answer ("" when absent).
func infoField(info, field string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}
