package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/dashboard"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// now is the pinned present of every test: events lie in the 6 hours before.
var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// codes are every error code the bucketing package has, and "" for success.
var codes = append([]string{""}, dashboard.ErrorCodes...)

var (
	tools    = []string{"pubmed_search", "docs_edit", "structure_lookup", "targets_search"}
	agents   = []string{"agent-a", "agent-b", "agent-c"}
	sidecars = []string{"sc-1", "sc-2"}
)

// genEvents makes n events spread over the 6 hours before now, covering
// every tool, agent, sidecar and error code, with a varied envelope share
// (pubmed_search is past 80%).
func genEvents(n int) []sink.Event {
	evs := make([]sink.Event, n)
	for i := range evs {
		tool := tools[i%len(tools)]
		code := codes[(i/len(tools))%len(codes)]
		if i%3 == 0 {
			code = "" // a majority succeeds
		}
		reason, detail := "", ""
		switch code {
		case "validation":
			reason, detail = "unknown_field", fmt.Sprintf("Tool '%s' got unknown argument 'x%d'", tool, i%5)
		case "policy":
			reason, detail = "policy_denied", fmt.Sprintf("Tool '%s' refused by policy 'guard': rule %d", tool, i%3)
		case "rate_limit":
			reason = "status_429"
		case "auth":
			reason = "status_401"
		case "upstream":
			reason = "status_5xx"
		case "unknown":
			reason = "unexpected_status"
		}
		env := (i/4)%10 != 0 // 90% for pubmed_search
		if tool != "pubmed_search" {
			env = i%2 == 0
		}
		evs[i] = sink.Event{
			EventID:   fmt.Sprintf("ev-%07d", i),
			Time:      now.Add(-time.Duration(i*7919%(6*3600)+1) * time.Second),
			Sidecar:   sidecars[i%len(sidecars)],
			Listener:  "forward",
			Tool:      tool,
			Agent:     agents[(i/7)%len(agents)],
			TraceID:   fmt.Sprintf("trace-%07d", i),
			Method:    "GET",
			OK:        code == "",
			ErrorCode: code,
			Reason:    reason,
			Detail:    detail,
			Envelope:  env,
			TotalUS:   int64(1000 + (i%97)*250),
		}
	}
	return evs
}

// seed creates a database with toolgate's schema (through the sink's own
// migrations) and writes evs into it, plus a replay of the first 50.
func seed(t testing.TB, srv *chtest.Server, evs []sink.Event) string {
	t.Helper()
	db := srv.Database(t)
	ch, err := clickhouse.Open(context.Background(), clickhouse.Config{Addr: []string{srv.Addr()}, Database: db, Username: "default",
		DialTimeout: 5 * time.Second, WriteTimeout: time.Minute, RetentionDays: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := 0; i < len(evs); i += 5000 {
		if err := ch.WriteEvents(context.Background(), evs[i:min(i+5000, len(evs))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.WriteEvents(context.Background(), evs[:min(50, len(evs))]); err != nil { // a replayed batch
		t.Fatal(err)
	}
	return db
}

// readerUser is the read-only user the dashboard runs as in tests.
const readerUser = "toolgate_dashboard"

// addReader adds the read-only user of docs/dashboard.md to the server
// (users.d is merged into users.xml, and the server reloads it within a few
// seconds) and waits until it can log in.
func addReader(t testing.TB, srv *chtest.Server) {
	t.Helper()
	dir := filepath.Join(srv.Dir(), "users.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	xml := `<?xml version="1.0"?>
<yandex>
    <profiles>
        <toolgate_readonly>
            <readonly>2</readonly>
        </toolgate_readonly>
    </profiles>
    <users>
        <` + readerUser + `>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>toolgate_readonly</profile>
            <quota>default</quota>
        </` + readerUser + `>
    </users>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "toolgate_dashboard.xml"), []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := asReader(srv, "SELECT 1")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read-only user never became usable: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// asReader runs sql through the HTTP interface as the read-only user.
func asReader(srv *chtest.Server, sql string) (string, error) {
	resp, err := http.Post("http://"+srv.HTTPAddr()+"/?user="+readerUser, "text/plain", strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// serve starts the dashboard as the read-only user over db on a real
// listener and returns its base URL.
func serve(t testing.TB, srv *chtest.Server, db string) string {
	t.Helper()
	d, err := dashboard.Open(dashboard.Config{Addr: []string{srv.Addr()}, Database: db, Username: readerUser, Now: func() time.Time { return now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(func() { hs.Close(); d.Close() })
	return hs.URL
}

// getJSON fetches url and decodes a JSON answer into v; it returns the status.
func getJSON(t testing.TB, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	} else if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %s: not JSON: %s", url, resp.Status, b)
	}
	return resp.StatusCode
}

func atoi(t testing.TB, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
