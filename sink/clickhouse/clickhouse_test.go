package clickhouse_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// openCH connects a ClickHouse writer to a fresh database on the shared
// test server, migrating the schema.
func openCH(t testing.TB, srv *chtest.Server) (*clickhouse.Writer, string) {
	t.Helper()
	db := srv.Database(t)
	cfg := clickhouse.Config{Addr: []string{srv.Addr()}, Database: db}
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
	return ch, db
}

func chEvents(n int, tool, code string) []sink.Event {
	base := time.Date(2026, 11, 20, 10, 0, 0, 123456000, time.UTC)
	evs := make([]sink.Event, n)
	for i := range evs {
		evs[i] = sink.Event{
			EventID: fmt.Sprintf("%s-%s-%05d", tool, code, i), Time: base.Add(time.Duration(i) * time.Second),
			Sidecar: "sc-1", Listener: "forward", Tool: tool, Method: "GET", Host: "h", PathTemplate: "/p",
			UpstreamStatus: 200, OK: code == "", ErrorCode: code, ViolationPaths: []string{"/a"},
			Envelope: i%2 == 0, TotalUS: 100, ConfigVersion: "c1",
		}
	}
	return evs
}

func one(t *testing.T, srv *chtest.Server, sql string) string {
	t.Helper()
	rows := srv.Query(t, sql)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%s: rows %v, want one value", sql, rows)
	}
	return rows[0][0]
}

func TestClickHouseMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	db := srv.Database(t)
	cfg := clickhouse.Config{Addr: []string{srv.Addr()}, Database: db}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Two sidecars starting at the same time, then one restarting.
	errc := make(chan error, 3)
	for i := 0; i < 2; i++ {
		go func() {
			ch, err := clickhouse.Open(context.Background(), cfg, nil)
			if err == nil {
				err = ch.Migrate(context.Background())
				ch.Close()
			}
			errc <- err
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	ch, err := clickhouse.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	if got := one(t, srv, "SELECT count(DISTINCT version) FROM `"+db+"`.toolgate_schema_migrations"); got != fmt.Sprint(len(clickhouse.Migrations(db, clickhouse.FlavorLegacy))) {
		t.Errorf("recorded migrations = %s", got)
	}
	tables := srv.Query(t, "SELECT name FROM system.tables WHERE database = '"+db+"' ORDER BY name")
	var names []string
	for _, r := range tables {
		names = append(names, r[0])
	}
	want := "approval_decisions approval_requests envelope_adoption envelope_adoption_mv events events_per_minute events_per_minute_mv toolgate_schema_migrations"
	if strings.Join(names, " ") != want {
		t.Errorf("tables = %v, want %s", names, want)
	}
}

func TestClickHouseWriteAndRollups(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	ctx := context.Background()
	batch := append(chEvents(30, "pubmed_search", ""), chEvents(12, "pubmed_search", "validation")...)
	batch = append(batch, chEvents(5, "docs_edit", "rate_limit")...)
	if err := ch.WriteEvents(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// A replay of the same batch (an ambiguous failure retried) must not
	// change what analysts count.
	if err := ch.WriteEvents(ctx, batch); err != nil {
		t.Fatal(err)
	}
	q := "`" + db + "`"
	if got := one(t, srv, "SELECT count() FROM "+q+".events FINAL"); got != "47" {
		t.Errorf("events FINAL = %s, want 47", got)
	}
	if got := one(t, srv, "SELECT uniqExact(event_id) FROM "+q+".events"); got != "47" {
		t.Errorf("distinct events = %s, want 47", got)
	}
	rows := srv.Query(t, "SELECT tool, error_code, uniqExactMerge(calls) FROM "+q+".events_per_minute GROUP BY tool, error_code ORDER BY tool, error_code")
	got := fmt.Sprint(rows)
	if want := "[[docs_edit rate_limit 5] [pubmed_search  30] [pubmed_search validation 12]]"; got != want {
		t.Errorf("per-minute rollup = %s, want %s", got, want)
	}
	rows = srv.Query(t, "SELECT tool, uniqExactIfMerge(envelope_calls), uniqExactIfMerge(legacy_calls) FROM "+q+".envelope_adoption GROUP BY tool ORDER BY tool")
	if got, want := fmt.Sprint(rows), "[[docs_edit 3 2] [pubmed_search 21 21]]"; got != want {
		t.Errorf("adoption = %s, want %s", got, want)
	}
	// Sub-second time survives in time_us.
	if got := one(t, srv, "SELECT any(time_us) FROM "+q+".events WHERE event_id = 'pubmed_search--00000'"); got != "123456" {
		t.Errorf("time_us = %s, want 123456", got)
	}
}

func TestClickHouseSanitizesBadValues(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	evs := chEvents(3, "t", "upstream")
	evs[0].Detail = strings.Repeat("é", 10000)   // over-long
	evs[1].Agent = "bad\xff\xfeutf8\x00agent"    // invalid UTF-8 and NUL
	evs[2].ErrorCode = "not-a-known-code"        // an unknown enum value
	evs[2].ViolationPaths = make([]string, 1000) // too many paths
	if err := ch.WriteEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	q := "`" + db + "`"
	if got := one(t, srv, "SELECT count() FROM "+q+".events"); got != "3" {
		t.Fatalf("stored %s of 3", got)
	}
	if got := one(t, srv, "SELECT max(length(detail)) FROM "+q+".events"); got == "0" || len(got) > 4 {
		t.Errorf("detail length = %s, want bounded", got)
	}
	if got := one(t, srv, "SELECT agent FROM "+q+".events WHERE event_id = 't-upstream-00001'"); got != "bad\uFFFDutf8agent" {
		t.Errorf("agent = %q", got)
	}
	if ch.Rejected() != 0 {
		t.Errorf("rejected = %d; sanitized values must store", ch.Rejected())
	}
}

// TestClickHouseErrorsKeepData checks that what is wrong with the schema,
// not with rows, fails the batch (so the spool keeps it and retries) and
// drops nothing: the table gone, and a column gone, as while a DBA
// recreates the table from toolgate schema print (CREATE TABLE, then the
// ALTERs that add the newer columns; a batch that came between them was
// once split into rows that were all dropped).
func TestClickHouseErrorsKeepData(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	for _, tc := range []struct{ name, break_, mend string }{
		{"table dropped", "DROP TABLE %s.events", ""},
		{"column missing", "ALTER TABLE %s.events DROP COLUMN budget", "ALTER TABLE %s.events ADD COLUMN budget String"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, db := openCH(t, srv)
			q := "`" + db + "`"
			srv.Exec(t, fmt.Sprintf(tc.break_, q))
			evs := chEvents(8, "t", "")
			err := ch.WriteEvents(context.Background(), evs)
			if err == nil {
				t.Fatal("the batch was taken: want an error, so the spool keeps it")
			}
			if ch.Rejected() != 0 {
				t.Errorf("rejected = %d rows for a schema error, want 0", ch.Rejected())
			}
			if tc.mend == "" {
				return
			}
			srv.Exec(t, fmt.Sprintf(tc.mend, q))
			if err := ch.WriteEvents(context.Background(), evs); err != nil {
				t.Fatalf("the same batch, the column back: %v", err)
			}
			if got := one(t, srv, "SELECT count() FROM "+q+".events"); got != "8" {
				t.Errorf("stored %s rows, want 8", got)
			}
		})
	}
}

// TestClickHouseIsolatesBadRows makes the server refuse one row (a
// materialized column that throws on it) and checks the batch is split
// until that row alone is dropped and counted, and every other row stored.
func TestClickHouseIsolatesBadRows(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	q := "`" + db + "`"
	srv.Exec(t, "ALTER TABLE "+q+".events ADD COLUMN poison UInt8 MATERIALIZED throwIf(tool = 'poison')")
	evs := chEvents(40, "good", "")
	evs[17].Tool = "poison"
	if err := ch.WriteEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if got := one(t, srv, "SELECT count() FROM "+q+".events"); got != "39" {
		t.Errorf("stored %s, want the 39 good rows", got)
	}
	if ch.Rejected() != 1 {
		t.Errorf("rejected = %d, want 1", ch.Rejected())
	}
}

func TestClickHouseRetentionDropsOldPartitions(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	ctx := context.Background()
	old := chEvents(3, "t", "")
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
	if got := one(t, srv, "SELECT count() FROM "+q+".events"); got != "4" {
		t.Errorf("events left = %s, want the 4 recent ones", got)
	}
	if got := one(t, srv, "SELECT uniqExactMerge(calls) FROM "+q+".events_per_minute"); got != "4" {
		t.Errorf("rollup calls left = %s, want 4", got)
	}
}

// TestClickHouseMCPColumns checks migration 4 (the MCP columns, added with
// ALTER TABLE on an existing table): applied again after its record is
// lost, it succeeds, and the columns round-trip.
func TestClickHouseMCPColumns(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	q := "`" + db + "`"
	srv.Exec(t, "TRUNCATE TABLE "+q+".toolgate_schema_migrations")
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatalf("migrating again over existing columns: %v", err)
	}
	evs := chEvents(2, "create_issue", "")
	evs[0].MCPServer, evs[0].RPCMethod, evs[0].RPCID, evs[0].Inspected, evs[0].Outcome = "mcp.example/mcp", "tools/call", `"a-1"`, true, "tool_error"
	if err := ch.WriteEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	got := srv.Query(t, "SELECT mcp_server, rpc_method, rpc_id, inspected, outcome FROM "+q+".events ORDER BY event_id")
	want := [][]string{{"mcp.example/mcp", "tools/call", `"a-1"`, "1", "tool_error"}, {"", "", "", "0", ""}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mcp columns = %q, want %q", got, want)
	}
}

