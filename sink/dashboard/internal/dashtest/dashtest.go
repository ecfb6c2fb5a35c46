// Package dashtest is what the dashboard's tests share: generated events
// over every tool, agent and error code, a ClickHouse database holding
// them, the read-only user, and the dashboard served over it. The browser
// test, a module of its own (sink/dashboard/browsertest) so chromedp stays
// out of toolgate's go.mod, uses it too. It is test support: nothing the
// binary links imports it.
package dashtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// Now is the pinned present of every test: events lie in the 6 hours before.
var Now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// Codes are every error code the bucketing package has, and "" for success.
var Codes = append([]string{""}, dashboard.ErrorCodes...)

var (
	Tools    = []string{"pubmed_search", "docs_edit", "structure_lookup", "targets_search"}
	Agents   = []string{"agent-a", "agent-b", "agent-c"}
	Sidecars = []string{"sc-1", "sc-2"}
)

// GenEvents makes n events spread over the 6 hours before Now, covering
// every tool, agent, sidecar and error code, with a varied envelope share
// (pubmed_search is past 80%).
func GenEvents(n int) []sink.Event {
	evs := make([]sink.Event, n)
	for i := range evs {
		tool := Tools[i%len(Tools)]
		code := Codes[(i/len(Tools))%len(Codes)]
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
			Time:      Now.Add(-time.Duration(i*7919%(6*3600)+1) * time.Second),
			Sidecar:   Sidecars[i%len(Sidecars)],
			Listener:  "forward",
			Tool:      tool,
			Agent:     Agents[(i/7)%len(Agents)],
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

// Seed creates a database with toolgate's schema (through the sink's own
// migrations) and writes evs into it, plus a replay of the first 50.
func Seed(t testing.TB, srv *chtest.Server, evs []sink.Event) string {
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

// ReaderUser is the read-only user the dashboard runs as in tests.
const ReaderUser = "toolgate_dashboard"

// AddReader adds the read-only user of docs/dashboard.md to the server
// (users.d is merged into users.xml, and the server reloads it within a few
// seconds) and waits until it can log in.
func AddReader(t testing.TB, srv *chtest.Server) {
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
        <` + ReaderUser + `>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>toolgate_readonly</profile>
            <quota>default</quota>
        </` + ReaderUser + `>
    </users>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "toolgate_dashboard.xml"), []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := AsReader(srv, "SELECT 1")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read-only user never became usable: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// AsReader runs sql through the HTTP interface as the read-only user.
func AsReader(srv *chtest.Server, sql string) (string, error) {
	resp, err := http.Post("http://"+srv.HTTPAddr()+"/?user="+ReaderUser, "text/plain", strings.NewReader(sql))
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

// Serve starts the dashboard as the read-only user over db on a real
// listener and returns its base URL.
func Serve(t testing.TB, srv *chtest.Server, db string) string {
	t.Helper()
	d, err := dashboard.Open(dashboard.Config{Addr: []string{srv.Addr()}, Database: db, Username: ReaderUser, Now: func() time.Time { return Now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(func() { hs.Close(); d.Close() })
	return hs.URL
}
