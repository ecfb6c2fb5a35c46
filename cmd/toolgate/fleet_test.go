package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies/approval/audit"
	"github.com/toolgate/toolgate/sink"
)

// fleetUpstream is a real upstream that counts what it executed, by path.
type fleetUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	executed map[string]int
}

func newFleetUpstream(t *testing.T) *fleetUpstream {
	u := &fleetUpstream{executed: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.executed[r.URL.Path]++
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *fleetUpstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.executed[path]
}

// fleetSidecar is one toolgate process of a fleet.
type fleetSidecar struct {
	client *http.Client
	events string
	admin  string
}

// startFleet starts n toolgate processes sharing the Redis at redisAddrs,
// each with body (tools, budgets, approvals) added to its configuration.
func startFleet(t *testing.T, n int, redis string, body string) []*fleetSidecar {
	t.Helper()
	return startFleetEvents(t, n, redis, "", body)
}

// startFleetEvents is startFleet with an events section of its own (""
// for a file per sidecar).
func startFleetEvents(t *testing.T, n int, redis, eventsSection, body string) []*fleetSidecar {
	t.Helper()
	dir := t.TempDir()
	bin := toolgateBinary(t)
	var out []*fleetSidecar
	for i := range n {
		cfg := filepath.Join(dir, fmt.Sprintf("sidecar%d.yaml", i))
		events := filepath.Join(dir, fmt.Sprintf("events%d.ndjson", i))
		ev := fmt.Sprintf("events: {file: {path: %s}, sidecar: fleet-%d}", events, i)
		if eventsSection != "" {
			ev = strings.ReplaceAll(eventsSection, "SPOOL", filepath.Join(dir, fmt.Sprintf("spool%d", i)))
		}
		writeFile(t, cfg, fmt.Sprintf(`
listen: {forward: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
%s
state:
  redis: %s
%s`, ev, redis, body))
		p := startFleetProcess(t, bin, cfg)
		proxy := &url.URL{Scheme: "http", Host: p.line.Forward}
		out = append(out, &fleetSidecar{events: events, admin: p.line.Admin, client: &http.Client{Timeout: 60 * time.Second,
			Transport: &http.Transport{Proxy: http.ProxyURL(proxy), MaxIdleConnsPerHost: 16}}})
	}
	return out
}

// call sends one call through s and returns its status and envelope.
func (s *fleetSidecar) call(t *testing.T, method, target, session, body string) (int, bucketing.Envelope) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, target, rd)
	req.Header.Set("X-Toolgate-Envelope", "1")
	req.Header.Set("X-Toolgate-Agent", "agent-1")
	req.Header.Set("X-Toolgate-Session", session)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Error(err)
		return 0, bucketing.Envelope{}
	}
	defer resp.Body.Close()
	var env bucketing.Envelope
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Errorf("answer %d is no envelope: %s", resp.StatusCode, b)
	}
	return resp.StatusCode, env
}

