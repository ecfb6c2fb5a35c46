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
		b.Run(name, func(b *testing.B) {
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
		})
	}
}