// TestClickHouseBudgetColumn checks migration 9 (the budget column, added
// with ALTER TABLE on an existing table): applied again after its record
// is lost, it succeeds, and the column round-trips.
func TestClickHouseBudgetColumn(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	ch, db := openCH(t, srv)
	q := "`" + db + "`"
	srv.Exec(t, "TRUNCATE TABLE "+q+".toolgate_schema_migrations")
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatalf("migrating again over existing columns: %v", err)
	}
	evs := chEvents(2, "pubmed_search", "policy")
	evs[0].Reason, evs[0].Budget = "budget_exhausted", "session_calls"
	if err := ch.WriteEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	got := srv.Query(t, "SELECT reason, budget FROM "+q+".events ORDER BY event_id")
	if got[0][0] != "budget_exhausted" || got[0][1] != "session_calls" || got[1][1] != "" {
		t.Errorf("budget column = %q", got)
	}
	ms := clickhouse.Migrations(db, clickhouse.FlavorLegacy)
	if v, want := one(t, srv, "SELECT max(version) FROM "+q+".toolgate_schema_migrations"), fmt.Sprint(ms[len(ms)-1].Version); v != want {
		t.Errorf("latest migration recorded = %s, want %s", v, want)
	}
}

// TestSquash checks the squashed migrations a new database takes: no
// ALTER left, every version kept, and each table created with the columns
// the history gives it, in the history's order.
func TestSquash(t *testing.T) {
	addRE := regexp.MustCompile("ALTER TABLE `tg`\\.(\\w+) ADD COLUMN (?:IF NOT EXISTS )?(\\w+)")
	colRE := regexp.MustCompile(`(?m)^    (\w+) `)
	for _, f := range []clickhouse.Flavor{clickhouse.FlavorLegacy, clickhouse.FlavorModern} {
		history := clickhouse.Migrations("tg", f)
		squashed := clickhouse.Squash(history)
		if len(squashed) != len(history) {
			t.Fatalf("flavor %d: %d migrations squashed, want %d", f, len(squashed), len(history))
		}
		want := map[string][]string{} // table: its columns after the history
		for i, m := range history {
			if squashed[i].Version != m.Version || squashed[i].Name != m.Name {
				t.Errorf("flavor %d: migration %d is %d %s", f, i, squashed[i].Version, squashed[i].Name)
			}
			for _, s := range m.Statements {
				if c := regexp.MustCompile("^CREATE TABLE IF NOT EXISTS `tg`\\.(\\w+) ").FindStringSubmatch(s); c != nil {
					for _, col := range colRE.FindAllStringSubmatch(s, -1) {
						want[c[1]] = append(want[c[1]], col[1])
					}
				}
				if a := addRE.FindStringSubmatch(s); a != nil {
					want[a[1]] = append(want[a[1]], a[2])
				}
			}
		}
		got := map[string][]string{}
		for _, m := range squashed {
			for _, s := range m.Statements {
				if strings.HasPrefix(s, "ALTER") {
					t.Errorf("flavor %d: migration %d keeps %q", f, m.Version, s)
				}
				if c := regexp.MustCompile("^CREATE TABLE IF NOT EXISTS `tg`\\.(\\w+) ").FindStringSubmatch(s); c != nil {
					for _, col := range colRE.FindAllStringSubmatch(s, -1) {
						got[c[1]] = append(got[c[1]], col[1])
					}
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("flavor %d: squashed tables\n%v\nwant\n%v", f, got, want)
		}
		if !slices.Contains(got["events"], "budget") || len(got["events"]) != len(want["events"]) {
			t.Errorf("flavor %d: events columns %v", f, got["events"])
		}
	}

	// Folding stops at a change it cannot fold: MODIFY, AFTER, a DROP.
	ms := []clickhouse.Migration{
		{Version: 1, Statements: []string{"CREATE TABLE IF NOT EXISTS `d`.t (\n    a String\n) ENGINE = MergeTree()\nORDER BY a", "CREATE TABLE IF NOT EXISTS `d`.u (\n    a String\n) ENGINE = MergeTree()\nORDER BY a"}},
		{Version: 2, Statements: []string{"ALTER TABLE `d`.t ADD COLUMN b String", "ALTER TABLE `d`.u ADD COLUMN b String AFTER a"}},
		{Version: 3, Statements: []string{"ALTER TABLE `d`.t MODIFY COLUMN b UInt8"}},
		{Version: 4, Statements: []string{"ALTER TABLE `d`.t ADD COLUMN c String", "ALTER TABLE `d`.u ADD COLUMN c String"}},
	}
	got := clickhouse.Squash(ms)
	want := []clickhouse.Migration{
		{Version: 1, Statements: []string{"CREATE TABLE IF NOT EXISTS `d`.t (\n    a String,\n    b String\n) ENGINE = MergeTree()\nORDER BY a", ms[0].Statements[1]}},
		{Version: 2, Statements: []string{ms[1].Statements[1]}},
		{Version: 3, Statements: ms[2].Statements},
		{Version: 4, Statements: ms[3].Statements},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Squash =\n%#v\nwant\n%#v", got, want)
	}
}

// openUnmigrated opens a writer with cfg that leaves migrating to the
// test (Open would migrate all the way).
func openUnmigrated(t *testing.T, cfg clickhouse.Config) *clickhouse.Writer {
	t.Helper()
	off := false
	cfg.Migrate = &off
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ch, err := clickhouse.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// upgradeFrom3 builds cfg's database as a toolgate of migration 3 left
// it, runs atThree, and then migrates it the rest of the way.
func upgradeFrom3(t *testing.T, cfg clickhouse.Config, atThree func()) {
	t.Helper()
	ch := openUnmigrated(t, cfg)
	clickhouse.SetUntil(ch, 3)
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	atThree()
	clickhouse.SetUntil(ch, 0)
	if err := ch.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestClickHouseUpgradeMatchesNew checks that a database an older toolgate
// left (migrations 1 to 3) and then migrated ADD COLUMN by ADD COLUMN has
// exactly the tables and columns of a new database, which takes the
// squashed migrations.
func TestClickHouseUpgradeMatchesNew(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	_, fresh := openCH(t, srv)
	old := srv.Database(t)
	upgradeFrom3(t, clickhouse.Config{Addr: []string{srv.Addr()}, Database: old}, func() {
		if got := one(t, srv, "SELECT count() FROM system.columns WHERE database = '"+old+"' AND table = 'events' AND name = 'mcp_server'"); got != "0" {
			t.Fatalf("after migration 3, events has mcp_server")
		}
	})
	schema := func(db string) string {
		return fmt.Sprint(srv.Query(t, "SELECT table, name, type, default_kind, default_expression FROM system.columns WHERE database = '"+db+"'"),
			srv.Query(t, "SELECT name, engine FROM system.tables WHERE database = '"+db+"' ORDER BY name"),
			srv.Query(t, "SELECT count(DISTINCT version) FROM `"+db+"`.toolgate_schema_migrations"))
	}
	if a, b := schema(old), schema(fresh); a != b {
		t.Errorf("upgraded:\n%s\nnew:\n%s", a, b)
	}
}

// TestClickHouseMigrateSkipsWhatAnotherApplied: a sidecar that finds
// migrations to apply, and meanwhile another sidecar applies them all,
// runs the statements of none of them again (on a cluster each would be
// an ON CLUSTER statement on every server), apart from the one it had
// begun.
func TestClickHouseMigrateSkipsWhatAnotherApplied(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	cfg := clickhouse.Config{Addr: []string{srv.Addr()}, Database: srv.Database(t)}
	slow, fast := openUnmigrated(t, cfg), openUnmigrated(t, cfg)
	var ran []int
	clickhouse.SetBeforeMigration(slow, func(v int) {
		if len(ran) == 0 {
			if err := fast.Migrate(context.Background()); err != nil { // the other sidecar, all the way
				t.Error(err)
			}
		}
		ran = append(ran, v)
	})
	if err := slow.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 {
		t.Errorf("the slower sidecar ran the statements of migrations %v; want only the first, which it had begun", ran)
	}
	if got := one(t, srv, "SELECT count(DISTINCT version) FROM `"+cfg.Database+"`.toolgate_schema_migrations"); got != fmt.Sprint(len(clickhouse.Migrations(cfg.Database, clickhouse.FlavorLegacy))) {
		t.Errorf("recorded migrations = %s", got)
	}
}
