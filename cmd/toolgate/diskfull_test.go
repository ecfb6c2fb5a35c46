package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/events"
)

// mountTmpfs mounts a tmpfs of size at dir, unmounted in cleanup, or skips
// the test when it cannot (not root, no mount).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (the ENOSPC cases run in sink: TestQueueDurableOnFullDisk)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// filler fills a file system, as another process writing to the same disk
// would, and gives the space back.
type filler struct {
	dir string
	mu  sync.Mutex
	n   int
}

// fill writes files in dir until the file system is full (ENOSPC).
func (f *filler) fill() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	chunk := make([]byte, 16<<10)
	for {
		f.n++
		fh, err := os.OpenFile(filepath.Join(f.dir, fmt.Sprintf("filler-%d", f.n)), os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
		for i := 0; i < 64; i++ {
			if _, err = fh.Write(chunk); err != nil {
				break
			}
		}
		fh.Close()
		if errors.Is(err, syscall.ENOSPC) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// free deletes every filler file.
func (f *filler) free() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 1; i <= f.n; i++ {
		os.Remove(filepath.Join(f.dir, fmt.Sprintf("filler-%d", i)))
	}
}

// diskCall is one call of the drill and what its caller got.
type diskCall struct {
	session string
	status  int
	code    string // X-Toolgate-Error-Code
	reason  string // error.reason of the envelope, if any
}

// diskDrill runs calls with unique sessions through forward until stop is
// closed, from workers goroutines.
func diskDrill(t *testing.T, forward, upstream, phase string, workers int, stop <-chan struct{}, out *[]diskCall, mu *sync.Mutex) {
	t.Helper()
	c := proxyClient(t, forward)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				dc := diskCall{session: fmt.Sprintf("%s-%d-%d", phase, w, i)}
				a, err := fetch(c, "GET", upstream+"/esearch?term=crispr", map[string]string{"X-Toolgate-Session": dc.session})
				if err == nil {
					dc.status, dc.code = a.status, a.header.Get("X-Toolgate-Error-Code")
					var env struct {
						Error *struct {
							Reason string `json:"reason"`
						} `json:"error"`
					}
					if json.Unmarshal([]byte(a.body), &env) == nil && env.Error != nil {
						dc.reason = env.Error.Reason
					}
				}
				mu.Lock()
				*out = append(*out, dc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// diskStatus is the part of /status the disk drill reads.
type diskStatus struct {
	Events struct {
		Queue sink.QueueStats  `json:"queue"`
		Spool sink.SpoolStatus `json:"spool"`
	} `json:"events"`
}

func getDiskStatus(t *testing.T, c *http.Client, admin string) diskStatus {
	t.Helper()
	var st diskStatus
	a := do(t, c, "GET", "http://"+admin+"/status", nil)
	if err := json.Unmarshal([]byte(a.body), &st); err != nil {
		t.Fatalf("/status: %v\n%s", err, a.body)
	}
	return st
}

// diskFullResult is what one run of the drill found.
type diskFullResult struct {
	calls, answered, refused, withheld, cut, other int
	missing, duplicates                            int
	dropped                                        uint64
	upstreamHits                                   int
	lowSpaceSeen                                   bool
}

func (r diskFullResult) String() string {
	return fmt.Sprintf("calls %d: answered %d (without event %d), refused events_unavailable %d, withheld %d (of which cut mid-answer %d), other %d; duplicates %d; events dropped (counted) %d; upstream hits %d; low_space seen %v",
		r.calls, r.answered, r.missing, r.refused, r.withheld, r.cut, r.other, r.duplicates, r.dropped, r.upstreamHits, r.lowSpaceSeen)
}

// runDiskFull runs the full-disk drill: a sidecar whose events path (the
// NDJSON file and its journal, or the spool in front of ClickHouse, which
// is stopped meanwhile) lives on a 8 MiB tmpfs; calls before, while a
// filler keeps the tmpfs full for fullFor, and after the filler is
// deleted. It returns the tally, with each answered call matched by its
// session to its events.
func runDiskFull(t *testing.T, mode string, ch *chtest.Server) diskFullResult {
	up := startUpstream(t)
	dir := t.TempDir()
	evdir := filepath.Join(dir, "events")
	mountTmpfs(t, evdir, "8m")
	spool := `spool: {dir: ` + filepath.Join(evdir, "journal") + `, segment_bytes: 262144, segment_age: 100ms, retry_min: 50ms, retry_max: 200ms, min_free_bytes: 1048576}`
	dest := `file: {path: ` + filepath.Join(evdir, "events.ndjson") + `}`
	db := ""
	if ch != nil {
		db = "diskfull_" + mode
		dest = `clickhouse: {addr: [` + ch.Addr() + `], database: ` + db + `, dial_timeout: 1s}`
	}
	cfg := `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: diskfull
  on_write_failure: ` + mode + `
  ` + dest + `
  ` + spool + `
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
`
	r := startRun(t, dir, cfg)
	l := r.running(t)
	admin := directClient(t)
	var (
		mu    sync.Mutex
		calls []diskCall
		res   diskFullResult
	)
	phase := func(name string, d time.Duration) {
		stop := make(chan struct{})
		time.AfterFunc(d, func() { close(stop) })
		diskDrill(t, l.Forward, up.URL(), name, 4, stop, &calls, &mu)
	}
	phase("before", 500*time.Millisecond)
	if ch != nil {
		ch.Stop()
	}

	// The disk fills and stays full: the filler tops it up as the spool
	// sheds its slack or deletes what it shipped.
	f := &filler{dir: evdir}
	if err := f.fill(); err != nil {
		t.Fatal(err)
	}
	topping := make(chan struct{})
	var topped sync.WaitGroup
	topped.Add(1)
	go func() {
		defer topped.Done()
		for {
			select {
			case <-topping:
				return
			case <-time.After(20 * time.Millisecond):
				f.fill()
			}
		}
	}()
	time.Sleep(1500 * time.Millisecond) // the watermark is read every second
	phase("full", 3*time.Second)
	res.lowSpaceSeen = getDiskStatus(t, admin, l.Admin).Events.Spool.LowSpace
	close(topping)
	topped.Wait()

	// Space returns: calls pass again, without a restart.
	f.free()
	if ch != nil {
		ch.Restart(t)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := len(calls)
		phase("recover", 200*time.Millisecond)
		ok := false
		for _, c := range calls[n:] {
			ok = ok || c.status == http.StatusOK
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call answered 20 s after space returned; stderr:\n%s", r.stderr)
		}
	}
	phase("after", 500*time.Millisecond)

	// Everything written ships (into the file, or ClickHouse); then stop.
	for deadline := time.Now().Add(60 * time.Second); getDiskStatus(t, admin, l.Admin).Events.Spool.PendingEvents > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("spool still holds events 60 s after space returned; /status events:\n%s\nspool directory:\n%s\nstderr:\n%s",
				do(t, admin, "GET", "http://"+l.Admin+"/status", nil).body, listDir(filepath.Join(evdir, "journal")), r.stderr)
		}
	}
	withheld := metricValue(t, admin, l.Admin, `toolgate_proxy_events_unavailable_total{outcome="withheld"}`)
	res.withheld, _ = strconv.Atoi(withheld)
	if code := r.stop(t); code != 0 {
		t.Errorf("exit code %d; stderr:\n%s", code, r.stderr)
	}
	found := map[string]int{}
	var ids map[string]int
	if ch != nil {
		found = chSessions(t, ch, db)
		raw := ch.Query(t, "SELECT count(), uniqExact(event_id), (SELECT count() FROM "+db+".events FINAL) FROM "+db+".events")
		distinct, _ := strconv.Atoi(raw[0][1])
		final, _ := strconv.Atoi(raw[0][2])
		res.duplicates = final - distinct
	} else {
		ids = map[string]int{}
		for _, e := range readEvents(t, filepath.Join(evdir, "events.ndjson")) {
			found[e.Session]++
			ids[e.EventID]++
		}
		for _, n := range ids {
			res.duplicates += n - 1
		}
	}
	st := r.stderr.String()
	res.calls = len(calls)
	for _, c := range calls {
		switch {
		case c.status == http.StatusOK:
			res.answered++
			if found[c.session] == 0 {
				res.missing++
			}
		case c.reason == "events_unavailable":
			res.refused++
		case c.status == 0:
			res.cut++ // a raw answer cut before its end: its event was not kept
		default:
			res.other++
		}
		if found[c.session] > 1 {
			res.duplicates += found[c.session] - 1
		}
	}
	res.refused -= res.withheld - res.cut
	res.upstreamHits = int(up.Hits("GET /esearch"))
	// The queue's own count of lost events, from its last log line or
	// /status before the stop: recorded = written + dropped once closed.
	res.dropped = droppedAtStop(st)
	return res
}

// listDir lists the files in dir with their sizes, for a failure's message.
func listDir(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		size := int64(-1)
		if fi, err := e.Info(); err == nil {
			size = fi.Size()
		}
		fmt.Fprintf(&b, "%s %d\n", e.Name(), size)
	}
	return b.String()
}

