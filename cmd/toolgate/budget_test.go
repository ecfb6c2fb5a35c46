package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
)

// budgetUpstream is a real HTTP upstream for the budget tests: it counts
// calls, records when each arrived, answers 429 with a Retry-After while
// told to, and says what a call cost in X-Cost.
type budgetUpstream struct {
	srv       *httptest.Server
	calls     atomic.Int64
	mu        sync.Mutex
	arrivals  []time.Time
	throttle  atomic.Int64 // answer 429 with Retry-After: this many seconds, when > 0
	costValue atomic.Int64
}

func startBudgetUpstream(t *testing.T) *budgetUpstream {
	t.Helper()
	u := &budgetUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		u.mu.Lock()
		u.arrivals = append(u.arrivals, time.Now())
		u.mu.Unlock()
		if s := u.throttle.Load(); s > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(s))
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"slow down"}`))
			return
		}
		if c := u.costValue.Load(); c > 0 {
			w.Header().Set("X-Cost", fmt.Sprint(c))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ids":[1,2,3]}`))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// host is the upstream as calls name it (127.0.0.1:PORT).
func (u *budgetUpstream) host() string { return strings.TrimPrefix(u.srv.URL, "http://") }

// budgetConfig is a sidecar configuration in front of the upstream, with
// the budgets section given (UPSTREAM stands for the upstream's URL,
// UPHOST for its host).
func budgetConfig(u *budgetUpstream, budgets string) string {
	cfg := `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: budgets
  file:
    path: events.ndjson
tools:
  - name: search
    match: {host: 127.0.0.1, method: GET, path: /search}
    args: [query]
    envelope: always
    schema:
      type: object
      properties:
        term: {type: string, minLength: 1}
      required: [term]
` + budgets
	return strings.NewReplacer("UPSTREAM", u.srv.URL, "UPHOST", u.host()).Replace(cfg)
}

// envelopeError decodes a refusal's error member.
type envelopeError struct {
	Code         string `json:"code"`
	Class        string `json:"class"`
	Reason       string `json:"reason"`
	Detail       string `json:"detail"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMS *int64 `json:"retry_after_ms"`
	Violations   []struct {
		Message  string `json:"message"`
		Expected string `json:"expected"`
	} `json:"violations"`
}

func errorOf(t *testing.T, a answer) envelopeError {
	t.Helper()
	var env struct {
		OK    bool           `json:"ok"`
		Error *envelopeError `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &env); err != nil || env.Error == nil {
		t.Fatalf("answer %d %q is not a refusal envelope (%v)", a.status, a.body, err)
	}
	return *env.Error
}

