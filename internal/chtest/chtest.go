// Package chtest starts private ClickHouse servers for tests.
//
// Each server is a real clickhouse-server process (Debian's package, 18.16 in
// CI) with its own folder, its own free ports on 127.0.0.1, and no link to the
// system service, /var/lib/clickhouse or the default ports. Its XML config is
// written by scripts/clickhouse.sh (`config`), the one place it is defined;
// this package starts the process itself, in its own process group, so Kill
// reaches it and it dies with the test binary.
//
// Fault tests call Start and own their server: they may Kill, Restart and Stop
// it. Packages with many small tests share one server per test binary:
//
//	func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := chtest.Shared(t)
//		db := srv.Database(t) // a fresh database, so tests do not collide
//		srv.Exec(t, "CREATE TABLE "+db+".events (a UInt8) ENGINE = MergeTree ORDER BY a")
//	}
//
// A missing clickhouse-server fails the test (it never skips); the message says
// to run `scripts/clickhouse.sh install`, which `make test` does.
//
// StartCluster and SharedCluster start a cluster instead: a private ZooKeeper
// (Debian's zookeeper package) and two servers that define a 2-shard cluster
// (ShardsCluster) and a 2-replica one (ReplicasCluster), for the tests of
// events.clickhouse.cluster and its fault drills.
package chtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// startTimeout bounds the wait for a started server's first answer.
	startTimeout = 60 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 10 * time.Second
	// queryTimeout bounds one Query or Exec.
	queryTimeout = 60 * time.Second
	// maxResult bounds the bytes Query reads from one answer.
	maxResult = 64 << 20
	// startAttempts is how many port pairs Start tries; another process may
	// take a chosen port before the server binds it.
	startAttempts = 3
	// scriptPath is the script that writes the config, relative to the module root.
	scriptPath = "scripts/clickhouse.sh"
	// installHint ends every message about a missing or broken server.
	installHint = "run `scripts/clickhouse.sh install` (make test does)"
)

// identityQuery returns the data path of the server that answers it. Readiness
// compares it with the server's folder, so a server that failed to bind its
// port is never mistaken for another one listening there.
const identityQuery = "SELECT data_path FROM system.databases WHERE name = 'default'"

// Server is a private ClickHouse server for tests. Its methods may be called
// from several goroutines.
type Server struct {
	dir      string // absolute, symlinks resolved: config.xml, users.xml, data/, log/
	bin      string // path of clickhouse-server
	tcpPort  int
	httpPort int
	client   *http.Client
	// readyLog, when set, must appear in log/server.log, written by this
	// run, before the server counts as started (a cluster server's DDL
	// worker: 18.16 crashes on an ON CLUSTER query it gets before its DDL
	// worker has reached ZooKeeper).
	readyLog string

	mu       sync.Mutex
	proc     *process // nil when the server is not running
	logStart int64    // where this run's lines begin in log/server.log
}

// process is one run of clickhouse-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// Start starts a private server in t.TempDir() on free ports and kills it in
// t.Cleanup. It fails the test when clickhouse-server is missing or does not
// start; it never skips. When the test has failed, the cleanup logs the tail of
// the server's error log.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(t.TempDir())
	if err != nil {
		t.Fatalf("chtest: %v", err)
	}
	t.Logf("chtest: clickhouse-server at %s (http %s) in %s", s.Addr(), s.HTTPAddr(), s.dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chtest: %s", s.errorTail())
		}
		s.Kill()
	})
	return s
}

// start writes a config into dir and starts a server there, trying new ports
// when the chosen ones were taken before the server could bind them.
func start(dir string) (*Server, error) {
	return withRetries(dir, func(dir, bin, script string, _ int) (*Server, error) {
		tcpPort, httpPort, err := freePorts()
		if err != nil {
			return nil, err
		}
		s := newServer(dir, bin, tcpPort, httpPort)
		if out, err := exec.Command("bash", script, "config", dir, strconv.Itoa(tcpPort), strconv.Itoa(httpPort)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s config: %v: %s", scriptPath, err, bytesTrim(out))
		}
		return s, s.launch()
	})
}