// droppedAtStop reads the queue's dropped count from the sidecar's log
// ("sink: queue closed with dropped events"), 0 when it logged none.
func droppedAtStop(stderr string) uint64 {
	var n uint64
	for _, m := range logLines(stderr, "sink: queue closed with dropped events") {
		for _, k := range []string{sink.DropQueueFull, sink.DropWriteError, sink.DropShutdown} {
			if v, ok := m[k].(float64); ok {
				n += uint64(v)
			}
		}
	}
	return n
}

// TestEventsOnFullDisk fills the file system of the events file and its
// journal (a real tmpfs) while calls run. Under refuse, no call is
// answered without its event: calls are refused (events_unavailable, not
// sent) and nothing is lost that a caller saw answered. Under answer,
// calls are answered and every lost event is counted. Both recover when
// the space returns, with nothing duplicated.
func TestEventsOnFullDisk(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{events.OnWriteFailureRefuse, events.OnWriteFailureAnswer} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // each mode has its own sidecar and tmpfs
			res := runDiskFull(t, mode, nil)
			t.Logf("%s: %s", mode, res)
			checkDiskFull(t, mode, res)
		})
	}
}

// TestSpoolOnFullDiskClickHouseAway is the same drill with events going to
// a real ClickHouse, stopped while the spool's tmpfs is full, and started
// again when the space returns.
func TestSpoolOnFullDiskClickHouseAway(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	for _, mode := range []string{events.OnWriteFailureRefuse, events.OnWriteFailureAnswer} {
		t.Run(mode, func(t *testing.T) {
			res := runDiskFull(t, mode, ch)
			t.Logf("%s, ClickHouse away: %s", mode, res)
			checkDiskFull(t, mode, res)
		})
	}
}

