package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/demotools"
)

// The crash drill: the real toolgate binary under a bounded load of calls
// from concurrent clients, SIGKILLed at a random moment, restarted, and
// counted exactly. Every call whose whole answer a client received must
// have exactly one event in the destination. Each call carries its own
// session header, which its event records, so the count is per call, not
// a total.

const (
	// drillClients is how many clients call at once.
	drillClients = 12
	// drillMaxCalls bounds the calls of one client in one run.
	drillMaxCalls = 4000
	// drillKillMin and drillKillSpan: the kill comes this long after the
	// load starts, plus a random part of the span.
	drillKillMin  = 300 * time.Millisecond
	drillKillSpan = 600 * time.Millisecond
)

// drillConfig is the sidecar of the drill. DEST is the events section's
// destination. max_wait is raised from its default so that a child
// starved of CPU on a loaded test machine still answers no call before
// its event is written (a wait that timed out would be counted in
// toolgate_sink_wait_timeouts_total, and its event could be lost).
const drillConfig = `
listen: {forward: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
events:
  sidecar: drill
  queue: {max_wait: 2s}
DEST
tools:
  - name: echo
    match: {host: 127.0.0.1, method: POST, path: /echo}
    args: [json]
    schema:
      type: object
      properties:
        term: {type: string, minLength: 1}
        n: {type: integer}
      required: [term]
`

// drillLoad is the clients' side of one run.
type drillLoad struct {
	mu       sync.Mutex
	answered map[string]time.Time // session -> when its answer was complete
	failed   atomic.Int64
}

