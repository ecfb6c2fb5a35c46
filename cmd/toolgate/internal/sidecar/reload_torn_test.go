package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/testutil"
)

// tornConfig names one Rego policy folder; the reloads are the test's.
const tornConfig = `listen:
  forward: 127.0.0.1:0
admin:
  listen: "off"
events:
  file:
    path: events.ndjson
reload:
  settle: 50ms
policies:
  rego:
    - name: bounds
      path: policies/bounds
`

// tornPolicy denies a retmax above bound.
func tornPolicy(bound int) string {
	return fmt.Sprintf("package toolgate.bounds\n\ndeny contains {\"msg\": \"retmax too large\", \"path\": \"/retmax\"} if {\n\tinput.arguments.retmax > %d\n}\n", bound)
}

// startTorn writes tornConfig and a policy bounded at 50 into a folder
// and starts a sidecar on it, its files also read every poll; it returns
// the sidecar, its log, and the policy file's path.
func startTorn(t *testing.T, poll time.Duration) (*Sidecar, *testutil.SyncBuffer, string) {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policies", "bounds", "bounds.rego")
	if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte(tornPolicy(50)), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(path, []byte(tornConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	lc, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(testutil.SyncBuffer)
	sc, err := Start(lc, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), ReloadPoll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		defer cancel()
		sc.Stop(ctx)
		testHookLoad = nil // once the reloader has stopped
	})
	return sc, logs, policy
}

// tearOnce makes the next reload read the policy half-written: right
// before the reload reads the files the policy is truncated (an in-place
// write's first step), and right after, its writer finishes it with body.
// Later reloads read the files as they are. It returns how many reloads
// read the files. startTorn's cleanup takes the hook away.
func tearOnce(t *testing.T, policy, body string) func() int {
	t.Helper()
	loads := make(chan struct{}, 100)
	torn := false
	testHookLoad = func(stage string) {
		switch {
		case stage == "before":
			loads <- struct{}{}
			if !torn {
				if err := os.WriteFile(policy, nil, 0o644); err != nil {
					panic(err)
				}
			}
		case !torn:
			torn = true
			if err := os.WriteFile(policy, []byte(body), 0o644); err != nil {
				panic(err)
			}
		}
	}
	return func() int { return len(loads) }
}

// policyVersion is the policy version of the configuration next to
// policy as its files are now.
func policyVersion(t *testing.T, policy string) string {
	t.Helper()
	lc, err := config.Load(filepath.Join(filepath.Dir(policy), "..", "..", "toolgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return lc.Snapshot.PolicyVersion
}

// TestReloadReadsAgainAfterTornRead is POST /reload on a policy that an
// in-place write truncates right as the reload reads it: the empty file
// read is put aside, not reported as a broken policy, and the policy as
// written is read and put in force once the files settle.
func TestReloadReadsAgainAfterTornRead(t *testing.T) {
	sc, logs, policy := startTorn(t, time.Hour)
	loads := tearOnce(t, policy, tornPolicy(30))

	w := httptest.NewRecorder()
	sc.reload.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/reload", nil))
	var a ReloadAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		t.Fatalf("POST /reload answer %q: %v", w.Body, err)
	}
	want := policyVersion(t, policy)
	if w.Code != http.StatusOK || !a.OK || a.PolicyVersion != want {
		t.Errorf("POST /reload = %d %+v, want 200 with policy_version %s (the policy as written); log:\n%s", w.Code, a, want, logs)
	}
	if n := loads(); n != 2 {
		t.Errorf("the files were read %d times, want 2: the torn read and one after it", n)
	}
	st := sc.reload.Status()
	if st.Reloads.Failed != 0 || st.Reloads.OK != 1 {
		t.Errorf("reloads %+v, want 1 ok and none failed", st.Reloads)
	}
	if strings.Contains(logs.String(), "reload failed") {
		t.Errorf("a torn read was logged as a failed reload:\n%s", logs)
	}
}

// TestWatchReadsAgainAfterTornRead is the same for a reload the watcher
// starts: an atomic replace of the policy triggers it (seen by the poll
// if the folder's notification is not yet set up), and a write that
// starts as it reads is read again once it settles.
func TestWatchReadsAgainAfterTornRead(t *testing.T) {
	sc, logs, policy := startTorn(t, 100*time.Millisecond)
	loads := tearOnce(t, policy, tornPolicy(30))
	sc.Watch(nil)

	tmp := policy + ".tmp"
	if err := os.WriteFile(tmp, []byte(tornPolicy(40)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, policy); err != nil {
		t.Fatal(err)
	}
	want := ""
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := sc.reload.Status()
		if st.Reloads.OK > 0 || st.Reloads.Failed > 0 {
			if want == "" {
				want = policyVersion(t, policy)
			}
			if st.PolicyVersion == want {
				if st.Reloads.Failed != 0 || loads() < 2 {
					t.Errorf("reloads %+v after %d reads of the files; want none failed, and at least 2 reads; log:\n%s", st.Reloads, loads(), logs)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload put the policy as written in force within 30 s: %+v after %d reads; log:\n%s", st, loads(), logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(logs.String(), "reload failed") {
		t.Errorf("a torn read was logged as a failed reload:\n%s", logs)
	}
}
