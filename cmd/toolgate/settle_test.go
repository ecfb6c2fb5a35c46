package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
)

// settleConfig is a sidecar whose search tool a Rego policy file guards;
// SETTLE is its reload.settle line.
const settleConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
events:
  sidecar: settle
  file: {path: events.ndjson}
  queue: {flush_interval: 50ms}
SETTLE
tools:
  - name: search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    args: [query]
    policies: [kw]
policies:
  deadline: 5s
  rego:
    - name: kw
      path: kw.rego
`

// kwPolicy denies a query holding any of words. Its first lines are a
// package and a long comment: a file cut anywhere in them parses, and
// allows every call.
func kwPolicy(words ...string) string {
	var b strings.Builder
	b.WriteString("package kw\n\n")
	for i := range 12 {
		fmt.Fprintf(&b, "# Line %d of a comment long enough that a reader of a half-written file sees a valid policy with no rules.\n", i)
	}
	for _, w := range words {
		fmt.Fprintf(&b, "\ndeny contains \"the query holds a word that is not allowed\" if {\n\tcontains(input.arguments.query, %q)\n}\n", w)
	}
	return b.String()
}

// writeSlowly truncates path and writes body into it in chunks, every gap,
// as a slow copy or an editor saving over a network file system would; it
// returns the longest pause between two writes it saw.
func writeSlowly(t *testing.T, path, body string, chunks int, gap time.Duration) time.Duration {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last, worst := time.Now(), time.Duration(0)
	size := (len(body) + chunks - 1) / chunks
	for off := 0; off < len(body); off += size {
		time.Sleep(gap)
		if _, err := f.WriteString(body[off:min(off+size, len(body))]); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		worst = max(worst, now.Sub(last))
		last = now
	}
	return worst
}

// TestReloadWaitsForWholeFiles rewrites a policy file slowly, chunk by
// chunk over 1.5s, in place, while calls that the policy must refuse flow
// through the real sidecar. No call is decided by a half-written policy
// (the file cut after its comment would allow every call), no half-written
// file is even tried (no reload fails), and the whole new policy is in
// force once the writing has stopped for the settle time. It is run with
// the default settle time (250ms) and a configured one (1s).
//
// The property holds only while no pause in the writing is as long as the
// settle time; a round where the loaded machine paused the writer that
// long proves nothing, and is tried again, up to five rounds. With the
// 100ms toolgate waited before it had a settle time, the first case let
// calls through in every round.
func TestReloadWaitsForWholeFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		settle string // the reload section; "" for the default
		wait   time.Duration
		chunks int
		gap    time.Duration // between chunks
	}{
		// Pauses longer than the 100ms toolgate waited before it had a
		// settle time, which loaded this file half-written.
		{"settle time of 1s", "reload: {settle: 1s}", time.Second, 10, 150 * time.Millisecond},
		{"default settle time", "", reload.DefaultSettle, 25, 60 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := startUpstream(t)
			dir := t.TempDir()
			policy := filepath.Join(dir, "kw.rego")
			v1 := kwPolicy("forbidden")
			writeFile(t, policy, v1)
			r := startRun(t, dir, strings.Replace(settleConfig, "SETTLE", tt.settle, 1))
			l := r.running(t)
			admin, client := directClient(t), proxyClient(t, l.Forward)
			call := func(query string) int {
				return do(t, client, "GET", up.URL()+"/esearch?term=x&query="+query, nil).status
			}
			if got := call("forbidden"); got != http.StatusForbidden {
				t.Fatalf("a forbidden word before the rewrite: status %d, want 403", got)
			}

			for round := 1; ; round++ {
				words := []string{"forbidden", fmt.Sprintf("secret%d", round)}
				v2 := kwPolicy(words...)
				before := getReload(t, admin, l.Admin).Reload.Reloads

				stop := make(chan struct{})
				var calls, passed atomic.Int64
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						a, err := fetch(client, "GET", up.URL()+"/esearch?term=x&query=forbidden", nil)
						if err != nil {
							continue
						}
						calls.Add(1)
						if a.status != http.StatusForbidden {
							passed.Add(1)
						}
					}
				}()
				start := time.Now()
				worstGap := writeSlowly(t, policy, v2, tt.chunks, tt.gap)
				wrote := time.Since(start)
				waitReload(t, admin, l.Admin, "reloaded", func(d reloadDoc) bool {
					return d.Reload.Reloads != before
				})
				time.Sleep(2 * tt.wait) // time for a second reload, if one were coming
				close(stop)
				wg.Wait()
				d := getReload(t, admin, l.Admin)
				t.Logf("round %d: wrote %d bytes in %s (longest pause %s, settle %s); %d calls with the forbidden word meanwhile, %d passed; %d reloads ok, %d failed",
					round, len(v2), wrote.Round(time.Millisecond), worstGap.Round(time.Millisecond), tt.wait, calls.Load(), passed.Load(),
					d.Reload.Reloads.OK-before.OK, d.Reload.Reloads.Failed-before.Failed)
				if worstGap >= tt.wait {
					if round == 5 {
						t.Skipf("inconclusive: the writer paused as long as the settle time in five rounds (%s in the last); the machine is too loaded", worstGap)
					}
					// Back to the first policy, and wait until no reload is
					// pending, so the next round counts only its own.
					replaceFile(t, policy, v1)
					for last, give := getReload(t, admin, l.Admin).Reload.Reloads, time.Now().Add(30*time.Second); ; {
						if time.Now().After(give) {
							t.Fatalf("reloads still under way 30s after the first policy was put back")
						}
						time.Sleep(3 * tt.wait)
						now := getReload(t, admin, l.Admin).Reload.Reloads
						if now == last && call(words[1]) == http.StatusOK {
							break
						}
						last = now
					}
					continue
				}
				if n := passed.Load(); n > 0 {
					t.Errorf("%d of %d calls with the forbidden word passed while the policy was rewritten", n, calls.Load())
				}
				if calls.Load() < 10 {
					t.Errorf("only %d calls during the rewrite", calls.Load())
				}
				// One reload, of the whole file: a half-written one would have
				// been a second reload, or a failed one.
				if got := d.Reload.Reloads; got.OK != before.OK+1 || got.Failed != before.Failed {
					t.Errorf("reloads went from %+v to %+v during the rewrite, want one more ok and no failure", before, got)
				}
				if got := call(words[1]); got != http.StatusForbidden {
					t.Errorf("the new policy's word after the rewrite: status %d, want 403", got)
				}
				return
			}
		})
	}
}
