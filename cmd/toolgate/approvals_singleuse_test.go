package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// singleUseTrials is how many one-use grants TestApprovalSingleUseAcross
// ThreeSidecars races (issue 39: 1,000).
const singleUseTrials = 1000

// TestApprovalSingleUseAcrossThreeSidecars runs three real sidecars, each
// its own process (the toolgate binary), sharing one approvals file. In
// each of 1,000 trials a call that needs approval is asked, approved with
// uses: 1, and then retried in parallel, twice through each sidecar at
// once: a real upstream counts what it executed, and it must be exactly
// once per trial; the store must hold exactly one use of each grant.
// Before the use was decided under a flock, 11 of 115 such trials went
// upstream twice.
func TestApprovalSingleUseAcrossThreeSidecars(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	executed := map[string]int{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			mu.Lock()
			executed[r.URL.Path]++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"deleted":true}`)
	}))
	defer up.Close()

	dir := t.TempDir()
	store := filepath.Join(dir, "approvals.ndjson")
	bin := toolgateBinary(t)
	var sidecars []*http.Client
	for i := range 3 {
		cfg := filepath.Join(dir, fmt.Sprintf("sidecar%d.yaml", i))
		writeFile(t, cfg, fmt.Sprintf(`
listen: {forward: 127.0.0.1:0}
admin: {listen: off}
events: {file: {path: %s}}
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
`, filepath.Join(dir, fmt.Sprintf("events%d.ndjson", i)), store))
		p := startProcess(t, bin, cfg)
		proxy := &url.URL{Scheme: "http", Host: p.line.Forward}
		sidecars = append(sidecars, &http.Client{Timeout: 60 * time.Second,
			Transport: &http.Transport{Proxy: http.ProxyURL(proxy), MaxIdleConnsPerHost: 8}})
	}
	person, fs := filePerson(t, dir, store)
	ctx := context.Background()

	del := func(c *http.Client, trial int) (int, bucketing.Envelope) {
		req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/v1/rec/%d", up.URL, trial), nil)
		req.Header.Set("X-Toolgate-Envelope", "1")
		req.Header.Set("X-Toolgate-Agent", "agent-1")
		req.Header.Set("X-Toolgate-Session", "sess-1")
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
			return 0, bucketing.Envelope{}
		}
		defer resp.Body.Close()
		var env bucketing.Envelope
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("answer %d is no envelope: %s", resp.StatusCode, body)
		}
		return resp.StatusCode, env
	}

	start := time.Now()
	ids := make([]string, singleUseTrials)
	for trial := range singleUseTrials {
		status, env := del(sidecars[trial%3], trial)
		if status != http.StatusForbidden || env.Error == nil || env.Error.Reason != "approval_pending" || env.Error.Approval == nil {
			t.Fatalf("trial %d: first call %d %+v; want approval_pending", trial, status, env.Error)
		}
		ids[trial] = env.Error.Approval.ID
		if _, err := person.Decide(ctx, ids[trial], audit.VerdictApproved, "test:dana", ""); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		oks := raceRetries(t, trial, 6, func(i int) (int, bucketing.Envelope) { return del(sidecars[i%3], trial) })
		mu.Lock()
		n := executed[fmt.Sprintf("/v1/rec/%d", trial)]
		mu.Unlock()
		if n != 1 || oks != 1 {
			t.Fatalf("trial %d: the upstream executed the one-use call %d times and %d callers got it; want 1 and 1", trial, n, oks)
		}
	}
	elapsed := time.Since(start)
	for trial, id := range ids {
		rec, found, err := fs.Find(ctx, id, "")
		if err != nil || !found || rec.Uses() != 1 {
			t.Fatalf("trial %d: approval %s has %d uses recorded (found %v, %v); want 1", trial, id, rec.Uses(), found, err)
		}
	}
	t.Logf("%d trials of 6 parallel retries of a uses: 1 grant across 3 sidecar processes: each executed once upstream (%s)", singleUseTrials, elapsed.Round(time.Millisecond))
}

// raceRetries sends n retries of an approved call at once, retry i by
// call(i), and returns how many went upstream (200); every other answer
// must be approval_pending.
func raceRetries(t *testing.T, trial, n int, call func(i int) (int, bucketing.Envelope)) int {
	t.Helper()
	var wg sync.WaitGroup
	var oks atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, env := call(i); status == http.StatusOK {
				oks.Add(1)
			} else if env.Error == nil || env.Error.Reason != "approval_pending" {
				t.Errorf("trial %d: retry answered %d %+v; want 200 or approval_pending", trial, status, env.Error)
			}
		}()
	}
	wg.Wait()
	return int(oks.Load())
}

// filePerson opens the approvals file store a test's sidecars share and
// the gate a person decides through; the store closes with the test.
func filePerson(t *testing.T, dir, store string) (*approval.Gate, *approval.FileStore) {
	t.Helper()
	acfg := approval.Config{File: store}
	if err := acfg.Validate(dir, false); err != nil {
		t.Fatal(err)
	}
	fs, err := approval.OpenFileStore(store, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return approval.New(acfg, fs, "test"), fs
}
