package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

func TestDashboardUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir+"/nochs.yaml", "listen: {forward: 127.0.0.1:0}\n")
	// The dashboard reads only events.clickhouse: a policy that does not
	// exist, a schema file that is missing and an unset secret are not
	// its business, but an unknown key still is.
	writeFile(t, dir+"/brokenpolicies.yaml", "tools:\n  - name: t\n    match: {host: example.org, path: /x}\n"+
		"    schema_file: missing.json\n    inject_headers: {X-Key: \"${TOOLGATE_TEST_UNSET_SECRET}\"}\n"+
		"policies:\n  rego: [{name: p, path: nowhere}]\n")
	writeFile(t, dir+"/typo.yaml", "events:\n  clickhose: {addr: [127.0.0.1:9000]}\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"nothing to read", []string{"dashboard"}, exitUsage, "--config FILE, or --clickhouse ADDR"},
		{"both", []string{"dashboard", "--config", "x.yaml", "--clickhouse", "127.0.0.1:9000"}, exitUsage, "not both"},
		{"wide", []string{"dashboard", "--clickhouse", "127.0.0.1:9000", "--listen", "0.0.0.0:18091"}, exitUsage, "--listen: 0.0.0.0 is not a loopback address"},
		{"bad database", []string{"dashboard", "--clickhouse", "127.0.0.1:9000", "--database", "a`b"}, exitUsage, "not a plain database name"},
		{"config without clickhouse", []string{"dashboard", "--config", dir + "/nochs.yaml"}, exitError, "events.clickhouse.addr is not set"},
		{"only the events section", []string{"dashboard", "--config", dir + "/brokenpolicies.yaml"}, exitError, "events.clickhouse.addr is not set"},
		{"unknown key", []string{"dashboard", "--config", dir + "/typo.yaml"}, exitError, "typo.yaml:2: events.clickhose: unknown field"},
		{"demo: bad database, refused before it plays", []string{"demo", "--clickhouse", "127.0.0.1:9000", "--database", "a`b"}, exitUsage, "--database: dashboard: database \"a`b\" is not a plain database name"},
		{"demo: wide dashboard, refused before it plays", []string{"demo", "--clickhouse", "127.0.0.1:9000", "--dashboard-listen", "0.0.0.0:18091"}, exitUsage, "--dashboard-listen: 0.0.0.0 is not a loopback address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.want)
			}
			if tc.args[0] == "demo" && stdout.Len() > 0 {
				t.Errorf("the demo played before refusing its flags:\n%.300s", stdout.String())
			}
		})
	}
}

// dashboardURL is the line dashserve.Serve prints.
var dashboardURL = regexp.MustCompile(`dashboard +(http://[0-9.:]+/)`)

// startCmd runs a toolgate command line in a goroutine until the test
// stops it; wait returns its exit code.
func startCmd(t *testing.T, args ...string) (out *testutil.SyncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, errb) }()
	stopped := false
	var code int
	stop = func() int {
		if !stopped {
			cancel()
			code, stopped = <-done, true
			if code != 0 {
				t.Logf("stderr:\n%s", errb.String())
			}
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

func waitURL(t *testing.T, out *testutil.SyncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := dashboardURL.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no dashboard URL printed:\n%s", out.String())
	return ""
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDashboardCommand serves the dashboard from a configuration file's
// events.clickhouse section over a real ClickHouse, and runs the demo with
// --clickhouse: its own events are in the dashboard it serves, and its
// approval requests in the Approvals page.
func TestDashboardCommand(t *testing.T) {
	t.Parallel()
	ch := chtest.Shared(t)
	db := ch.Database(t)

	t.Run("config", func(t *testing.T) {
		w, err := clickhouse.Open(context.Background(), clickhouse.Config{Addr: []string{ch.Addr()}, Database: db,
			Username: "default", DialTimeout: time.Second * 5, WriteTimeout: time.Minute, RetentionDays: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().UTC().Add(-time.Minute)
		err = w.WriteEvents(context.Background(), []sink.Event{
			{EventID: "1", Time: at, Sidecar: "s", Tool: "pubmed_search", ErrorCode: "validation", Reason: "unknown_field", Detail: "Tool 'pubmed_search' got unknown argument 'x'", TraceID: "t1"},
			{EventID: "2", Time: at, Sidecar: "s", Tool: "pubmed_search", OK: true, Envelope: true, TraceID: "t2"},
		})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeFile(t, dir+"/toolgate.yaml", "listen: {forward: 127.0.0.1:0}\nevents:\n  clickhouse: {addr: ["+ch.Addr()+"], database: "+db+"}\n")
		out, stop := startCmd(t, "dashboard", "--config", dir+"/toolgate.yaml", "--listen", "127.0.0.1:0")
		base := waitURL(t, out)
		st, body := getBody(t, base+"?last=1h")
		if st != 200 || !strings.Contains(body, `data-tool="pubmed_search"`) || !strings.Contains(body, "got unknown argument") {
			t.Errorf("page: %d\n%.2000s", st, body)
		}
		if st, body := getBody(t, base+"?tool=x%27"); st != 400 {
			t.Errorf("hostile tool: %d %.300s", st, body)
		}
		if code := stop(); code != exitOK {
			t.Errorf("dashboard exited %d", code)
		}
	})

	t.Run("demo", func(t *testing.T) {
		demoDB := ch.Database(t)
		out, stop := startCmd(t, "demo", "--dir", t.TempDir(), "--clickhouse", ch.Addr(), "--database", demoDB, "--dashboard-listen", "127.0.0.1:0")
		base := waitURL(t, out)
		if !strings.Contains(out.String(), "events also written to ClickHouse") {
			t.Errorf("demo output:\n%s", out.String())
		}
		var fl struct {
			Data struct {
				Series []struct {
					Code  string `json:"error_code"`
					Total int    `json:"total"`
				} `json:"series"`
			} `json:"data"`
		}
		st, body := getBody(t, base+"api/failures?last=1h")
		if err := json.Unmarshal([]byte(body), &fl); st != 200 || err != nil {
			t.Fatalf("%d %v %s", st, err, body)
		}
		// The demo's table counts its events by code; the chart must agree.
		m := regexp.MustCompile(`by error_code:(.*)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no by error_code line:\n%s", out.String())
		}
		var got []string
		for _, s := range fl.Data.Series {
			got = append(got, s.Code+"="+strconv.Itoa(s.Total))
		}
		var want []string
		// "code=N" fields; ok is no failure, and a code with no call
		// (unknown=0) has no series in the chart.
		for _, f := range regexp.MustCompile(`\b([a-z_]+)=(\d+)`).FindAllStringSubmatch(m[1], -1) {
			if f[1] != "ok" && f[2] != "0" {
				want = append(want, f[0])
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("dashboard failures %v, demo says %v\n%.600s\n%v", got, want, body, ch.Query(t, "SELECT error_code, time, now() FROM "+demoDB+".events LIMIT 5"))
		}
		// The Approvals page its pending answers point at: the demo's
		// requests, the approved one with who decided, read-only.
		st, body = getBody(t, base+"approvals")
		for _, w := range []string{"deletes 5 characters from document d1", "cli:demo-operator"} {
			if st != 200 || !strings.Contains(body, w) {
				t.Errorf("approvals page: %d, want %q in\n%.3000s", st, w, body)
			}
		}
		if code := stop(); code != exitOK {
			t.Errorf("demo exited %d", code)
		}
	})
}