// withRetries finds clickhouse-server and the config script, resolves dir,
// and calls try (attempt counting from 1) until it starts what it starts,
// trying again, at most startAttempts times, only when a port it chose was
// taken before the server could bind it.
func withRetries[T any](dir string, try func(dir, bin, script string, attempt int) (T, error)) (T, error) {
	var zero T
	bin, err := serverBinary()
	if err != nil {
		return zero, err
	}
	script, err := findScript()
	if err != nil {
		return zero, err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return zero, err
	}
	for attempt := 1; ; attempt++ {
		v, err := try(dir, bin, script, attempt)
		if err == nil {
			return v, nil
		}
		if attempt == startAttempts || !errors.Is(err, errPortTaken) {
			return zero, err
		}
	}
}

func newServer(dir, bin string, tcpPort, httpPort int) *Server {
	return &Server{
		dir: dir, bin: bin, tcpPort: tcpPort, httpPort: httpPort,
		// No keep-alive: a restarted or killed server never meets a stale
		// pooled connection, and loopback connections are cheap.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// Addr returns the native protocol address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tcpPort)) }

// HTTPAddr returns the HTTP interface address, "127.0.0.1:PORT".
func (s *Server) HTTPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.httpPort)) }

// Dir returns the server's folder: config.xml, users.xml, data/ and log/.
func (s *Server) Dir() string { return s.dir }

// Kill sends SIGKILL to the server's process group and waits until the process
// has exited. It does nothing when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.proc == nil {
		return
	}
	_ = syscall.Kill(-s.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-s.proc.done
	s.proc = nil
}

// Stop stops the server gracefully: SIGTERM, then SIGKILL when it has not
// exited after 10 s. It does nothing when the server is not running.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.proc == nil {
		return
	}
	_ = syscall.Kill(-s.proc.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.proc.done:
		s.proc = nil
	case <-time.After(stopTimeout):
		s.killLocked()
	}
}

// Restart starts the server again on the same ports and data folder and waits
// until it answers; a running server is stopped gracefully first. It fails the
// test when the server does not come back.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	s.stopLocked()
	s.mu.Unlock()
	if err := s.launch(); err != nil {
		t.Fatalf("chtest: restart: %v", err)
	}
}

// errPortTaken marks a start that failed because a port was in use.
var errPortTaken = errors.New("port in use")