// TestBudgetSessionExhaustedAndRecovers runs the sidecar with a budget of
// three calls per session in a 1.5s window: the fourth call of a session
// is refused before upstream as policy/budget_exhausted, naming the
// budget, its limit and window, with retry_after_ms; another session is
// not affected; after the window the session may call again; the event
// names the budget and /metrics counts the refusal.
func TestBudgetSessionExhaustedAndRecovers(t *testing.T) {
	t.Parallel()
	up := startBudgetUpstream(t)
	dir := t.TempDir()
	r := startRun(t, dir, budgetConfig(up, `budgets:
  limits:
    - name: per_session
      per: [session]
      calls: 3
      window: 1500ms
`))
	l := r.running(t)
	c := proxyClient(t, l.Forward)
	call := func(session string) answer {
		return do(t, c, "GET", up.srv.URL+"/search?term=p53", map[string]string{"X-Toolgate-Session": session})
	}
	start := time.Now()
	for i := range 3 {
		if a := call("s1"); a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, a.status, a.body)
		}
	}
	a := call("s1")
	if a.status != http.StatusForbidden || a.header.Get("X-Toolgate-Error-Code") != "policy" {
		t.Fatalf("4th call: %d %s", a.status, a.body)
	}
	e := errorOf(t, a)
	if e.Reason != bucketing.ReasonBudgetExhausted || e.Class != "policy" || e.RetryAfterMS == nil {
		t.Fatalf("4th call error = %+v", e)
	}
	if ms := *e.RetryAfterMS; ms <= 0 || ms > 1500 {
		t.Errorf("retry_after_ms = %d, want in (0, 1500]", ms)
	}
	if len(e.Violations) != 1 || !strings.Contains(e.Violations[0].Message, "per_session") || e.Violations[0].Expected != "3 calls per 1.5s" {
		t.Errorf("violations = %+v, want the budget's name, limit and window", e.Violations)
	}
	if !strings.Contains(e.Detail, "per_session") || !strings.Contains(e.Detail, "1.5s") {
		t.Errorf("detail = %q", e.Detail)
	}
	if a.header.Get("Retry-After") == "" {
		t.Error("no Retry-After header on the refusal")
	}
	if a := call("s2"); a.status != http.StatusOK {
		t.Errorf("another session: %d %s", a.status, a.body)
	}
	if got := up.calls.Load(); got != 4 {
		t.Errorf("upstream saw %d calls, want 4 (the refused one never reaches it)", got)
	}
	// After the window (counted from the session's first call) the
	// session may call again.
	time.Sleep(time.Until(start.Add(1500*time.Millisecond)) + 50*time.Millisecond)
	if a := call("s1"); a.status != http.StatusOK {
		t.Errorf("after the window: %d %s", a.status, a.body)
	}
	m := do(t, directClient(t), "GET", "http://"+l.Admin+"/metrics", nil)
	for _, want := range []string{
		`toolgate_budget_decisions_total{budget="per_session",decision="refused"} 1`,
		`toolgate_budget_decisions_total{budget="per_session",decision="admitted"} 5`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	r.stop(t)
	var refused int
	for _, ev := range readEvents(t, filepath.Join(dir, "events.ndjson")) {
		if ev.Reason == bucketing.ReasonBudgetExhausted {
			refused++
			if ev.Budget != "per_session" || !ev.Refused || ev.RetryAfterMS <= 0 || ev.Session != "s1" {
				t.Errorf("refusal event: budget %q refused %v retry_after_ms %d session %q", ev.Budget, ev.Refused, ev.RetryAfterMS, ev.Session)
			}
		} else if ev.Budget != "" {
			t.Errorf("event %s names budget %q", ev.Reason, ev.Budget)
		}
	}
	if refused != 1 {
		t.Errorf("%d budget_exhausted events, want 1", refused)
	}
}

// TestLoopBrokenThroughSidecar: with loops.max_repeats 2, the third
// identical call in a session is refused as policy/loop_detected, a
// changed call passes, and so does the same call from another session.
func TestLoopBrokenThroughSidecar(t *testing.T) {
	t.Parallel()
	up := startBudgetUpstream(t)
	r := startRun(t, t.TempDir(), budgetConfig(up, `budgets:
  loops:
    max_repeats: 2
    window: 1m
`))
	l := r.running(t)
	c := proxyClient(t, l.Forward)
	call := func(session, term string) answer {
		return do(t, c, "GET", up.srv.URL+"/search?term="+term, map[string]string{"X-Toolgate-Session": session})
	}
	for i := range 2 {
		if a := call("s1", "p53"); a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, a.status, a.body)
		}
	}
	a := call("s1", "p53")
	if a.status != http.StatusForbidden {
		t.Fatalf("3rd identical call: %d %s", a.status, a.body)
	}
	if e := errorOf(t, a); e.Reason != bucketing.ReasonLoopDetected || e.RetryAfterMS == nil || !strings.Contains(e.Detail, "same arguments") {
		t.Errorf("3rd identical call: %+v", e)
	}
	if a := call("s1", "brca1"); a.status != http.StatusOK {
		t.Errorf("changed call: %d %s", a.status, a.body)
	}
	if a := call("s2", "p53"); a.status != http.StatusOK {
		t.Errorf("other session: %d %s", a.status, a.body)
	}
	if got := up.calls.Load(); got != 4 {
		t.Errorf("upstream saw %d calls, want 4", got)
	}
}

