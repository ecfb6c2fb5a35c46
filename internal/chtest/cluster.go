package chtest

import (
	"errors"
	"fmt"
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

// The clusters every test cluster's servers define in <remote_servers>
// (scripts/clickhouse.sh cluster-config), over the same servers.
const (
	// ShardsCluster has one shard per server, each with one replica.
	ShardsCluster = "toolgate_shards"
	// ReplicasCluster has one shard with every server as a replica. Its
	// tables' ZooKeeper paths must not hold {shard}: the servers' shard
	// macros are those of ShardsCluster.
	ReplicasCluster = "toolgate_replicas"
	// ClusterServers is how many ClickHouse servers a test cluster has.
	ClusterServers = 2
)

// zooKeeperJars is the class path of Debian's zookeeper package: its jar
// names its dependencies in its manifest; slf4j-simple makes it log.
var zooKeeperJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"}

// zkHint ends every message about a missing ZooKeeper.
const zkHint = "run `scripts/testdeps.sh` (it installs Debian's zookeeper package; make test does)"

// Cluster is a private ClickHouse cluster for tests: one standalone
// ZooKeeper and ClusterServers servers on loopback ports, which define
// ShardsCluster and ReplicasCluster, with macros {shard} (1, 2, ...) and
// {replica} (ch1, ch2, ...), and run ON CLUSTER statements.
type Cluster struct {
	// ZooKeeper is the cluster's coordination service.
	ZooKeeper *ZooKeeper
	// Servers are the ClickHouse servers, shard 1 first.
	Servers []*Server
}

// Addrs returns every server's native protocol address.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr()
	}
	return out
}

// Database returns a database name unique within this test binary, for a
// test that lets toolgate create it ON CLUSTER. It is dropped from every
// server that still answers in t.Cleanup.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), identifier(t.Name(), 40))
	t.Cleanup(func() {
		for _, s := range c.Servers {
			_, _ = s.tryQuery("DROP DATABASE IF EXISTS "+name, 10*time.Second)
		}
	})
	return name
}

// kill kills every server, then ZooKeeper.
func (c *Cluster) kill() {
	for _, s := range c.Servers {
		s.Kill()
	}
	c.ZooKeeper.Kill()
}

// errorTail returns the tails of every server's error log.
func (c *Cluster) errorTail() string {
	var b strings.Builder
	for i, s := range c.Servers {
		fmt.Fprintf(&b, "server %d (%s): %s\n", i+1, s.Addr(), s.errorTail())
	}
	fmt.Fprintf(&b, "zookeeper (%s): %s", c.ZooKeeper.Addr(), c.ZooKeeper.logTail())
	return b.String()
}

// StartCluster starts a private cluster in t.TempDir() and kills it in
// t.Cleanup. It fails the test when ZooKeeper or clickhouse-server is
// missing or does not start; it never skips. Fault tests own their
// cluster: they may Kill, Stop and Restart its servers and ZooKeeper.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startCluster(t.TempDir())
	if err != nil {
		t.Fatalf("chtest: %v", err)
	}
	t.Logf("chtest: cluster of %v, zookeeper %s", c.Addrs(), c.ZooKeeper.Addr())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chtest: %s", c.errorTail())
		}
		c.kill()
	})
	return c
}

// startCluster starts ZooKeeper and the servers in dir, trying new ports
// when a chosen one was taken before a server could bind it.
func startCluster(dir string) (*Cluster, error) {
	return withRetries(dir, func(dir, bin, script string, attempt int) (*Cluster, error) {
		return tryCluster(filepath.Join(dir, strconv.Itoa(attempt)), bin, script)
	})
}

func tryCluster(dir, bin, script string) (*Cluster, error) {
	ports, err := freePortsN(1 + 3*ClusterServers)
	if err != nil {
		return nil, err
	}
	script1 := func(args ...string) error {
		out, err := exec.Command("bash", append([]string{script}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v: %s", scriptPath, args[0], err, bytesTrim(out))
		}
		return nil
	}
	zk := &ZooKeeper{dir: filepath.Join(dir, "zookeeper"), port: ports[0]}
	if err := script1("zookeeper-config", zk.dir, strconv.Itoa(zk.port)); err != nil {
		return nil, err
	}
	if err := zk.launch(); err != nil {
		return nil, err
	}
	c := &Cluster{ZooKeeper: zk}
	var tcpPorts []string
	for i := 0; i < ClusterServers; i++ {
		tcpPorts = append(tcpPorts, strconv.Itoa(ports[1+3*i]))
	}
	for i := 0; i < ClusterServers; i++ {
		tcp, http, inter := ports[1+3*i], ports[2+3*i], ports[3+3*i]
		sdir := filepath.Join(dir, fmt.Sprintf("ch%d", i+1))
		if err := script1("config", sdir, strconv.Itoa(tcp), strconv.Itoa(http)); err != nil {
			c.kill()
			return nil, err
		}
		args := append([]string{"cluster-config", sdir, strconv.Itoa(zk.port), strconv.Itoa(inter), strconv.Itoa(i + 1), fmt.Sprintf("ch%d", i+1)}, tcpPorts...)
		if err := script1(args...); err != nil {
			c.kill()
			return nil, err
		}
		s := newServer(sdir, bin, tcp, http)
		s.readyLog = "DDLWorker: Processing tasks" // at debug level, which cluster-config sets
		c.Servers = append(c.Servers, s)
	}
	// The servers start side by side: each takes seconds on a loaded machine.
	errs := make([]error, len(c.Servers))
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.launch()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// ZooKeeper is a private standalone ZooKeeper (Debian's package) for a
// test cluster. Its methods may be called from several goroutines.
type ZooKeeper struct {
	dir  string // zoo.cfg, data/, log/
	port int

	mu   sync.Mutex
	proc *process
}

// Addr returns the client address, "127.0.0.1:PORT".
func (z *ZooKeeper) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(z.port)) }