// launch starts clickhouse-server on the written config and waits until it
// answers the identity query.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("server is already running")
	}
	logFile, err := os.OpenFile(filepath.Join(s.dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Truncated so that the tail shown on failure belongs to this run.
	if err := os.WriteFile(filepath.Join(s.dir, "log", "error.log"), nil, 0o644); err != nil {
		logFile.Close()
		return err
	}
	var logStart int64
	if fi, err := os.Stat(filepath.Join(s.dir, "log", "server.log")); err == nil {
		logStart = fi.Size()
	}
	s.logStart = logStart
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.dir, "config.xml"))
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w; %s", s.bin, err, installHint)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	s.proc = p

	want := filepath.Join(s.dir, "data", "data", "default") + "/"
	deadline := time.After(startTimeout)
	for {
		rows, err := s.tryQuery(identityQuery, 2*time.Second)
		if err == nil && len(rows) == 1 && len(rows[0]) == 1 && rows[0][0] == want && s.logHas(logStart) {
			return nil
		}
		select {
		case <-p.done:
			s.proc = nil
			tail := s.errorTail()
			err := fmt.Errorf("clickhouse-server exited during start (%s, ports %d and %d, folder %s): %s",
				p.cmd.ProcessState, s.tcpPort, s.httpPort, s.dir, tail)
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-deadline:
			s.killLocked()
			return fmt.Errorf("clickhouse-server did not answer within %v (ports %d and %d, folder %s); killed it: %s",
				startTimeout, s.tcpPort, s.httpPort, s.dir, s.errorTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logHas reports whether the server's log, from byte start on, holds
// readyLog (always true without one).
func (s *Server) logHas(start int64) bool {
	if s.readyLog == "" {
		return true
	}
	f, err := s.openLog(start)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxResult))
	return err == nil && strings.Contains(string(b), s.readyLog)
}

// DDLWorkerEnded reports whether this run of the server has ended its
// distributed DDL worker: 18.16 ends it for good on a ZooKeeper error it
// does not expect ("Unexpected ZooKeeper error: ... Terminating."), such
// as two replicas both marking an ON CLUSTER ALTER of a replicated table
// done, and the server then takes up no ON CLUSTER statement until it is
// restarted.
func (s *Server) DDLWorkerEnded() bool {
	s.mu.Lock()
	start := s.logStart
	s.mu.Unlock()
	f, err := s.openLog(start)
	if err != nil {
		return false
	}
	defer f.Close()
	return ddlWorkerEnded(f)
}

// openLog opens the server's log at byte start.
func (s *Server) openLog(start int64) (*os.File, error) {
	f, err := os.Open(filepath.Join(s.dir, "log", "server.log"))
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ddlWorkerEnded reads a server log for the DDL worker's end: the line
// "DDLWorker: Unexpected ZooKeeper error", then its stack trace, then
// ". Terminating." before the next message.
func ddlWorkerEnded(r io.Reader) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	inError := false
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, "DDLWorker: Unexpected ZooKeeper error"):
			if strings.Contains(l, "Terminating") {
				return true
			}
			inError = true
		case logLineStart.MatchString(l):
			inError = false // the next message
		case inError && strings.Contains(l, "Terminating"):
			return true
		}
	}
	return false
}

// logLineStart matches the start of a message in a server log (its date);
// the lines of a stack trace do not start so.
var logLineStart = regexp.MustCompile(`^\d{4}\.\d{2}\.\d{2} `)

// errorTail returns the last messages of the server's error log (their
// stack traces left out: 18.16 prints a dozen frames per error, which
// would push the first, telling error out of any tail), then the last
// lines of its distributed DDL worker (the tasks it took up last, and
// anything it said above debug level), or says the logs are empty.
func (s *Server) errorTail() string {
	var b strings.Builder
	if lines := logMessages(filepath.Join(s.dir, "log", "error.log"), nil, 20); len(lines) > 0 {
		fmt.Fprintf(&b, "last errors in %s:\n%s", filepath.Join(s.dir, "log", "error.log"), strings.Join(lines, "\n"))
	} else if raw := fileLines(filepath.Join(s.dir, "log", "stdout.log"), 20); len(raw) > 0 {
		fmt.Fprintf(&b, "tail of %s:\n%s", filepath.Join(s.dir, "log", "stdout.log"), strings.Join(raw, "\n"))
	}
	ddl := logMessages(filepath.Join(s.dir, "log", "server.log"), func(l string) bool {
		return strings.Contains(l, "DDLWorker") && (!strings.Contains(l, "<Debug>") || strings.Contains(l, "Processing task query-")) ||
			strings.Contains(l, "Terminating") || strings.Contains(l, "Recovering ZooKeeper session") ||
			strings.Contains(l, "to apply ALTER") || strings.Contains(l, "Alter is not finished")
	}, 15)
	if len(ddl) > 0 {
		fmt.Fprintf(&b, "\nits distributed DDL worker's last notable lines:\n%s", strings.Join(ddl, "\n"))
	}
	if b.Len() == 0 {
		return "the server's logs in " + filepath.Join(s.dir, "log") + " are empty"
	}
	return b.String()
}