// fleetEvents waits until the fleet's events files hold at least want
// events (the sinks write asynchronously) and returns them.
func fleetEvents(t *testing.T, fleet []*fleetSidecar, want int) []sink.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var all []sink.Event
		for _, s := range fleet {
			all = append(all, readEventsIfAny(t, s.events)...)
		}
		if len(all) >= want || time.Now().After(deadline) {
			return all
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readEventsIfAny(t *testing.T, path string) []sink.Event {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	return readEvents(t, path)
}

// TestFleetBudgetExactAcrossThreeSidecars runs three toolgate processes
// sharing one real Redis; load from this process is spread over them. A
// per-session budget of 40 calls lets exactly 40 through in total, by
// what the real upstream executed; every call is recorded once, with
// limit_scope fleet; and loop breaking counts identical calls across the
// three.
func TestFleetBudgetExactAcrossThreeSidecars(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newFleetUpstream(t)
	const budgetN = 40
	fleet := startFleet(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 2s}", srv.Addr()), fmt.Sprintf(`
tools:
  - name: search
    match: {host: 127.0.0.1, method: POST, path: "/v1/search"}
  - name: fetch
    match: {host: 127.0.0.1, method: POST, path: "/v1/fetch"}
budgets:
  limits:
    - {name: per_session, per: [session], tools: [search], calls: %d, window: 10m, on_unavailable: deny}
  loops: {max_repeats: 3, window: 10m, tools: [fetch], on_unavailable: deny}
`, budgetN))
	var passed, refused atomic.Int64
	var wg sync.WaitGroup
	const workers, each = 12, 10
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				status, env := fleet[(w+i)%3].call(t, http.MethodPost, up.URL+"/v1/search", "sess-A", fmt.Sprintf(`{"q":"%d-%d"}`, w, i))
				switch {
				case status == http.StatusOK:
					passed.Add(1)
				case env.Error != nil && env.Error.Reason == bucketing.ReasonBudgetExhausted:
					refused.Add(1)
				default:
					t.Errorf("call answered %d %+v", status, env.Error)
				}
			}
		}()
	}
	wg.Wait()
	if got := up.count("/v1/search"); got != budgetN || passed.Load() != budgetN || refused.Load() != workers*each-budgetN {
		t.Fatalf("upstream executed %d, callers got %d through and %d refused; want exactly %d of %d across three sidecars", got, passed.Load(), refused.Load(), budgetN, workers*each)
	}
	// Loop breaking: the same call, 9 times round the three sidecars.
	for i := range 9 {
		fleet[i%3].call(t, http.MethodPost, up.URL+"/v1/fetch", "sess-L", `{"id":"same"}`)
	}
	if got := up.count("/v1/fetch"); got != 3 {
		t.Fatalf("upstream executed the same call %d times across three sidecars; loops.max_repeats is 3", got)
	}
	evs := fleetEvents(t, fleet, workers*each+9)
	if len(evs) != workers*each+9 {
		t.Fatalf("%d events; want one per call, %d", len(evs), workers*each+9)
	}
	for _, ev := range evs {
		if ev.LimitScope != "fleet" {
			t.Fatalf("event %s limit_scope %q; want fleet", ev.EventID, ev.LimitScope)
		}
	}
	var st struct {
		State *struct {
			Backend  string `json:"backend"`
			Degraded bool   `json:"degraded"`
		} `json:"state"`
	}
	resp, err := http.Get("http://" + fleet[0].admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.State == nil || st.State.Backend != "redis" || st.State.Degraded {
		t.Fatalf("/status state = %+v; want redis, not degraded", st.State)
	}
}

// TestFleetRateAcrossThreeSidecars: an upstream rate of 25 calls a second
// holds, within 5%, in total across three sidecars under load from this
// process, by what the upstream executed. Calls over the rate wait for
// their turn (max_wait), so the offered load never falls short of it.
func TestFleetRateAcrossThreeSidecars(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newFleetUpstream(t)
	const rate = 25.0
	host := strings.TrimPrefix(up.URL, "http://")
	fleet := startFleet(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 2s}", srv.Addr()), fmt.Sprintf(`
tools:
  - name: search
    match: {host: 127.0.0.1, method: POST, path: "/v1/search"}
budgets:
  upstreams:
    - {host: "%s", rate: %v, burst: 1, max_wait: 1s, on_unavailable: deny}
`, host, rate))
	start := time.Now()
	stop := start.Add(4 * time.Second)
	var wg sync.WaitGroup
	for w := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				fleet[(w+i)%3].call(t, http.MethodPost, up.URL+"/v1/search", "s", `{"q":"x"}`)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	got := float64(up.count("/v1/search"))
	want := rate*el + 1
	if got > want*1.05 || got < want*0.95 {
		t.Fatalf("upstream executed %v calls in %.2fs across three sidecars; want %.0f ±5%% (rate %v/s in total)", got, el, want, rate)
	}
	t.Logf("upstream executed %v calls in %.2fs (%.1f/s; rate %v/s)", got, el, got/el, rate)
}

// TestFleetRedisKilledUnderLoad kills the fleet's Redis while three
// sidecars take calls, then starts it again (empty). Each on_unavailable
// mode does what docs/budgets.md says, by what the upstream executed:
// deny lets nothing through while Redis is away, allow lets every call
// through, local counts per sidecar; every call is recorded once, with
// limit_scope local while Redis was away and fleet before and after; and
// after recovery the fleet's counters count again from Redis, with no
// call charged twice.
func TestFleetRedisKilledUnderLoad(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newFleetUpstream(t)
	const per = 6 // each budget, per session
	fleet := startFleet(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 300ms, breaker_failures: 2, breaker_cooldown: 200ms}", srv.Addr()), fmt.Sprintf(`
tools:
  - {name: t_local, match: {host: 127.0.0.1, method: POST, path: "/v1/local"}}
  - {name: t_deny, match: {host: 127.0.0.1, method: POST, path: "/v1/deny"}}
  - {name: t_allow, match: {host: 127.0.0.1, method: POST, path: "/v1/allow"}}
budgets:
  limits:
    - {name: b_local, per: [session], tools: [t_local], calls: %[1]d, window: 10m, on_unavailable: local}
    - {name: b_deny, per: [session], tools: [t_deny], calls: %[1]d, window: 10m, on_unavailable: deny}
    - {name: b_allow, per: [session], tools: [t_allow], calls: %[1]d, window: 10m, on_unavailable: allow}
`, per))
	sent := 0
	round := func(session string, n int) map[string]int {
		ok := map[string]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, path := range []string{"/v1/local", "/v1/deny", "/v1/allow"} {
			for i := range n {
				wg.Add(1)
				sent++
				go func() {
					defer wg.Done()
					status, _ := fleet[i%3].call(t, http.MethodPost, up.URL+path, session, fmt.Sprintf(`{"i":%d}`, i))
					if status == http.StatusOK {
						mu.Lock()
						ok[path]++
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		return ok
	}
	// Redis up: 4 of each pass (of 6 allowed per session).
	if ok := round("s1", 4); ok["/v1/local"] != 4 || ok["/v1/deny"] != 4 || ok["/v1/allow"] != 4 {
		t.Fatalf("with Redis up: %v; want 4 of each", ok)
	}
	// Killed under load: calls keep coming while the server dies.
	var load sync.WaitGroup
	load.Add(1)
	var loadSent atomic.Int64
	stopLoad := make(chan struct{})
	go func() {
		defer load.Done()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			default:
			}
			fleet[i%3].call(t, http.MethodPost, up.URL+"/v1/deny", "s-load", `{"load":true}`)
			loadSent.Add(1)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	srv.Kill()
	time.Sleep(300 * time.Millisecond)
	close(stopLoad)
	load.Wait()
	denyBefore := up.count("/v1/deny")
	// Redis away: session s1 has 2 calls left in the fleet; each sidecar
	// now sends 4 more of each tool.
	ok := round("s1", 12)
	if ok["/v1/deny"] != 0 {
		t.Fatalf("deny mode: %d calls passed while Redis was away", ok["/v1/deny"])
	}
	if ok["/v1/allow"] != 12 {
		t.Fatalf("allow mode: %d of 12 passed while Redis was away", ok["/v1/allow"])
	}
	if ok["/v1/local"] != 12 { // 4 per sidecar, under each sidecar's own 6
		t.Fatalf("local mode: %d of 12 passed while Redis was away; want 4 per sidecar's own counter", ok["/v1/local"])
	}
	// The degraded mode shows in /status and the metrics.
	if st := fleetStatus(t, fleet[1]); st == nil || !st.Degraded {
		t.Fatalf("/status state %+v while Redis is away; want degraded", st)
	}
	if m := fleetMetrics(t, fleet[1]); !strings.Contains(m, "toolgate_budget_fleet_degraded 1") || !strings.Contains(m, `toolgate_budget_fleet_calls_total{result="unavailable"}`) {
		t.Fatalf("metrics while Redis is away:\n%s", grepLines(m, "toolgate_budget_fleet"))
	}
	if ok := round("s-local", 21); ok["/v1/local"] != 3*per { // 7 per sidecar: 6 each pass
		t.Fatalf("local mode: %d of 21 passed; want %d (each sidecar's own budget of %d)", ok["/v1/local"], 3*per, per)
	}
	if got := up.count("/v1/deny"); got != denyBefore {
		t.Fatalf("deny mode: the upstream executed %d calls while Redis was away", got-denyBefore)
	}
	// Redis back (empty, as a restarted server without persistence is).
	srv.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + fleet[0].admin + "/status")
		if err == nil {
			var st struct {
				State struct{ Degraded bool } `json:"state"`
			}
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			fleet[0].call(t, http.MethodPost, up.URL+"/v1/allow", "s-probe", `{}`)
			sent++
			if !st.State.Degraded {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sidecar 0 still degraded 15s after Redis came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every sidecar uses the fleet again: a new session's budget is exact.
	for i := range 3 {
		fleet[i].call(t, http.MethodPost, up.URL+"/v1/allow", "s-probe", `{}`) // one call through each after recovery
		sent++
	}
	time.Sleep(300 * time.Millisecond) // past the breaker's cooldown
	for i := range 3 {
		fleet[i].call(t, http.MethodPost, up.URL+"/v1/allow", "s-probe", `{}`)
		sent++
	}
	if m := fleetMetrics(t, fleet[1]); !strings.Contains(m, "toolgate_budget_fleet_degraded 0") {
		t.Fatalf("metrics after recovery:\n%s", grepLines(m, "toolgate_budget_fleet"))
	}
	exec0 := up.count("/v1/deny")
	for i := range 3 * per {
		fleet[i%3].call(t, http.MethodPost, up.URL+"/v1/deny", "s2", fmt.Sprintf(`{"i":%d}`, i))
		sent++
	}
	// Reached through any sidecar, including those whose breaker was still
	// cooling down for the first calls: at most per went through.
	if got := up.count("/v1/deny") - exec0; got > per {
		t.Fatalf("after recovery, deny-mode budget let %d of %d through; want at most %d", got, 3*per, per)
	}
	total := sent + int(loadSent.Load())
	evs := fleetEvents(t, fleet, total)
	if len(evs) != total {
		t.Fatalf("%d events for %d calls; want every call recorded once", len(evs), total)
	}
	scopes := map[string]int{}
	for _, ev := range evs {
		scopes[ev.LimitScope]++
	}
	if scopes["fleet"] == 0 || scopes["local"] == 0 || scopes["fleet"]+scopes["local"] != total {
		t.Fatalf("limit_scope counts %v; want fleet and local, one per call", scopes)
	}
	t.Logf("%d calls (%d during the kill), limit_scope %v", total, loadSent.Load(), scopes)
}

// TestFleetApprovalSingleUseRedis is TestApprovalSingleUseAcrossThree
// Sidecars with state.redis: the requests and decisions stay in the
// approvals file, and each use of a uses: 1 grant is decided by Redis
// (the file's flock is not taken for uses). In 1,000 trials of six
// parallel retries across three sidecar processes the real upstream
// executes each approved call exactly once.
func TestFleetApprovalSingleUseRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newFleetUpstream(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "approvals.ndjson")
	fleet := startFleet(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 2s}", srv.Addr()), fmt.Sprintf(`
tools:
  - name: rec_delete
    match: {host: 127.0.0.1, method: DELETE, path: "/v1/rec/{id}"}
approvals:
  file: %s
  pending_ttl: 1m
  decision_ttl: 1m
  max_pending: 100000
  tools:
    rec_delete: {require: always}
`, store))
	person, fs := filePerson(t, dir, store)
	ctx := context.Background()
	start := time.Now()
	for trial := range singleUseTrials {
		target := fmt.Sprintf("%s/v1/rec/%d", up.URL, trial)
		status, env := fleet[trial%3].call(t, http.MethodDelete, target, "sess-1", "")
		if status != http.StatusForbidden || env.Error == nil || env.Error.Reason != "approval_pending" || env.Error.Approval == nil {
			t.Fatalf("trial %d: first call %d %+v; want approval_pending", trial, status, env.Error)
		}
		id := env.Error.Approval.ID
		if _, err := person.Decide(ctx, id, audit.VerdictApproved, "test:dana", ""); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		oks := raceRetries(t, trial, 6, func(i int) (int, bucketing.Envelope) {
			return fleet[i%3].call(t, http.MethodDelete, target, "sess-1", "")
		})
		if n := up.count(fmt.Sprintf("/v1/rec/%d", trial)); n != 1 || oks != 1 {
			t.Fatalf("trial %d: the upstream executed the one-use call %d times and %d callers got it; want 1 and 1", trial, n, oks)
		}
		rec, found, err := fs.Find(ctx, id, "")
		if err != nil || !found || rec.Uses() != 1 {
			t.Fatalf("trial %d: approval %s has %d uses recorded; want 1", trial, id, rec.Uses())
		}
	}
	t.Logf("%d trials of 6 parallel retries of a uses: 1 grant across 3 sidecars, uses in Redis: each executed once (%s)", singleUseTrials, time.Since(start).Round(time.Millisecond))
}

// TestFleetApprovalUseRefusedWithoutRedis: with Redis away, an approved
// grant's use is refused as approval_unavailable (retryable), never taken
// on a local count, and goes through once Redis is back.
func TestFleetApprovalUseRefusedWithoutRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := newFleetUpstream(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "approvals.ndjson")
	fleet := startFleet(t, 1, fmt.Sprintf("{addrs: [%s], timeout: 300ms, breaker_failures: 1, breaker_cooldown: 100ms}", srv.Addr()), fmt.Sprintf(`
tools:
  - name: rec_delete
    match: {host: 127.0.0.1, method: DELETE, path: "/v1/rec/{id}"}
approvals:
  file: %s
  tools:
    rec_delete: {require: always}
`, store))
	person, _ := filePerson(t, dir, store)
	target := up.URL + "/v1/rec/1"
	_, env := fleet[0].call(t, http.MethodDelete, target, "s", "")
	if env.Error == nil || env.Error.Approval == nil {
		t.Fatalf("first call: %+v; want approval_pending", env.Error)
	}
	if _, err := person.Decide(context.Background(), env.Error.Approval.ID, audit.VerdictApproved, "test:dana", ""); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for range 3 {
		status, env := fleet[0].call(t, http.MethodDelete, target, "s", "")
		if status == http.StatusOK || env.Error == nil || env.Error.Reason != bucketing.ReasonApprovalUnavailable || env.Error.RetryAfterMS == nil {
			t.Fatalf("with Redis away: %d %+v; want approval_unavailable with retry_after_ms", status, env.Error)
		}
	}
	if n := up.count("/v1/rec/1"); n != 0 {
		t.Fatalf("upstream executed the call %d times while Redis was away", n)
	}
	srv.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, _ := fleet[0].call(t, http.MethodDelete, target, "s", "")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the grant was not usable 15s after Redis came back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Redis restarts empty: the use count is taken from the audit file,
	// so the used grant is not given back.
	srv.Restart(t)
	time.Sleep(300 * time.Millisecond) // past the breaker's cooldown
	if status, _ := fleet[0].call(t, http.MethodDelete, target, "s", ""); status == http.StatusOK {
		t.Fatal("a uses: 1 grant went upstream twice after Redis restarted")
	}
	if n := up.count("/v1/rec/1"); n != 1 {
		t.Fatalf("upstream executed the call %d times; want 1", n)
	}
}

// fleetStatus is the state object of a sidecar's /status.
func fleetStatus(t *testing.T, s *fleetSidecar) *struct {
	Backend  string `json:"backend"`
	Degraded bool   `json:"degraded"`
	Errors   int64  `json:"errors"`
} {
	t.Helper()
	var st struct {
		State *struct {
			Backend  string `json:"backend"`
			Degraded bool   `json:"degraded"`
			Errors   int64  `json:"errors"`
		} `json:"state"`
	}
	resp, err := http.Get("http://" + s.admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.State
}

// fleetMetrics is a sidecar's /metrics.
func fleetMetrics(t *testing.T, s *fleetSidecar) string {
	t.Helper()
	resp, err := http.Get("http://" + s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestFleetApprovalSingleUseClickHouseRedis is the deployment the Redis
// use counter is for: three sidecar processes whose approvals audit is
// one ClickHouse (which alone decides uses only per sidecar), with
// state.redis. In 100 trials of six parallel retries of a uses: 1 grant
// across the three, the real upstream executes each call exactly once,
// and ClickHouse records exactly one use of each grant.
func TestFleetApprovalSingleUseClickHouseRedis(t *testing.T) {
	t.Parallel()
	ch := chtest.Shared(t)
	db := ch.Database(t)
	srv := redistest.Start(t)
	up := newFleetUpstream(t)
	fleet := startFleetEvents(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 2s}", srv.Addr()), `events:
  queue: {flush_interval: 20ms}
  spool: {dir: SPOOL}
  clickhouse: {addr: [`+ch.Addr()+`], database: `+db+`}`, `
tools:
  - name: rec_delete
    match: {host: 127.0.0.1, method: DELETE, path: "/v1/rec/{id}"}
approvals:
  store: clickhouse
  pending_ttl: 1m
  decision_ttl: 1m
  max_pending: 100000
  tools:
    rec_delete: {require: always}
`)
	const trials = 100
	for trial := range trials {
		target := fmt.Sprintf("%s/v1/rec/%d", up.URL, trial)
		status, env := fleet[trial%3].call(t, http.MethodDelete, target, "sess-1", "")
		if status != http.StatusForbidden || env.Error == nil || env.Error.Reason != "approval_pending" || env.Error.Approval == nil {
			t.Fatalf("trial %d: first call %d %+v; want approval_pending", trial, status, env.Error)
		}
		id := env.Error.Approval.ID
		ch.Exec(t, "INSERT INTO "+db+".approval_decisions (id, time, time_us, verdict, decider, note) VALUES ('"+id+"', now(), 0, 'approved', 'test:dana', '')")
		oks := raceRetries(t, trial, 6, func(i int) (int, bucketing.Envelope) {
			return fleet[i%3].call(t, http.MethodDelete, target, "sess-1", "")
		})
		if n := up.count(fmt.Sprintf("/v1/rec/%d", trial)); n != 1 || oks != 1 {
			t.Fatalf("trial %d: the upstream executed the one-use call %d times and %d callers got it; want 1 and 1", trial, n, oks)
		}
	}
	uses := ch.Query(t, "SELECT count(), uniqExact(id) FROM "+db+".approval_decisions WHERE verdict = 'used'")
	if uses[0][0] != fmt.Sprint(trials) || uses[0][1] != fmt.Sprint(trials) {
		t.Fatalf("ClickHouse records %s uses of %s grants; want one use of each of %d", uses[0][0], uses[0][1], trials)
	}
}

// startFleetProcess is startProcess with runningWithin to start: a
// sidecar on ClickHouse migrates its schema first, which a loaded machine
// can take longer than 15s to do.
func startFleetProcess(t *testing.T, bin, cfg string) *process {
	t.Helper()
	p := &process{stderr: new(testutil.SyncBuffer)}
	p.cmd = exec.Command(bin, "run", "--config", cfg)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	deadline := time.Now().Add(runningWithin)
	for {
		if l, ok := findRunning(p.stderr.String()); ok {
			p.line = l
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running line within %s; stderr:\n%s", runningWithin, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
