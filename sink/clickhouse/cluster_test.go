package clickhouse_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// Cluster tests: toolgate's schema on a real 2-server ClickHouse cluster
// with a real ZooKeeper (internal/chtest), in both layouts the test
// cluster defines: two shards of one replica, and one shard of two
// replicas.

// shardsConfig is a sidecar's configuration for the 2-shard cluster.
func shardsConfig(c *chtest.Cluster, db string) clickhouse.Config {
	return clickhouse.Config{Addr: c.Addrs(), Database: db, Cluster: chtest.ShardsCluster}
}

// replicasConfig is a sidecar's configuration for the 2-replica cluster:
// its paths have no {shard}, as the servers' shard macros belong to the
// 2-shard cluster.
func replicasConfig(c *chtest.Cluster, db string) clickhouse.Config {
	return clickhouse.Config{Addr: c.Addrs(), Database: db, Cluster: chtest.ReplicasCluster,
		ReplicaPath: "/clickhouse/tables/{cluster}/{database}/{table}"}
}

// openClusterCH opens and migrates a writer with cfg.
func openClusterCH(t *testing.T, cfg clickhouse.Config) *clickhouse.Writer {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ch, err := clickhouse.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestClusterMigrationsTransform(t *testing.T) {
	l := clickhouse.Layout{Cluster: "c"}
	ms, err := l.Migrations(clickhouse.Migrations("tg", clickhouse.FlavorLegacy))
	if err != nil {
		t.Fatalf("every migration must run on a cluster: %v", err)
	}
	for _, m := range ms {
		for _, s := range m.Statements {
			if !strings.Contains(s, " ON CLUSTER c ") && !strings.HasSuffix(s, " ON CLUSTER c") {
				t.Errorf("migration %d: %q does not run ON CLUSTER", m.Version, s)
			}
			if strings.Contains(s, "ENGINE = ReplacingMergeTree") || strings.Contains(s, "ENGINE = AggregatingMergeTree") {
				t.Errorf("migration %d: %q is not replicated", m.Version, s)
			}
		}
	}
	for _, bad := range []string{
		"CREATE TABLE IF NOT EXISTS `tg`.t (a UInt8) ENGINE = Memory",
		"INSERT INTO `tg`.events (event_id) VALUES ('x')",
		"RENAME TABLE `tg`.a TO `tg`.b",
	} {
		_, err := l.Migrations([]clickhouse.Migration{{Version: 99, Name: "bad", Statements: []string{bad}}})
		if !errors.Is(err, clickhouse.ErrClusterStatement) {
			t.Errorf("%q: err = %v, want ErrClusterStatement", bad, err)
		}
	}
	same, err := clickhouse.Layout{}.Migrations(clickhouse.Migrations("tg", clickhouse.FlavorLegacy))
	if err != nil || fmt.Sprint(same) != fmt.Sprint(clickhouse.Migrations("tg", clickhouse.FlavorLegacy)) {
		t.Errorf("one server: migrations changed (err %v)", err)
	}
}

func TestClusterConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  clickhouse.Config
		want string // in the error; "" for none
	}{
		{"one server", clickhouse.Config{}, ""},
		{"cluster defaults", clickhouse.Config{Cluster: "prod"}, ""},
		{"insert local", clickhouse.Config{Cluster: "prod", Insert: "local"}, ""},
		{"insert without cluster", clickhouse.Config{Insert: "local"}, "clickhouse.insert"},
		{"path without cluster", clickhouse.Config{ReplicaPath: "/x/{table}"}, "clickhouse.replica_path"},
		{"bad insert", clickhouse.Config{Cluster: "prod", Insert: "both"}, "clickhouse.insert"},
		{"bad cluster name", clickhouse.Config{Cluster: "prod; DROP"}, "clickhouse.cluster"},
		{"path without table", clickhouse.Config{Cluster: "prod", ReplicaPath: "/clickhouse/{shard}"}, "clickhouse.replica_path"},
		{"quote in path", clickhouse.Config{Cluster: "prod", ReplicaPath: "/a'/{table}"}, "clickhouse.replica_path"},
		{"quote in name", clickhouse.Config{Cluster: "prod", ReplicaName: "{replica}'"}, "clickhouse.replica_name"},
		{"short ddl timeout", clickhouse.Config{Cluster: "prod", DDLTimeout: time.Millisecond}, "clickhouse.ddl_timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one about %s", err, tc.want)
			}
			if tc.want == "" && tc.cfg.Cluster != "" && (tc.cfg.ReplicaPath != clickhouse.DefaultReplicaPath ||
				tc.cfg.ReplicaName != clickhouse.DefaultReplicaName || tc.cfg.DDLTimeout != clickhouse.DefaultDDLTimeout || tc.cfg.Insert == "") {
				t.Errorf("defaults not applied: %+v", tc.cfg)
			}
		})
	}
}