// logMessageRE matches the first line of a ClickHouse log message.
var logMessageRE = regexp.MustCompile(`^\d{4}\.\d{2}\.\d{2} \d{2}:\d{2}:\d{2}`)

// logMessages returns the last n messages of a ClickHouse log that keep
// accepts (all when keep is nil), each its first line cut to 400 bytes.
func logMessages(path string, keep func(string) bool, n int) []string {
	var out []string
	for _, l := range fileLines(path, -1) {
		if !logMessageRE.MatchString(l) || keep != nil && !keep(l) {
			continue
		}
		if len(l) > 400 {
			l = l[:400] + "…"
		}
		out = append(out, l)
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// fileLines returns the last n lines of a file (all when n < 0), nothing
// when it is missing or empty. It reads at most the file's last 16 MiB.
func fileLines(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const most = 16 << 20
	if fi, err := f.Stat(); err == nil && fi.Size() > most {
		_, _ = f.Seek(fi.Size()-most, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, most))
	if err != nil || len(bytesTrim(b)) == 0 {
		return nil
	}
	lines := strings.Split(bytesTrim(b), "\n")
	if n >= 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// Query runs sql through the HTTP interface and returns the rows of its
// TabSeparated answer, every value as ClickHouse prints it (NULL is `\N`,
// arrays are `[1,2]`). It fails the test on any error.
func (s *Server) Query(t testing.TB, sql string) [][]string {
	t.Helper()
	rows, err := s.TryQuery(sql)
	if err != nil {
		t.Fatalf("chtest: %v", err)
	}
	return rows
}

// Exec runs a statement (DDL, INSERT ... VALUES) and fails the test on any error.
func (s *Server) Exec(t testing.TB, sql string) {
	t.Helper()
	if _, err := s.TryQuery(sql); err != nil {
		t.Fatalf("chtest: %v", err)
	}
}

// TryQuery is Query for tests that expect a failure: it returns the error.
func (s *Server) TryQuery(sql string) ([][]string, error) {
	return s.tryQuery(sql, queryTimeout)
}

func (s *Server) tryQuery(sql string, timeout time.Duration) ([][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// wait_end_of_query makes the server buffer the answer, so an error in the
	// middle of a result comes back as an error status, not as a bad last row.
	url := "http://" + s.HTTPAddr() + "/?wait_end_of_query=1"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(sql))
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", abbrev(sql), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResult+1))
	if err != nil {
		return nil, fmt.Errorf("query %q: read answer: %w", abbrev(sql), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("query %q: %s: %s", abbrev(sql), resp.Status, bytesTrim(body))
	}
	if len(body) > maxResult {
		return nil, fmt.Errorf("query %q: answer larger than %d bytes", abbrev(sql), maxResult)
	}
	return parseTSV(string(body)), nil
}

// dbSeq numbers the databases made by Database within this test binary.
var dbSeq atomic.Int64

// Database creates a database with a name unique on this server and returns
// the name, so tests that share a server do not collide. The name is built from
// the test's name and is a plain identifier (no quoting needed). The database
// is dropped in t.Cleanup when the server still answers.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), identifier(t.Name(), 40))
	s.Exec(t, "CREATE DATABASE "+name)
	t.Cleanup(func() { _, _ = s.tryQuery("DROP DATABASE IF EXISTS "+name, 10*time.Second) })
	return name
}

// shared is the one server of a test binary, see Shared and Main.
var shared struct {
	mu     sync.Mutex
	inMain bool
	srv    *Server
	dir    string
	err    error // a failed start is reported to every caller

	cluster    *Cluster // see SharedCluster
	clusterDir string
	clusterErr error
}

// Main runs the tests of a package that calls Shared or SharedCluster, then
// kills the shared server and cluster, if they were started, and removes
// their folders. It starts nothing itself.
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "chtest: shared server %s: %s\n", shared.srv.Addr(), shared.srv.errorTail())
		}
		shared.srv.Kill()
	}
	if shared.cluster != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "chtest: shared cluster: %s\n", shared.cluster.errorTail())
		}
		shared.cluster.kill()
	}
	// A failed run keeps the servers' folders (their full logs), and so
	// does any run with CHTEST_KEEP set.
	for _, dir := range []string{shared.dir, shared.clusterDir} {
		if dir == "" {
			continue
		}
		if code == 0 && os.Getenv("CHTEST_KEEP") == "" {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "chtest: kept %s\n", dir)
		}
	}
	return code
}

