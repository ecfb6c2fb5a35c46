package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// BenchmarkClickHouseInsert is the rate events reach the local server in
// batches of 10,000 (the sink's batch size), with the per-minute and
// adoption rollups' materialized views on, as in production. Reported in
// events/s.
func BenchmarkClickHouseInsert(b *testing.B) {
	srv := chtest.Shared(b)
	db := srv.Database(b)
	cfg := clickhouse.Config{Addr: []string{srv.Addr()}, Database: db}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	ch, err := clickhouse.Open(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	for _, rollups := range []bool{true, false} {
		name := "with_rollups"
		if !rollups {
			name = "without_rollups"
			srv.Exec(b, "DROP TABLE `"+db+"`.events_per_minute_mv")
			srv.Exec(b, "DROP TABLE `"+db+"`.envelope_adoption_mv")
		}
		b.Run(name, func(b *testing.B) { benchInsert(b, ch, name) })
	}
}

// benchInsert writes b.N batches of 10,000 events through ch and reports
// events/s.
func benchInsert(b *testing.B, ch *clickhouse.Writer, name string) {
	const batch = 10000
	evs := make([]sink.Event, batch)
	base := time.Now().UTC()
	for i := range evs {
		evs[i] = sink.Event{Tool: fmt.Sprintf("tool_%d", i%20), Sidecar: "bench", Listener: "forward",
			Method: "POST", Host: "upstream.example", PathTemplate: "/v1/x", UpstreamStatus: 200, OK: i%10 != 0,
			ErrorCode: []string{"", "validation"}[min(i%10, 1)], Detail: "Tool 'x' got unknown argument 'y'",
			ViolationPaths: []string{"/y"}, TotalUS: 1200, UpstreamUS: 1000, ConfigVersion: "abc", TraceID: "0123456789abcdef0123456789abcdef"}
	}
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n++ {
		for i := range evs {
			evs[i].EventID = fmt.Sprintf("%s-%d-%d", name, n, i)
			evs[i].Time = base.Add(time.Duration(i) * time.Millisecond)
		}
		if err := ch.WriteEvents(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkClickHouseClusterInsert is the rate events reach the 2-shard
// test cluster (two servers and ZooKeeper on this machine) in batches of
// 10,000 with the rollups on: through the Distributed table (each batch
// acknowledged once both shards have their rows), into one shard's local
// table, and, in the same run for comparison, into one plain server.
func BenchmarkClickHouseClusterInsert(b *testing.B) {
	c := chtest.SharedCluster(b)
	srv := chtest.Shared(b)
	for _, mode := range []string{"one_server", clickhouse.InsertDistributed, clickhouse.InsertLocal} {
		b.Run(mode, func(b *testing.B) {
			var cfg clickhouse.Config
			if mode == "one_server" {
				cfg = clickhouse.Config{Addr: []string{srv.Addr()}, Database: srv.Database(b)}
			} else {
				cfg = clickhouse.Config{Addr: []string{c.Servers[0].Addr()}, Database: c.Database(b), Cluster: chtest.ShardsCluster, Insert: mode}
			}
			if err := cfg.Validate(); err != nil {
				b.Fatal(err)
			}
			ch, err := clickhouse.Open(context.Background(), cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer ch.Close()
			if err := ch.Migrate(context.Background()); err != nil {
				b.Fatal(err)
			}
			benchInsert(b, ch, mode)
		})
	}
}
