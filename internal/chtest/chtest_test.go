package chtest_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolgate/toolgate/internal/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// dial opens a native protocol connection through clickhouse-go, the client the
// sink uses.
func dial(t *testing.T, addr, db string) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:         []string{addr},
		Auth:         clickhouse.Auth{Database: db},
		DialTimeout:  2 * time.Second,
		ReadTimeout:  10 * time.Second,
		MaxOpenConns: 1,
	})
	if err != nil {
		t.Fatalf("open %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// insert sends one batch of (id, name) rows with an explicit column list.
func insert(ctx context.Context, conn driver.Conn, table string, ids ...uint64) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (id, name)")
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := batch.Append(id, "row"); err != nil {
			return err
		}
	}
	return batch.Send()
}

const createTable = " (id UInt64, name String) ENGINE = MergeTree ORDER BY id"

func TestQuery(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	tests := []struct {
		name string
		sql  string
		want [][]string
	}{
		{"one value", "SELECT 1", [][]string{{"1"}}},
		{"rows and columns", "SELECT number, toString(number * 2) FROM system.numbers LIMIT 3",
			[][]string{{"0", "0"}, {"1", "2"}, {"2", "4"}}},
		{"escaped values", `SELECT 'a	b', 'line1
line2', 'back\\slash', 'it''s'`,
			[][]string{{"a\tb", "line1\nline2", `back\slash`, "it's"}}},
		{"null and array", "SELECT NULL, [1, 2]", [][]string{{`\N`, "[1,2]"}}},
		{"empty string", "SELECT ''", [][]string{{""}}},
		{"no rows", "SELECT 1 WHERE 0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := srv.Query(t, tt.sql); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("Query(%q) = %q, want %q", tt.sql, got, tt.want)
			}
		})
	}
	t.Run("version", func(t *testing.T) {
		rows := srv.Query(t, "SELECT version()")
		if len(rows) != 1 || !regexp.MustCompile(`^\d+\.\d+`).MatchString(rows[0][0]) {
			t.Fatalf("SELECT version() = %q, want one version", rows)
		}
		t.Logf("clickhouse-server %s at %s", rows[0][0], srv.Addr())
	})
	t.Run("error", func(t *testing.T) {
		if _, err := srv.TryQuery("SELECT no_such_column"); err == nil {
			t.Fatal("TryQuery of a bad query returned no error")
		}
	})
}

func TestNativeProtocol(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	db := srv.Database(t)
	srv.Exec(t, "CREATE TABLE "+db+".t"+createTable)
	ctx := t.Context()
	if err := insert(ctx, dial(t, srv.Addr(), db), "t", 1, 2, 3); err != nil {
		t.Fatalf("insert over %s: %v", srv.Addr(), err)
	}
	if got := srv.Query(t, "SELECT count() FROM "+db+".t"); got[0][0] != "3" {
		t.Fatalf("count = %s, want 3", got[0][0])
	}
}

func TestDatabase(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	a, b := srv.Database(t), srv.Database(t)
	if a == b {
		t.Fatalf("Database returned %q twice", a)
	}
	for i, db := range []string{a, b} {
		srv.Exec(t, "CREATE TABLE "+db+".t"+createTable)
		for j := 0; j <= i; j++ {
			srv.Exec(t, "INSERT INTO "+db+".t (id, name) VALUES (1, '"+db+"')")
		}
	}
	for i, db := range []string{a, b} {
		got := srv.Query(t, "SELECT count(), any(name) FROM "+db+".t")
		if want := []string{string(rune('1' + i)), db}; !slices.Equal(got[0], want) {
			t.Errorf("%s.t: count, name = %q, want %q", db, got[0], want)
		}
	}
}

// TestKillRestart kills a server holding MergeTree data, checks that it is
// down for both interfaces, restarts it and finds the data.
func TestKillRestart(t *testing.T) {
	t.Parallel()
	srv := chtest.Start(t)
	db := srv.Database(t)
	srv.Exec(t, "CREATE TABLE "+db+".t"+createTable)
	ctx := t.Context()
	if err := insert(ctx, dial(t, srv.Addr(), db), "t", 1, 2, 3); err != nil {
		t.Fatalf("insert: %v", err)
	}

	srv.Kill()
	if _, err := srv.TryQuery("SELECT 1"); err == nil {
		t.Fatal("HTTP query after Kill succeeded")
	}
	if err := dial(t, srv.Addr(), db).Ping(ctx); err == nil {
		t.Fatal("native Ping after Kill succeeded")
	}

	began := time.Now()
	srv.Restart(t)
	t.Logf("restart took %v", time.Since(began).Round(time.Millisecond))
	if got := srv.Query(t, "SELECT count(), sum(id) FROM "+db+".t"); !slices.Equal(got[0], []string{"3", "6"}) {
		t.Fatalf("after Restart: count, sum = %q, want [3 6]", got[0])
	}
	if err := insert(ctx, dial(t, srv.Addr(), db), "t", 4); err != nil {
		t.Fatalf("native insert after Restart: %v", err)
	}

	began = time.Now()
	srv.Stop()
	t.Logf("stop took %v", time.Since(began).Round(time.Millisecond))
	if _, err := srv.TryQuery("SELECT 1"); err == nil {
		t.Fatal("query after Stop succeeded")
	}
	srv.Restart(t)
	if got := srv.Query(t, "SELECT count() FROM "+db+".t"); got[0][0] != "4" {
		t.Fatalf("after Stop and Restart: count = %s, want 4", got[0][0])
	}
}

// TestCuttingProxy proves the lost acknowledgement is real: the client's Send
// fails, yet the server has committed the row.
func TestCuttingProxy(t *testing.T) {
	t.Parallel()
	srv := chtest.Shared(t)
	db := srv.Database(t)
	srv.Exec(t, "CREATE TABLE "+db+".t"+createTable)
	proxy := chtest.NewCuttingProxy(t, srv.Addr())
	conn := dial(t, proxy.Addr(), db)
	ctx := t.Context()

	if err := insert(ctx, conn, "t", 1); err != nil {
		t.Fatalf("insert through the unarmed proxy: %v", err)
	}

	batch, err := conn.PrepareBatch(ctx, "INSERT INTO t (id, name)")
	if err != nil {
		t.Fatalf("PrepareBatch: %v", err)
	}
	if err := batch.Append(uint64(2), "cut"); err != nil {
		t.Fatalf("Append: %v", err)
	}
	proxy.CutNextReply()
	if err := batch.Send(); err == nil {
		t.Fatal("Send succeeded although the proxy swallowed the server's reply")
	} else {
		t.Logf("Send after the cut: %v", err)
	}
	if got := proxy.Cuts(); got != 1 {
		t.Fatalf("Cuts() = %d, want 1", got)
	}
	if got := srv.Query(t, "SELECT count() FROM "+db+".t WHERE id = 2 AND name = 'cut'"); got[0][0] != "1" {
		t.Fatalf("rows committed by the cut insert = %s, want 1", got[0][0])
	}

	// The proxy keeps forwarding once the cut is spent: a new connection works.
	if err := insert(ctx, conn, "t", 3); err != nil {
		t.Fatalf("insert after the cut: %v", err)
	}
	if got := srv.Query(t, "SELECT groupArray(id) FROM (SELECT id FROM "+db+".t ORDER BY id)"); got[0][0] != "[1,2,3]" {
		t.Fatalf("ids = %s, want [1,2,3]", got[0][0])
	}
	if got := proxy.Cuts(); got != 1 {
		t.Fatalf("Cuts() = %d after a normal insert, want 1", got)
	}
}