// Shared returns the test binary's shared server, starting it on the first
// call. It needs Main in TestMain, which stops it when the tests are done. Tests
// on a shared server use their own Database and never Kill, Stop or Restart it;
// fault tests call Start instead.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("chtest: Shared needs chtest.Main: func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }")
	}
	if shared.srv == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "chtest-shared-")
		if shared.err == nil {
			shared.srv, shared.err = start(shared.dir)
		}
		if shared.err == nil {
			t.Logf("chtest: shared clickhouse-server at %s (http %s) in %s", shared.srv.Addr(), shared.srv.HTTPAddr(), shared.dir)
		}
	}
	if shared.err != nil {
		t.Fatalf("chtest: shared server: %v", shared.err)
	}
	return shared.srv
}

// serverBinary finds clickhouse-server on PATH or where Debian installs it.
func serverBinary() (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/clickhouse-server"
	if fi, err := os.Stat(debian); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return debian, nil
	}
	return "", errors.New("clickhouse-server not found on PATH or in /usr/sbin; " + installHint)
}

// findScript finds scripts/clickhouse.sh in toolgate's root: the first
// folder above the working directory (the package under test) that has a
// go.mod and the script. A nested module's go.mod (one whose tests live in
// a module of their own, such as the dashboard's browser test) is passed
// by, so those tests find the script too.
func findScript() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			script := filepath.Join(dir, filepath.FromSlash(scriptPath))
			if _, err := os.Stat(script); err == nil {
				return script, nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no folder above %s has go.mod and %s", wd, scriptPath)
		}
	}
}

// freePorts returns two different ports that nothing listens on, picked at
// random in 20000-32767: below Linux's ephemeral range, so an outgoing
// connection cannot take one while a killed server is down before Restart.
func freePorts() (tcpPort, httpPort int, err error) {
	ports, err := freePortsN(2)
	if err != nil {
		return 0, 0, err
	}
	return ports[0], ports[1], nil
}

// freePortsN returns n different ports that nothing listens on, picked as
// freePorts picks them.
func freePortsN(n int) ([]int, error) {
	var ports []int
	seen := map[int]bool{}
	for i := 0; i < 100*n && len(ports) < n; i++ {
		p := 20000 + rand.IntN(12768)
		if seen[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		seen[p] = true
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, errors.New("no free ports found in 20000-32767")
	}
	return ports, nil
}

// parseTSV splits ClickHouse's TabSeparated output into rows of unescaped values.
func parseTSV(body string) [][]string {
	if body == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	rows := make([][]string, len(lines))
	for i, line := range lines {
		fields := strings.Split(line, "\t")
		for j, f := range fields {
			fields[j] = unescapeTSV(f)
		}
		rows[i] = fields
	}
	return rows
}

// unescapeTSV undoes TabSeparated escaping. `\N` (NULL) is kept as is.
func unescapeTSV(s string) string {
	if s == `\N` || !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '0':
			b.WriteByte(0)
		default: // \\, \', and any other escaped byte stand for themselves
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// identifier maps s to lower-case letters, digits and underscores, at most n bytes.
func identifier(s string, n int) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(b) < n; i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			b = append(b, '_')
		}
	}
	return string(b)
}

// abbrev shortens a statement for an error message.
func abbrev(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 120 {
		return sql[:117] + "..."
	}
	return sql
}

func bytesTrim(b []byte) string { return strings.TrimSpace(string(b)) }