func checkDiskFull(t *testing.T, mode string, res diskFullResult) {
	t.Helper()
	if res.duplicates != 0 {
		t.Errorf("%d duplicated events", res.duplicates)
	}
	if !res.lowSpaceSeen {
		t.Error("/status events.spool.low_space was false on a full disk")
	}
	switch mode {
	case events.OnWriteFailureRefuse:
		if res.missing != 0 {
			t.Errorf("%d calls answered without their event under refuse", res.missing)
		}
		if res.refused == 0 {
			t.Error("no call was refused: the disk was never full for the events path, so the drill proved nothing")
		}
		// A refused call never went upstream; a withheld one may have.
		if res.upstreamHits > res.answered+res.withheld || res.upstreamHits < res.answered {
			t.Errorf("upstream saw %d calls; answered %d, withheld %d: a refused call reached it", res.upstreamHits, res.answered, res.withheld)
		}
	case events.OnWriteFailureAnswer:
		if res.refused != 0 || res.withheld != 0 {
			t.Errorf("%d calls refused and %d withheld under answer", res.refused, res.withheld)
		}
		if res.missing == 0 {
			t.Error("no answered call lost its event: the disk was never full for the events path, so the drill proved nothing")
		}
		if uint64(res.missing) != res.dropped {
			t.Errorf("%d answered calls have no event, and the queue counted %d dropped: every loss must be counted", res.missing, res.dropped)
		}
	}
	if res.cut > res.withheld {
		t.Errorf("%d answers cut short, more than the %d withheld", res.cut, res.withheld)
	}
	if res.other != 0 {
		t.Errorf("%d calls got another answer (or none)", res.other)
	}
}