// TestOutboundRateLimitMeasured sends calls from 32 concurrent callers
// for about 6 seconds through an upstream limit of 25 calls a second
// (burst 5, max_wait 30s, so every call waits its turn): the rate at which
// calls reach upstream after the first burst, measured over the rest of
// the run (about 150 calls), is within 10% of 25. The burst of 5 lets the
// limiter make up for a stall of up to 200ms of a loaded machine, as it
// would in production; a burst of 1 would lose those turns.
func TestOutboundRateLimitMeasured(t *testing.T) {
	t.Parallel()
	const ratePerSec = 25.0
	up := startBudgetUpstream(t)
	r := startRun(t, t.TempDir(), budgetConfig(up, `budgets:
  upstreams:
    - host: UPHOST
      rate: 25
      burst: 5
      max_wait: 30s
`))
	l := r.running(t)
	c := proxyClient(t, l.Forward)
	c.Timeout = 60 * time.Second
	stop := time.Now().Add(6 * time.Second)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				a, err := fetch(c, "GET", up.srv.URL+"/search?term=x", nil)
				if err != nil || a.status != http.StatusOK {
					failed.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d callers got an error; with max_wait 30s every call waits its turn", n)
	}
	up.mu.Lock()
	arr := append([]time.Time(nil), up.arrivals...)
	up.mu.Unlock()
	const burst = 5
	if len(arr) < 100 {
		t.Fatalf("only %d calls reached upstream", len(arr))
	}
	// From the last call of the first burst to the last call: the
	// sustained rate.
	span := arr[len(arr)-1].Sub(arr[burst-1]).Seconds()
	got := float64(len(arr)-burst) / span
	t.Logf("%d calls reached upstream; after the first %d, %.2f/s over %.2fs (limit %.0f/s)", len(arr), burst, got, span, ratePerSec)
	if got < ratePerSec*0.9 || got > ratePerSec*1.1 {
		t.Errorf("measured rate %.2f/s, want %.0f/s ±10%%", got, ratePerSec)
	}
}

// TestOutboundRateLimitRefusesAtOnce: with max_wait 0, a call over the
// rate is refused at once as rate_limit/local_rate_limit with
// retry_after_ms, and upstream never sees it.
func TestOutboundRateLimitRefusesAtOnce(t *testing.T) {
	t.Parallel()
	up := startBudgetUpstream(t)
	r := startRun(t, t.TempDir(), budgetConfig(up, `budgets:
  upstreams:
    - host: UPHOST
      rate: 0.5
      burst: 2
`))
	l := r.running(t)
	c := proxyClient(t, l.Forward)
	for i := range 2 {
		if a := do(t, c, "GET", up.srv.URL+"/search?term=x", nil); a.status != http.StatusOK {
			t.Fatalf("call %d (within the burst): %d %s", i+1, a.status, a.body)
		}
	}
	a := do(t, c, "GET", up.srv.URL+"/search?term=x", nil)
	if a.status != http.StatusTooManyRequests || a.header.Get("X-Toolgate-Error-Code") != "rate_limit" {
		t.Fatalf("3rd call: %d %s", a.status, a.body)
	}
	e := errorOf(t, a)
	if e.Reason != bucketing.ReasonLocalRateLimit || e.Class != "transient" || !e.Retryable || e.RetryAfterMS == nil || *e.RetryAfterMS < 1000 || *e.RetryAfterMS > 2000 {
		t.Errorf("3rd call error: %+v (retry_after_ms %v), want about 2000ms", e, e.RetryAfterMS)
	}
	if got := up.calls.Load(); got != 2 {
		t.Errorf("upstream saw %d calls, want 2", got)
	}
}

