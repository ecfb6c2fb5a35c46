package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// TestPanelsOnCluster serves the dashboard, unchanged, over toolgate's
// schema on a 2-shard ClickHouse cluster (events.clickhouse.cluster) and
// over one server, both seeded with the same events and the same replayed
// batch, and checks every panel answers the same, byte for byte, in
// several views. Only ingest_delay_seconds may differ: it is measured
// from inserted_at, when each server received the rows.
func TestPanelsOnCluster(t *testing.T) {
	srv := chtest.Shared(t)
	evs := genEvents(3000)
	single := serveAs(t, srv.Addr(), seed(t, srv, evs))

	c := chtest.SharedCluster(t)
	db := c.Database(t)
	cfg := clickhouse.Config{Addr: c.Addrs(), Database: db, Cluster: chtest.ShardsCluster, WriteTimeout: time.Minute, RetentionDays: -1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ch, err := clickhouse.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]int{{0, 1500}, {1500, 3000}, {0, 50}} { // the last is the replay seed makes
		if err := ch.WriteEvents(context.Background(), evs[b[0]:b[1]]); err != nil {
			t.Fatal(err)
		}
	}
	var bases []string
	for _, s := range c.Servers {
		bases = append(bases, serveAs(t, s.Addr(), db))
	}
	for _, panel := range []string{"failures", "tools", "messages", "adoption", "freshness", "options"} {
		for _, view := range []string{"", "last=2h", "last=6h&tool=docs_edit", "error_code=rate_limit&agent=agent-b"} {
			want := insertTime.ReplaceAllString(getBody(t, single+"/api/"+panel+"?"+view), "$1")
			for i, base := range bases {
				if got := insertTime.ReplaceAllString(getBody(t, base+"/api/"+panel+"?"+view), "$1"); got != want {
					t.Errorf("%s?%s through server %d of the cluster:\n got %s\nwant %s (one server)", panel, view, i+1, got, want)
				}
			}
		}
	}
}

// insertTime matches the one value that depends on when a server
// received the rows.
var insertTime = regexp.MustCompile(`("ingest_delay_seconds":)\d+`)

// serveAs serves the dashboard over db at addr as the default user.
func serveAs(t *testing.T, addr, db string) string {
	t.Helper()
	d, err := dashboard.Open(dashboard.Config{Addr: []string{addr}, Database: db, Username: "default", Now: func() time.Time { return now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(func() { hs.Close(); d.Close() })
	return hs.URL
}

// getBody fetches url and returns its body; anything but 200 fails.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %v: %s", url, resp.Status, err, b)
	}
	return string(b)
}