// run calls through the sidecar at forward from drillClients goroutines
// until stop is closed or each made drillMaxCalls calls. A call is
// answered when its status and its whole body arrived. Calls mix the three
// ways toolgate answers: an envelope, upstream's raw answer, a refusal.
func (l *drillLoad) run(forward, upstream, runID string, stop <-chan struct{}) {
	proxyURL := &url.URL{Scheme: "http", Host: forward}
	var wg sync.WaitGroup
	for c := range drillClients {
		wg.Go(func() {
			tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for i := range drillMaxCalls {
				select {
				case <-stop:
					return
				default:
				}
				session := fmt.Sprintf("%s-c%02d-%05d", runID, c, i)
				body := `{"term":"kinase","n":` + strconv.Itoa(i) + `}`
				if i%5 == 4 {
					body = `{"trem":"kinase"}` // refused: unknown field
				}
				req, _ := http.NewRequest("POST", upstream+"/echo", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Toolgate-Session", session)
				if i%2 == 0 {
					req.Header.Set("X-Toolgate-Envelope", "1")
				}
				resp, err := client.Do(req)
				if err != nil {
					l.failed.Add(1)
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					l.failed.Add(1)
					continue
				}
				at := time.Now()
				l.mu.Lock()
				l.answered[session] = at
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// drillRow is one line of the drill's table.
type drillRow struct {
	mode       string
	killAfter  time.Duration
	answered   int
	recorded   int // distinct events of this run in the destination
	lost       int // answered calls without an event
	duplicates int // calls with more than one event, plus rows FINAL merged away
	// For a machine crash: the time from the start of the last fsync the
	// sidecar reported to the kill, and the calls answered in it.
	window   time.Duration
	inWindow int
}

// drillSidecar starts the binary for one run and waits for its line.
func drillSidecar(t *testing.T, bin, cfg string) *process {
	t.Helper()
	return startProcess(t, bin, cfg)
}

// killDuringLoad starts the load, SIGKILLs p at a random moment, waits for
// the clients, and returns what they saw. before, when set, runs right
// before the kill (the machine-crash run reads /status there).
func killDuringLoad(t *testing.T, p *process, upstream, runID string, before func()) (*drillLoad, time.Duration, time.Time) {
	t.Helper()
	l := &drillLoad{answered: map[string]time.Time{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(p.line.Forward, upstream, runID, stop)
	}()
	killAfter := drillKillMin + time.Duration(rand.Int64N(int64(drillKillSpan)))
	select {
	case <-time.After(killAfter):
	case <-done: // every client finished its calls first
	}
	if before != nil {
		before()
	}
	killedAt := time.Now()
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	close(stop)
	<-done
	return l, killAfter, killedAt
}

// tally compares the answered calls with the events found (session ->
// distinct event ids) and fills the row.
func tally(row *drillRow, l *drillLoad, found map[string]int) []string {
	row.answered = len(l.answered)
	var lost []string
	for s := range l.answered {
		switch n := found[s]; {
		case n == 0:
			lost = append(lost, s)
		case n > 1:
			row.duplicates++
		}
	}
	for _, n := range found {
		row.recorded += n
	}
	row.lost = len(lost)
	sort.Strings(lost)
	return lost
}

// TestCrashDrill runs the drill three times against ClickHouse (through
// the spool), three times against the NDJSON file written before each
// answer (file.journal: false) and twice against the file behind its
// journal (the default), each with its own kill point,
// and logs the table. Every run must lose no answered call and
// duplicate none.
func TestCrashDrill(t *testing.T) {
	t.Parallel()
	bin := toolgateBinary(t)
	ch := chtest.Shared(t)
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()

	var rows []drillRow
	for run := 1; run <= 3; run++ {
		rows = append(rows, drillClickHouse(t, bin, ch, up.URL(), run))
	}
	for run := 1; run <= 3; run++ {
		rows = append(rows, drillFile(t, bin, up.URL(), run, false))
	}
	for run := 1; run <= 2; run++ {
		rows = append(rows, drillFile(t, bin, up.URL(), run, true))
	}
	for run := 1; run <= 2; run++ {
		rows = append(rows, drillMachine(t, bin, ch, up.URL(), run))
	}
	var b strings.Builder
	b.WriteString("\n| run | kill after | answered | recorded | lost | duplicates | unsynced window |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		window := "-"
		if r.window > 0 {
			window = fmt.Sprintf("%v (%d answered in it)", r.window.Round(100*time.Microsecond), r.inWindow)
		}
		fmt.Fprintf(&b, "| %s | %v | %d | %d | %d | %d | %s |\n", r.mode, r.killAfter.Round(time.Millisecond), r.answered, r.recorded, r.lost, r.duplicates, window)
	}
	t.Log(b.String())
}

// drillSpoolConfig writes the drill's configuration into dir, its events
// going through the spool to database db of ch, and returns its path.
func drillSpoolConfig(t *testing.T, dir string, ch *chtest.Server, db string) string {
	t.Helper()
	cfg := filepath.Join(dir, "toolgate.yaml")
	writeFile(t, cfg, strings.Replace(drillConfig, "DEST", `  spool: {dir: spool, segment_age: 50ms, retry_min: 50ms, retry_max: 300ms}
  clickhouse: {addr: [`+ch.Addr()+`], database: `+db+`, dial_timeout: 2s}`, 1))
	return cfg
}

// drillClickHouse is one run into ClickHouse: kill, restart, let the spool
// ship, stop, count with uniqExact(event_id) per session and FINAL.
func drillClickHouse(t *testing.T, bin string, ch *chtest.Server, upstream string, run int) drillRow {
	t.Helper()
	dir := t.TempDir()
	db := ch.Database(t)
	cfg := drillSpoolConfig(t, dir, ch, db)
	p := drillSidecar(t, bin, cfg)
	runID := fmt.Sprintf("ch%d", run)
	l, killAfter, _ := killDuringLoad(t, p, upstream, runID, nil)

	p2 := drillSidecar(t, bin, cfg)
	shipAll(t, p2)
	found := chSessions(t, ch, db)
	row := drillRow{mode: fmt.Sprintf("clickhouse %d", run), killAfter: killAfter}
	lost := tally(&row, l, found)
	raw := ch.Query(t, "SELECT count(), uniqExact(event_id), (SELECT count() FROM "+db+".events FINAL) FROM "+db+".events")
	distinct, _ := strconv.Atoi(raw[0][1])
	final, _ := strconv.Atoi(raw[0][2])
	row.duplicates += final - distinct
	if row.lost != 0 || row.duplicates != 0 || row.answered == 0 {
		t.Errorf("%s: answered %d, lost %d (first: %v), duplicates %d; rows %v\nstderr after restart:\n%s",
			row.mode, row.answered, row.lost, first(lost, 5), row.duplicates, raw[0], p2.stderr)
	}
	return row
}

// drillFile is one run into the NDJSON file with journal: false, or
// (journal) into the file behind the spool as its journal: kill, restart (the file is appended to
// again; the journal ships what it holds), stop, count the lines per
// session. A line whose event_id an earlier line had is a duplicate.
func drillFile(t *testing.T, bin, upstream string, run int, journal bool) drillRow {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	dest, mode := "  file: {path: events.ndjson, journal: false}", "file"
	if journal {
		dest, mode = "  file: {path: events.ndjson, journal: true}\n  spool: {dir: journal, segment_age: 50ms}", "file, journal"
	}
	writeFile(t, cfg, strings.Replace(drillConfig, "DEST", dest, 1))
	p := drillSidecar(t, bin, cfg)
	runID := fmt.Sprintf("file%d%v", run, journal)
	l, killAfter, _ := killDuringLoad(t, p, upstream, runID, nil)

	p2 := drillSidecar(t, bin, cfg)
	if journal {
		shipAll(t, p2)
	} else {
		p2.cmd.Process.Signal(syscall.SIGTERM)
		p2.cmd.Wait()
	}
	found, dupLines, torn := fileSessions(t, filepath.Join(dir, "events.ndjson"))
	row := drillRow{mode: fmt.Sprintf("%s %d", mode, run), killAfter: killAfter}
	lost := tally(&row, l, found)
	row.duplicates += dupLines
	if row.lost != 0 || row.duplicates != 0 || row.answered == 0 || torn != 0 {
		t.Errorf("%s: answered %d, lost %d (first: %v), duplicates %d, torn lines %d\nstderr after restart:\n%s",
			row.mode, row.answered, row.lost, first(lost, 5), row.duplicates, torn, p2.stderr)
	}
	return row
}

// shipAll waits until p's spool has shipped everything, then stops p with
// SIGTERM.
func shipAll(t *testing.T, p *process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.spoolPending(t) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spool still holds %d events after 30s\nstderr:\n%s", p.spoolPending(t), p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
}

// chSessions returns, per session, the distinct event ids in db.events.
func chSessions(t *testing.T, ch *chtest.Server, db string) map[string]int {
	t.Helper()
	found := map[string]int{}
	for _, r := range ch.Query(t, "SELECT session, uniqExact(event_id) FROM "+db+".events GROUP BY session") {
		n, _ := strconv.Atoi(r[1])
		found[r[0]] = n
	}
	return found
}

// fileSessions returns, per session, the distinct event ids in the NDJSON
// file, the number of lines that repeat an event id of an earlier line,
// and the number of lines that are not whole JSON objects.
func fileSessions(t *testing.T, path string) (map[string]int, int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]map[string]bool{}
	torn, dup := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			EventID string `json:"event_id"`
			Session string `json:"session"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			torn++
			continue
		}
		if ids[e.Session] == nil {
			ids[e.Session] = map[string]bool{}
		}
		if ids[e.Session][e.EventID] {
			dup++
		}
		ids[e.Session][e.EventID] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	for s, m := range ids {
		found[s] = len(m)
	}
	return found, dup, torn
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// spoolSyncPoint is the spool's sync point from /status.
type spoolSyncPoint struct {
	Segment  uint64    `json:"synced_segment"`
	Bytes    int64     `json:"synced_bytes"`
	LastSync time.Time `json:"last_sync"`
}

func (p *process) syncPoint(t *testing.T) spoolSyncPoint {
	t.Helper()
	var sp spoolSyncPoint
	p.spoolStatus(t, &sp)
	return sp
}

// dropUnsynced does to the spool in dir what a machine crash would at
// worst: everything past the sync point is gone. Segments numbered above
// it are removed; the segment at it is cut to its synced size.
func dropUnsynced(t *testing.T, dir string, sp spoolSyncPoint) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != ".seg" && ext != ".open" && ext != ".map" {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case seq > sp.Segment:
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		case seq == sp.Segment && ext == ".map":
			// A mapped segment is preallocated and its size synced when
			// it was created: what a crash takes reads back as zeros.
			zeroFrom(t, path, sp.Bytes)
		case seq == sp.Segment:
			if err := os.Truncate(path, sp.Bytes); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// zeroFrom overwrites the file at path with zeros from off to its end.
func zeroFrom(t *testing.T, path string, off int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= off {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, fi.Size()-off), off); err != nil {
		t.Fatal(err)
	}
}

// drillMachine simulates a machine crash into ClickHouse: it reads the
// spool's sync point from /status, SIGKILLs the sidecar at once, drops
// what was written past that point, restarts and counts. Calls answered
// before the last fsync began must all be there; the calls lost must have
// been answered after it, within the unsynced window the row reports.
func drillMachine(t *testing.T, bin string, ch *chtest.Server, upstream string, run int) drillRow {
	t.Helper()
	dir := t.TempDir()
	db := ch.Database(t)
	cfg := drillSpoolConfig(t, dir, ch, db)
	// Segments shipped before the kill are in ClickHouse, as they would be
	// after a crash of this machine only.
	p := drillSidecar(t, bin, cfg)
	runID := fmt.Sprintf("machine%d", run)
	var sp spoolSyncPoint
	l, killAfter, killedAt := killDuringLoad(t, p, upstream, runID, func() { sp = p.syncPoint(t) })
	if sp.LastSync.IsZero() {
		t.Fatalf("%s: no sync reported before the kill", runID)
	}
	dropUnsynced(t, filepath.Join(dir, "spool"), sp)

	p2 := drillSidecar(t, bin, cfg)
	shipAll(t, p2)
	found := chSessions(t, ch, db)
	row := drillRow{mode: fmt.Sprintf("machine crash %d", run), killAfter: killAfter, window: killedAt.Sub(sp.LastSync)}
	lost := tally(&row, l, found)
	for s, at := range l.answered {
		if !at.Before(sp.LastSync) {
			row.inWindow++
		} else if found[s] == 0 {
			t.Errorf("%s: call %s answered %v before the last fsync began has no event", row.mode, s, sp.LastSync.Sub(at))
		}
	}
	if row.lost > row.inWindow || row.duplicates != 0 {
		t.Errorf("%s: lost %d (first: %v) of %d answered in the unsynced window, duplicates %d",
			row.mode, row.lost, first(lost, 5), row.inWindow, row.duplicates)
	}
	return row
}