// DeleteAll removes path and everything under it, with ZooKeeper's own
// command line client (for fault drills: a node removed under the
// servers that watch it).
func (z *ZooKeeper) DeleteAll(t testing.TB, path string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("chtest: java not found on PATH; %s", zkHint)
	}
	cmd := exec.Command(java, "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", strings.Join(zooKeeperJars, ":"), "org.apache.zookeeper.ZooKeeperMain",
		"-server", z.Addr(), "deleteall", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chtest: zookeeper deleteall %s: %v: %s", path, err, out)
	}
}

// Kill sends SIGKILL to ZooKeeper and waits until it has exited. It does
// nothing when ZooKeeper is not running.
func (z *ZooKeeper) Kill() {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.proc == nil {
		return
	}
	_ = syscall.Kill(-z.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-z.proc.done
	z.proc = nil
}

// Restart kills ZooKeeper when it runs, starts it again on the same port
// and data folder, and waits until it serves. It fails the test when
// ZooKeeper does not come back.
func (z *ZooKeeper) Restart(t testing.TB) {
	t.Helper()
	z.Kill()
	if err := z.launch(); err != nil {
		t.Fatalf("chtest: restart zookeeper: %v", err)
	}
}

// launch starts ZooKeeper and waits until it answers srvr as a serving
// standalone server.
func (z *ZooKeeper) launch() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.proc != nil {
		return errors.New("zookeeper is already running")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return fmt.Errorf("java not found on PATH; %s", zkHint)
	}
	var cp []string
	for _, j := range zooKeeperJars {
		if _, err := os.Stat(j); err == nil {
			cp = append(cp, j)
		}
	}
	if len(cp) == 0 || cp[0] != zooKeeperJars[0] {
		return fmt.Errorf("%s not found; %s", zooKeeperJars[0], zkHint)
	}
	logFile, err := os.OpenFile(filepath.Join(z.dir, "log", "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.log.dir="+filepath.Join(z.dir, "log"),
		"-cp", strings.Join(cp, ":"), "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(z.dir, "zoo.cfg"))
	cmd.Dir = z.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start zookeeper: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	z.proc = p
	deadline := time.After(startTimeout)
	for {
		if strings.Contains(z.srvr(), "Mode: standalone") {
			return nil
		}
		select {
		case <-p.done:
			z.proc = nil
			tail := z.logTail()
			err := fmt.Errorf("zookeeper exited during start (%s, port %d, folder %s): %s", p.cmd.ProcessState, z.port, z.dir, tail)
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-deadline:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			z.proc = nil
			return fmt.Errorf("zookeeper did not serve within %v (port %d, folder %s); killed it: %s", startTimeout, z.port, z.dir, z.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// srvr sends ZooKeeper's srvr four-letter word and returns the answer,
// or "" when it does not answer.
func (z *ZooKeeper) srvr() string {
	conn, err := net.DialTimeout("tcp", z.Addr(), time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return ""
	}
	buf := make([]byte, 4096)
	var out []byte
	for len(out) < len(buf) {
		n, err := conn.Read(buf[len(out):])
		out = buf[:len(out)+n]
		if err != nil {
			break
		}
	}
	return string(out)
}

// logTail returns the last lines of ZooKeeper's log.
func (z *ZooKeeper) logTail() string {
	path := filepath.Join(z.dir, "log", "zookeeper.log")
	b, err := os.ReadFile(path)
	if err != nil || len(bytesTrim(b)) == 0 {
		return path + " is empty"
	}
	lines := strings.Split(bytesTrim(b), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "tail of " + path + ":\n" + strings.Join(lines, "\n")
}

// SharedCluster returns the test binary's shared cluster, starting it on
// the first call. It needs Main in TestMain, which kills it when the tests
// are done. Tests on the shared cluster use their own Database and never
// kill or restart its parts; fault tests call StartCluster instead.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("chtest: SharedCluster needs chtest.Main: func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }")
	}
	if shared.cluster == nil && shared.clusterErr == nil {
		shared.clusterDir, shared.clusterErr = os.MkdirTemp("", "chtest-cluster-")
		if shared.clusterErr == nil {
			shared.cluster, shared.clusterErr = startCluster(shared.clusterDir)
		}
		if shared.clusterErr == nil {
			t.Logf("chtest: shared cluster of %v, zookeeper %s", shared.cluster.Addrs(), shared.cluster.ZooKeeper.Addr())
		}
	}
	if shared.clusterErr != nil {
		t.Fatalf("chtest: shared cluster: %v", shared.clusterErr)
	}
	// An earlier test's ON CLUSTER statements may have ended a server's
	// DDL worker (18.16): every later test would meet a cluster that
	// takes up no DDL. It gets the cluster as an operator leaves it.
	shared.cluster.Heal(t)
	return shared.cluster
}

// Heal restarts each server whose distributed DDL worker has ended
// (Server.DDLWorkerEnded), as docs/scale.md tells an operator to, and
// returns how many it restarted.
func (c *Cluster) Heal(t testing.TB) int {
	t.Helper()
	n := 0
	for i, s := range c.Servers {
		if s.DDLWorkerEnded() {
			t.Logf("chtest: server %d's distributed DDL worker has ended (ClickHouse 18.16 ends it on an unexpected ZooKeeper error); restarting it", i+1)
			s.Restart(t)
			n++
		}
	}
	return n
}
