package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/internal/demotools"
)

// TestRunIntoClickHouse runs the sidecar with events going to a real
// ClickHouse through the spool: calls through the forward proxy, a
// graceful stop, and every event in ClickHouse exactly once with its code,
// in the tables the analysts query.
func TestRunIntoClickHouse(t *testing.T) {
	t.Parallel()
	ch := chtest.Shared(t)
	runIntoClickHouse(t, "addr: ["+ch.Addr()+"]", ch.Database(t), ch)
}

// TestRunIntoClickHouseCluster is TestRunIntoClickHouse on a 2-shard
// ClickHouse cluster (events.clickhouse.cluster): the sidecar creates the
// replicated and Distributed tables and inserts through them; both servers
// read every event once.
func TestRunIntoClickHouseCluster(t *testing.T) {
	t.Parallel()
	c := chtest.StartCluster(t)
	runIntoClickHouse(t, "addr: ["+strings.Join(c.Addrs(), ", ")+"]\n    cluster: "+chtest.ShardsCluster, "e2e", c.Servers...)
}

// runIntoClickHouse runs the sidecar with the events.clickhouse fields
// chYAML (one line, or lines indented by four spaces), makes four calls,
// stops it, and checks the events through every server given.
func runIntoClickHouse(t *testing.T, chYAML, db string, servers ...*chtest.Server) {
	t.Helper()
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	dir := t.TempDir()
	writeFile(t, dir+"/s.json", `{"type":"object","properties":{"term":{"type":"string"},"retmax":{"type":"integer"}},"required":["term"]}`)
	cfg := `
listen: {forward: 127.0.0.1:0}
admin: {listen: 127.0.0.1:0}
events:
  queue: {flush_interval: 20ms}
  spool: {segment_age: 20ms, retry_min: 50ms, retry_max: 200ms}
  clickhouse:
    ` + chYAML + `
    database: ` + db + `
tools:
  - name: pubmed_search
    match: {host: 127.0.0.1, method: GET, path: /esearch}
    schema_file: s.json
`
	r := startRun(t, dir, cfg)
	l := r.running(t)
	if !strings.Contains(l.Events, "clickhouse") {
		t.Errorf("running line says events go to %q", l.Events)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Forward})}}
	for _, q := range []string{"term=a&retmax=3", "term=b", "trem=c", "term=d&retmax=x"} {
		resp, err := client.Get(up.URL() + "/esearch?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("run exited %d; stderr:\n%s", code, r.stderr)
	}
	for i, ch := range servers {
		rows := ch.Query(t, "SELECT error_code, reason, count() FROM "+db+".events FINAL GROUP BY error_code, reason ORDER BY error_code, reason")
		got := ""
		for _, row := range rows {
			got += strings.Join(row, " ") + ";"
		}
		if want := "  2;validation unknown_field 1;validation wrong_type 1;"; got != want {
			t.Errorf("server %d: events by code = %q, want %q", i+1, got, want)
		}
		if n := ch.Query(t, "SELECT uniqExactMerge(calls) FROM "+db+".events_per_minute")[0][0]; n != "4" {
			t.Errorf("server %d: rollup calls = %s, want 4", i+1, n)
		}
	}
}