// TestUpstreamBackoffSavesCalls: after the upstream answers 429 with
// Retry-After: 2, the next ten calls to it within those two seconds are
// answered at once by the sidecar (rate_limit/upstream_backoff, with the
// remaining wait) and never reach it: ten upstream calls saved. After the
// wait, calls go through again.
func TestUpstreamBackoffSavesCalls(t *testing.T) {
	t.Parallel()
	up := startBudgetUpstream(t)
	r := startRun(t, t.TempDir(), budgetConfig(up, `budgets:
  upstreams:
    - host: UPHOST
      backoff: true
`))
	l := r.running(t)
	c := proxyClient(t, l.Forward)
	up.throttle.Store(2)
	a := do(t, c, "GET", up.srv.URL+"/search?term=x", nil)
	throttled := time.Now()
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	up.throttle.Store(0)
	saved := 0
	for range 10 {
		a := do(t, c, "GET", up.srv.URL+"/search?term=x", nil)
		if time.Since(throttled) > 1800*time.Millisecond {
			break // a loaded machine: the backoff is running out
		}
		e := errorOf(t, a)
		if a.status != http.StatusTooManyRequests || e.Reason != bucketing.ReasonUpstreamBackoff || e.RetryAfterMS == nil || *e.RetryAfterMS > 2000 || *e.RetryAfterMS <= 0 {
			t.Fatalf("call during the backoff: %d %+v", a.status, e)
		}
		saved++
	}
	if got := up.calls.Load(); got != 1 {
		t.Errorf("upstream saw %d calls, want 1: the calls during the backoff must not reach it", got)
	}
	t.Logf("upstream calls saved by the backoff: %d", saved)
	if saved < 5 {
		t.Errorf("only %d calls answered during the backoff", saved)
	}
	time.Sleep(time.Until(throttled.Add(2*time.Second)) + 100*time.Millisecond)
	if a := do(t, c, "GET", up.srv.URL+"/search?term=x", nil); a.status != http.StatusOK {
		t.Errorf("after the backoff: %d %s", a.status, a.body)
	}
	m := do(t, directClient(t), "GET", "http://"+l.Admin+"/metrics", nil)
	if want := fmt.Sprintf(`toolgate_budget_limiter_calls_total{result="backoff_refused",upstream=%q} %d`, up.host(), saved); !strings.Contains(m.body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestBudgetCountersInRego: a Rego policy reads input.budget and refuses
// a session's third call, before the budget's own cap (10) would.
func TestBudgetCountersInRego(t *testing.T) {
	t.Parallel()
	up := startBudgetUpstream(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pace"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "pace", "pace.rego"), `package toolgate.pace

deny contains "at most two searches per session per minute; refine the query instead" if {
	input.budget.limits.per_session.calls >= 2
}
`)
	cfg := strings.Replace(budgetConfig(up, `budgets:
  limits:
    - name: per_session
      per: [session]
      calls: 10
      window: 1m
policies:
  rego:
    - {name: pace, path: pace}
`), "    envelope: always\n", "    envelope: always\n    policies: [pace]\n", 1)
	r := startRun(t, dir, cfg)
	l := r.running(t)
	c := proxyClient(t, l.Forward)
	for i := range 2 {
		if a := do(t, c, "GET", up.srv.URL+"/search?term=x", map[string]string{"X-Toolgate-Session": "s"}); a.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, a.status, a.body)
		}
	}
	a := do(t, c, "GET", up.srv.URL+"/search?term=x", map[string]string{"X-Toolgate-Session": "s"})
	if e := errorOf(t, a); e.Reason != bucketing.ReasonPolicyDenied || !strings.Contains(e.Detail, "two searches") {
		t.Errorf("3rd call: %d %+v", a.status, e)
	}
	if a := do(t, c, "GET", up.srv.URL+"/search?term=x", map[string]string{"X-Toolgate-Session": "other"}); a.status != http.StatusOK {
		t.Errorf("another session: %d %s", a.status, a.body)
	}
}

// TestBudgetConfigErrors loads broken budgets sections: each error names
// the file, the line of the marked field, and its path.
func TestBudgetConfigErrors(t *testing.T) {
	t.Parallel()
	const tools = "tools:\n  - name: search\n    match: {host: api.example.org, path: /search}\n"
	tests := []struct {
		name, yaml, want string // want: "LINE: field: message" after the file name
	}{
		{"no window", "budgets:\n  limits:\n    - name: a\n      calls: 3\n", `:6: budgets.limits[0].window: 0s is outside 1ms to 744h0m0s`},
		{"neither calls nor cost", "budgets:\n  limits:\n    - name: a\n      window: 1m\n", `:6: budgets.limits[0].calls: budget "a" sets neither calls nor cost`},
		{"a name twice", "budgets:\n  limits:\n    - {name: a, calls: 1, window: 1m}\n    - {name: a, calls: 2, window: 1m}\n", `:7: budgets.limits[1].name: budget "a" is named twice`},
		{"unknown per", "budgets:\n  limits:\n    - name: a\n      per: [session, user]\n      calls: 1\n      window: 1m\n", `:7: budgets.limits[0].per[1]: "user" is not session, agent or tool`},
		{"unknown tool", "budgets:\n  limits:\n    - name: a\n      tools: [serch]\n      calls: 1\n      window: 1m\n", `:7: budgets.limits[0].tools[0]: "serch" names no tool`},
		{"a cost for no tool", "budgets:\n  costs:\n    serch: {cost: 2}\n", `:6: budgets.costs.serch: names no tool`},
		{"a negative cost", "budgets:\n  costs:\n    search: {cost: -1}\n", `: budgets.costs.search.cost: must be a finite number, not negative`},
		{"max_wait too long", "budgets:\n  upstreams:\n    - host: api.example.org\n      rate: 1\n      max_wait: 2m\n", `:8: budgets.upstreams[0].max_wait: 2m0s is outside 0 to 1m0s`},
		{"an upstream that does nothing", "budgets:\n  upstreams:\n    - host: api.example.org\n      backoff: false\n", `budgets.upstreams[0].rate: upstream "api.example.org" sets no rate and no backoff`},
		{"a URL for a host", "budgets:\n  upstreams:\n    - host: https://api.example.org/\n      rate: 1\n", `:6: budgets.upstreams[0].host: "https://api.example.org/" is a URL or has spaces; give a host name, with an optional port`},
		{"max_keys too large", "budgets:\n  max_keys: 100000000\n", `:5: budgets.max_keys: 100000000 is outside 1 to 10000000`},
		{"an unknown key", "budgets:\n  loop:\n    max_repeats: 3\n", `:5: `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("budgets.yaml", []byte(tools+tc.yaml))
			if err == nil {
				t.Fatalf("loads:\n%s", tools+tc.yaml)
			}
			if !strings.HasPrefix(err.Error(), "budgets.yaml:") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to hold %q", err, tc.want)
			}
		})
	}
}

// TestBudgetCountersSurviveReload: a reload that leaves the budgets
// section unchanged keeps the engine, counters and all; one that changes
// it starts the counters over, with the same metrics.
func TestBudgetCountersSurviveReload(t *testing.T) {
	t.Parallel()
	const base = "tools:\n  - name: search\n    match: {host: api.example.org, path: /search}\n"
	const budgets = "budgets:\n  limits:\n    - {name: a, per: [session], calls: 1, window: 1h}\n"
	first, err := config.Parse("r.yaml", []byte(base+budgets))
	if err != nil {
		t.Fatal(err)
	}
	defer first.ClosePolicies(nil)
	if first.Snapshot.Budgets == nil {
		t.Fatal("no budget step in the snapshot")
	}
	same, err := config.ParseAfter("r.yaml", []byte(base+"unmatched: pass\n"+budgets), first)
	if err != nil {
		t.Fatal(err)
	}
	if same.BudgetEngine != first.BudgetEngine || same.Snapshot.Budgets != first.Snapshot.Budgets {
		t.Error("an unchanged budgets section got a new engine: a reload would forget the counters")
	}
	changed, err := config.ParseAfter("r.yaml", []byte(base+strings.Replace(budgets, "calls: 1", "calls: 2", 1)), same)
	if err != nil {
		t.Fatal(err)
	}
	if changed.BudgetEngine == first.BudgetEngine {
		t.Error("a changed budgets section kept the old engine")
	}
	if changed.BudgetEngine.Metrics() != first.BudgetEngine.Metrics() {
		t.Error("a changed budgets section lost the metrics")
	}
	none, err := config.Parse("n.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if none.BudgetEngine != nil || none.Snapshot.Budgets != nil {
		t.Error("no budgets section, yet a budget step")
	}
}