// clusterTables lists the tables of db on a server.
func clusterTables(t *testing.T, s *chtest.Server, db string) string {
	t.Helper()
	var names []string
	for _, r := range s.Query(t, "SELECT name FROM system.tables WHERE database = '"+db+"' ORDER BY name") {
		names = append(names, r[0])
	}
	return strings.Join(names, " ")
}

// wantClusterTables migrates a database on one server and returns the
// tables a cluster should have for it: each MergeTree table also as
// NAME_local, behind a Distributed NAME, and the rest (views, the
// migrations table) as they are. Derived, so migrations added later need
// no edit here.
func wantClusterTables(t *testing.T) string {
	t.Helper()
	srv := chtest.Shared(t)
	_, db := openCH(t, srv)
	var names []string
	for _, r := range srv.Query(t, "SELECT name, engine FROM system.tables WHERE database = '"+db+"'") {
		names = append(names, r[0])
		if strings.HasSuffix(r[1], "MergeTree") && r[0] != "toolgate_schema_migrations" {
			names = append(names, r[0]+clickhouse.LocalSuffix)
		}
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// TestClusterMigrate migrates from two sidecars at once, one on each
// server, then once more, in both layouts, and checks every server has
// the whole schema and every migration recorded once.
func TestClusterMigrate(t *testing.T) {
	c := chtest.SharedCluster(t)
	for name, config := range map[string]func(*chtest.Cluster, string) clickhouse.Config{"shards": shardsConfig, "replicas": replicasConfig} {
		t.Run(name, func(t *testing.T) {
			db := c.Database(t)
			var wg sync.WaitGroup
			errs := make([]error, len(c.Servers))
			for i, s := range c.Servers {
				cfg := config(c, db)
				cfg.Addr = []string{s.Addr()}
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ch, err := clickhouse.Open(context.Background(), cfg, nil)
					if err == nil {
						errs[i] = ch.Migrate(context.Background())
						ch.Close()
					} else {
						errs[i] = err
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				// Two replicas marking one ON CLUSTER statement done can
				// end a server's DDL worker (18.16): the operator's way
				// on is to restart it and migrate again, which the
				// migration below does.
				if c.Heal(t) == 0 {
					t.Fatal(err)
				}
				t.Logf("migrating again after restarting a server: %v", err)
			}
			openClusterCH(t, config(c, db)) // a restart finds everything in place
			want := wantClusterTables(t)
			n := fmt.Sprint(len(clickhouse.Migrations(db, clickhouse.FlavorLegacy)))
			for i, s := range c.Servers {
				if got := clusterTables(t, s, db); got != want {
					t.Errorf("server %d tables = %s, want %s", i+1, got, want)
				}
				if got := one(t, s, "SELECT count(DISTINCT version) FROM `"+db+"`.toolgate_schema_migrations"); got != n {
					t.Errorf("server %d has %s migrations recorded, want %s", i+1, got, n)
				}
				engine := one(t, s, "SELECT engine FROM system.tables WHERE database = '"+db+"' AND name = 'events'")
				if engine != "Distributed" {
					t.Errorf("server %d: events is %s, want Distributed", i+1, engine)
				}
				cols := one(t, s, "SELECT count() FROM system.columns WHERE database = '"+db+"' AND table = 'events'")
				if lcols := one(t, s, "SELECT count() FROM system.columns WHERE database = '"+db+"' AND table = 'events_local'"); cols != lcols {
					t.Errorf("server %d: events has %s columns, events_local %s", i+1, cols, lcols)
				}
			}
		})
	}
}

// TestClusterUpgrade migrates a database an older toolgate left on the
// 2-replica cluster (migrations 1 to 3) ADD COLUMN by ADD COLUMN, from one
// sidecar, and checks that every server then has the tables and columns
// of a new database (which takes the squashed migrations).
//
// The upgrade runs ALTERs of replicated tables ON CLUSTER, on which 18.16
// sometimes stops a server's DDL worker for good (two replicas both mark
// the ALTER done; chtest.Server.DDLWorkerEnded): so it has a cluster of its
// own, which no other test shares, and when that happens it does what
// docs/scale.md tells an operator to (restart that server, migrate again)
// and goes on.
func TestClusterUpgrade(t *testing.T) {
	c := chtest.StartCluster(t)
	fresh := c.Database(t)
	openClusterCH(t, replicasConfig(c, fresh))
	old := c.Database(t)
	cfg := replicasConfig(c, old)
	cfg.DDLTimeout = 20 * time.Second // a stopped worker costs the test this much
	ch := openUnmigrated(t, cfg)
	migrate := func() {
		t.Helper()
		for attempt := 1; ; attempt++ {
			err := ch.Migrate(context.Background())
			if err == nil {
				return
			}
			if attempt == 3 {
				t.Fatal(err)
			}
			if c.Heal(t) == 0 {
				t.Fatal(err)
			}
			t.Logf("a server's DDL worker stopped (%v); restarted it, migrating again, as docs/scale.md says", err)
		}
	}
	clickhouse.SetUntil(ch, 3)
	migrate()
	for i, s := range c.Servers {
		if got := one(t, s, "SELECT count() FROM system.columns WHERE database = '"+old+"' AND table = 'events_local' AND name = 'mcp_server'"); got != "0" {
			t.Fatalf("server %d: after migration 3, events_local has mcp_server", i+1)
		}
	}
	clickhouse.SetUntil(ch, 0)
	migrate()
	schema := func(s *chtest.Server, db string) string {
		return fmt.Sprint(s.Query(t, "SELECT table, name, type, default_kind, default_expression FROM system.columns WHERE database = '"+db+"'"),
			clusterTables(t, s, db))
	}
	for i, s := range c.Servers {
		if a, b := schema(s, old), schema(s, fresh); a != b {
			t.Errorf("server %d: upgraded:\n%s\nnew:\n%s", i+1, a, b)
		}
	}
}

// TestClusterWriteReplayDedup writes a batch and replays it, through the
// Distributed table and into one shard, and checks that every server
// reads each event once, in the events and in the rollups.
func TestClusterWriteReplayDedup(t *testing.T) {
	c := chtest.SharedCluster(t)
	for _, insert := range []string{clickhouse.InsertDistributed, clickhouse.InsertLocal} {
		t.Run(insert, func(t *testing.T) {
			db := c.Database(t)
			cfg := shardsConfig(c, db)
			cfg.Insert = insert
			if insert == clickhouse.InsertLocal {
				cfg.Addr = []string{c.Servers[1].Addr()} // a sidecar beside shard 2
			}
			ch := openClusterCH(t, cfg)
			batch := append(chEvents(30, "pubmed_search", ""), chEvents(12, "pubmed_search", "validation")...)
			batch = append(batch, chEvents(5, "docs_edit", "rate_limit")...)
			ctx := context.Background()
			for i := 0; i < 2; i++ { // the second is a replay
				if err := ch.WriteEvents(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}
			q := "`" + db + "`"
			var local []string
			for i, s := range c.Servers {
				if d, f, _ := counts(t, s, db); d != "47" || f != "47" {
					t.Errorf("server %d reads distinct %s, FINAL %s; want 47", i+1, d, f)
				}
				rows := s.Query(t, "SELECT tool, error_code, uniqExactMerge(calls) FROM "+q+".events_per_minute GROUP BY tool, error_code ORDER BY tool, error_code")
				if got, want := fmt.Sprint(rows), "[[docs_edit rate_limit 5] [pubmed_search  30] [pubmed_search validation 12]]"; got != want {
					t.Errorf("server %d per-minute rollup = %s, want %s", i+1, got, want)
				}
				local = append(local, one(t, s, "SELECT uniqExact(event_id) FROM "+q+".events_local"))
			}
			switch insert {
			case clickhouse.InsertDistributed:
				if local[0] == "0" || local[1] == "0" {
					t.Errorf("shards hold %v events; the Distributed table must spread them", local)
				}
			case clickhouse.InsertLocal:
				if local[0] != "0" || local[1] != "47" {
					t.Errorf("shards hold %v events; a local insert must keep them on shard 2", local)
				}
			}
		})
	}
}

// TestClusterDocumentedQueries runs every named query of docs/queries.md,
// as written, on the 2-shard cluster (through each server) and on one
// server, over the same events with the same replays, and checks the
// answers are the same.
func TestClusterDocumentedQueries(t *testing.T) {
	srv := chtest.Shared(t)
	single, sdb := openCH(t, srv)
	c := chtest.SharedCluster(t)
	cdb := c.Database(t)
	multi := openClusterCH(t, shardsConfig(c, cdb))
	ctx := context.Background()
	for _, w := range []*clickhouse.Writer{single, multi} {
		docs, mcp, scope, ans, defs := docEvents(), mcpEvents(), limitScopeEvents(), answerEvents(), definitionEvents()
		for _, b := range [][]sink.Event{docs, docs[10:25], mcp, mcp[:9], scope, scope[:7], ans, ans[:3], defs, defs[:3]} { // five replays
			if err := w.WriteEvents(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	queries := docQueries(t)
	if len(queries) == 0 {
		t.Fatal("docs/queries.md has no named queries")
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			want, err := srv.TryQuery(docFill(sdb, q))
			if err != nil {
				t.Fatalf("one server: %v", err)
			}
			if len(want) == 0 {
				t.Fatalf("one server answers no rows; the comparison would prove nothing")
			}
			for i, s := range c.Servers {
				got, err := s.TryQuery(docFill(cdb, q))
				if err != nil {
					t.Fatalf("cluster, server %d: %v", i+1, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("cluster, server %d:\n got %v\nwant %v (one server)", i+1, got, want)
				}
			}
		})
	}
}

// TestClusterRetention drops old daily partitions on every shard.
func TestClusterRetention(t *testing.T) {
	c := chtest.SharedCluster(t)
	db := c.Database(t)
	ch := openClusterCH(t, shardsConfig(c, db))
	ctx := context.Background()
	old := chEvents(40, "t", "")
	for i := range old {
		old[i].Time = time.Date(2026, 10, 1, 9, 0, i, 0, time.UTC)
	}
	if err := ch.WriteEvents(ctx, append(old, chEvents(4, "t", "")...)); err != nil {
		t.Fatal(err)
	}
	n, err := ch.DropPartitionsBefore(ctx, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 { // one old day in each of the three day-partitioned tables
		t.Errorf("dropped %d partitions, want 3", n)
	}
	q := "`" + db + "`"
	for i, s := range c.Servers {
		if got := one(t, s, "SELECT count() FROM "+q+".events_local WHERE time < '2026-11-01 00:00:00'"); got != "0" {
			t.Errorf("server %d keeps %s old events", i+1, got)
		}
		if got := one(t, s, "SELECT uniqExact(event_id) FROM "+q+".events"); got != "4" {
			t.Errorf("server %d reads %s events, want the 4 recent ones", i+1, got)
		}
	}
}

// Cluster fault drills: a sidecar's spool shipping into a cluster whose
// parts fail mid-stream. Each owns its cluster and asserts exact counts:
// every event once in what analysts count, none lost, none duplicated.

// streamWhile writes n events in batches of 50, a few milliseconds apart,
// and runs fault after the first fifth of them: a fault in mid-stream.
func streamWhile(t *testing.T, p *chPipe, prefix string, n int, fault func()) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		if i == n/5 {
			fault()
		}
		p.write(t, fmt.Sprintf("%s-%d", prefix, i), min(50, n-i))
		time.Sleep(5 * time.Millisecond)
	}
}

// exactly checks that every server (or those given) reads want events
// once through the Distributed table, and that the rollup counts them once.
func exactly(t *testing.T, servers []*chtest.Server, db string, want int) {
	t.Helper()
	w := fmt.Sprint(want)
	for i, s := range servers {
		if d, f, raw := counts(t, s, db); d != w || f != w {
			t.Errorf("server %d reads distinct %s, FINAL %s (raw rows %s); want every one of %s events once", i+1, d, f, raw, w)
		}
		if got := one(t, s, "SELECT uniqExactMerge(calls) FROM `"+db+"`.events_per_minute"); got != w {
			t.Errorf("server %d: the per-minute rollup counts %s calls, want %s", i+1, got, w)
		}
	}
}

// replicated waits until every replica's local tables hold want distinct
// events, in the events and in the per-minute rollup (replication catches
// up in the background; each table's own, so one may lag the other). A
// replica restarted right after a kill resumes replicating once its old
// ZooKeeper session has expired (10 s) and its next check comes (every
// 5 s in the test cluster): the 90 s allow for that on a busy machine.
func replicated(t *testing.T, servers []*chtest.Server, db string, want int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	w := fmt.Sprint(want)
	for i, s := range servers {
		for {
			events := one(t, s, "SELECT uniqExact(event_id) FROM `"+db+"`.events_local")
			rollup := one(t, s, "SELECT uniqExactMerge(calls) FROM `"+db+"`.events_per_minute_local")
			if events == w && rollup == w {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d holds %s events and a rollup of %s 90s after the spool drained, want %d", i+1, events, rollup, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestClusterFaultReplicaKilled kills the replica the sidecar is connected
// to in mid-stream (SIGKILL: acknowledgements in flight are lost), lets
// the sidecar fail over to the other replica, and brings the killed one
// back: both replicas end with every event once.
func TestClusterFaultReplicaKilled(t *testing.T) {
	c := chtest.StartCluster(t)
	cfg := replicasConfig(c, "replicakill")
	p := openPipeConfig(t, cfg, t.TempDir())
	p.write(t, "before", 500)
	p.drained(t, 30*time.Second)
	streamWhile(t, p, "during", 1500, func() { c.Servers[0].Kill() })
	p.drained(t, 60*time.Second) // through the other replica
	// Not checked here: the other replica may still lack a batch the
	// killed one acknowledged just before it died and had not replicated
	// yet; it arrives once the killed one is back, checked below.
	c.Servers[0].Restart(t)
	p.write(t, "after", 300)
	p.drained(t, 60*time.Second)
	replicated(t, c.Servers, "replicakill", 2300)
	exactly(t, c.Servers, "replicakill", 2300)
	if p.ch.Rejected() != 0 {
		t.Errorf("rejected = %d; a replica away must not drop rows as bad", p.ch.Rejected())
	}
}

// TestClusterFaultZooKeeperRestarted kills ZooKeeper in mid-stream: the
// replicated tables refuse inserts, the spool holds the events; ZooKeeper
// comes back and the spool ships them.
func TestClusterFaultZooKeeperRestarted(t *testing.T) {
	c := chtest.StartCluster(t)
	p := openPipeConfig(t, shardsConfig(c, "zkrestart"), t.TempDir())
	p.write(t, "before", 500)
	p.drained(t, 30*time.Second)
	streamWhile(t, p, "during", 1500, func() { c.ZooKeeper.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for p.spool.Status().ShipErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if st := p.spool.Status(); st.PendingEvents == 0 || st.ShipErrors == 0 {
		t.Errorf("with ZooKeeper away, status = %+v; want pending events and a ship error", st)
	}
	c.ZooKeeper.Restart(t)
	p.write(t, "after", 300)
	p.drained(t, 120*time.Second)
	exactly(t, c.Servers, "zkrestart", 2300)
	if p.ch.Rejected() != 0 {
		t.Errorf("rejected = %d; ZooKeeper away must not drop rows as bad", p.ch.Rejected())
	}
}

// TestClusterFaultShardAway stops shard 2 while the sidecar inserts
// through shard 1's Distributed table: the insert waits for every shard,
// so it fails, and the spool holds the events until shard 2 is back.
func TestClusterFaultShardAway(t *testing.T) {
	c := chtest.StartCluster(t)
	cfg := shardsConfig(c, "shardaway")
	cfg.Addr = []string{c.Servers[0].Addr()}
	p := openPipeConfig(t, cfg, t.TempDir())
	p.write(t, "before", 500)
	p.drained(t, 30*time.Second)
	streamWhile(t, p, "during", 1500, func() { c.Servers[1].Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for p.spool.Status().ShipErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := p.spool.Status()
	if st.PendingEvents == 0 || st.ShipErrors == 0 || st.LastShipError == "" {
		t.Errorf("with shard 2 away, status = %+v; want pending events and a visible ship error", st)
	}
	t.Logf("with shard 2 away: %d events pending, last error: %s", st.PendingEvents, st.LastShipError)
	ddlWaitsForServer(t, c)
	c.Servers[1].Restart(t)
	p.write(t, "after", 300)
	p.drained(t, 60*time.Second)
	exactly(t, c.Servers, "shardaway", 2300)
	if p.ch.Rejected() != 0 {
		t.Errorf("rejected = %d; a shard away must not drop rows as bad", p.ch.Rejected())
	}
}

// ddlWaitsForServer migrates a new database while shard 2 is away, with a
// read timeout (WriteTimeout) shorter than the DDL timeout: the sidecar
// waits for the server's own answer, which says the statement is still
// pending on a host, instead of cutting the connection at the read
// timeout, and the server waited the DDL timeout configured (an odd
// number of seconds, which 18.16 once read as "forever").
func ddlWaitsForServer(t *testing.T, c *chtest.Cluster) {
	t.Helper()
	cfg := shardsConfig(c, "ddlwait")
	cfg.Addr = []string{c.Servers[0].Addr()}
	cfg.WriteTimeout, cfg.DDLTimeout = time.Second, 3*time.Second // odd: see ddlSettings
	// Migrate is called below, where its error shows.
	ch := openUnmigrated(t, cfg)
	start := time.Now()
	err := ch.Migrate(context.Background())
	if err == nil {
		t.Fatal("Migrate created a new database ON CLUSTER with shard 2 away; want the server's DDL timeout")
	}
	took := time.Since(start)
	var ex *chgo.Exception
	want := fmt.Sprintf("distributed_ddl_task_timeout (=%d)", int(cfg.DDLTimeout/time.Second))
	if !errors.As(err, &ex) || ex.Code != 159 || !strings.Contains(ex.Message, want) {
		t.Fatalf("after %v: Migrate error = %v; want the server's TIMEOUT_EXCEEDED (159) saying %q", took, err, want)
	}
	if !strings.Contains(err.Error(), "1 of the servers that have not run it are not working on it") {
		t.Errorf("Migrate error = %v; want it to say that the server away is not working on it, and what to do", err)
	}
	t.Logf("Migrate with shard 2 away ended after %v: %v", took, err)
}

// TestClusterAcknowledgementLost loses the acknowledgement of one insert
// through the Distributed table after both shards stored its rows: the
// spool sends the batch again, and every server still counts each event
// once, in the events and in the rollup.
func TestClusterAcknowledgementLost(t *testing.T) {
	c := chtest.SharedCluster(t)
	db := c.Database(t)
	cut := chtest.NewCuttingProxy(t, c.Servers[0].Addr())
	cfg := shardsConfig(c, db)
	cfg.Addr = []string{cut.Addr()}
	p := openPipeConfig(t, cfg, t.TempDir())
	p.write(t, "warm", 50)
	p.drained(t, 30*time.Second)
	var once sync.Once
	clickhouse.SetBeforeSend(p.ch, func() { once.Do(cut.CutNextReply) })
	p.write(t, "ambiguous", 200)
	p.drained(t, 60*time.Second)
	if cut.Cuts() != 1 {
		t.Fatalf("cuts = %d, want 1", cut.Cuts())
	}
	if st := p.spool.Status(); st.ShipErrors == 0 {
		t.Errorf("no ship error recorded: the lost acknowledgement did not happen")
	}
	exactly(t, c.Servers, db, 250)
}

// FuzzClusterDDL feeds the configuration's cluster fields and database
// name, which reach the DDL, through Validate: whatever it accepts must
// give statements whose string literals and quoted names are closed, the
// names appearing only where they belong.
func FuzzClusterDDL(f *testing.F) {
	f.Add("events", "toolgate", "/clickhouse/tables/{cluster}/{shard}/{database}/{table}", "{replica}")
	f.Add("c", "to'olgate", "/x/{table}", "{replica}")
	f.Add("c", "db", "/x/{table}'); DROP TABLE t; --", "r")
	f.Add("c-1_b", "d\\b", "/{database}/{table}/\\", "{shard}-{replica}")
	f.Fuzz(func(t *testing.T, cluster, db, path, name string) {
		cfg := clickhouse.Config{Cluster: cluster, Database: db, ReplicaPath: path, ReplicaName: name}
		if cfg.Validate() != nil {
			return
		}
		l := clickhouse.Layout{Cluster: cfg.Cluster, ReplicaPath: cfg.ReplicaPath, ReplicaName: cfg.ReplicaName}
		stmts, err := l.SchemaDDL(cfg.Database, clickhouse.FlavorLegacy)
		if err != nil {
			t.Fatalf("a valid configuration gives no DDL: %v", err)
		}
		for _, s := range stmts {
			if !balanced(s) {
				t.Fatalf("unbalanced quotes in %q", s)
			}
		}
	})
}

// balanced reports whether every string literal ('...') and quoted name
// (`...`) in s is closed, backslash escapes honoured.
func balanced(s string) bool {
	var in byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in != 0 && c == '\\':
			i++
		case in != 0 && c == in:
			in = 0
		case in == 0 && (c == '\'' || c == '`'):
			in = c
		}
	}
	return in == 0
}

// TestClusterDDLWorkerStopped stops both servers' distributed DDL workers
// the way 18.16 stops one, with a ZooKeeper error they do not expect (here
// their queue's node removed under them), and checks what an operator
// sees and does, as docs/scale.md says: the migration fails with the
// servers' timeout and toolgate's hint, the servers' logs say the workers
// ended, and once the servers are restarted the migration goes through.
func TestClusterDDLWorkerStopped(t *testing.T) {
	c := chtest.StartCluster(t)
	c.ZooKeeper.DeleteAll(t, "/clickhouse/task_queue/ddl")
	deadline := time.Now().Add(30 * time.Second)
	for i, s := range c.Servers {
		for !s.DDLWorkerEnded() {
			if time.Now().After(deadline) {
				t.Fatalf("server %d's DDL worker did not stop after its queue's node was removed", i+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cfg := replicasConfig(c, c.Database(t))
	cfg.DDLTimeout = 4 * time.Second
	// Migrate is called below, where its error shows.
	ch := openUnmigrated(t, cfg)
	err := ch.Migrate(context.Background())
	if err == nil {
		t.Fatal("Migrate ran ON CLUSTER statements with no DDL worker running")
	}
	if !strings.Contains(err.Error(), "2 of the servers that have not run it are not working on it") || !strings.Contains(err.Error(), "restart that server") {
		t.Fatalf("Migrate error = %v; want it to say that neither server works on it, and what to do", err)
	}
	for _, s := range c.Servers {
		s.Restart(t)
	}
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}
