package clickhouse_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// Fault tests: the spool in front of a real ClickHouse that is killed,
// down at start, loses an acknowledgement, or loses its table. Each one
// asserts exact counts: every event present once in what analysts count.

// chPipe is a spool shipping into ClickHouse, as the sidecar wires it.
type chPipe struct {
	ch    *clickhouse.Writer
	spool *sink.Spool
	db    string
}

func openPipe(t *testing.T, addr, db, dir string) *chPipe {
	t.Helper()
	return openPipeConfig(t, clickhouse.Config{Addr: []string{addr}, Database: db}, dir)
}

// openPipeConfig is openPipe for any configuration; timeouts are short
// unless cfg sets them.
func openPipeConfig(t *testing.T, cfg clickhouse.Config, dir string) *chPipe {
	t.Helper()
	db := cfg.Database
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ch, err := clickhouse.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	scfg := sink.SpoolConfig{Dir: dir, SegmentAge: 20 * time.Millisecond, RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond}
	if err := scfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sp, err := sink.OpenSpool(scfg, ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &chPipe{ch: ch, spool: sp, db: db}
	t.Cleanup(func() { p.close() })
	return p
}

func (p *chPipe) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.spool.Close(ctx)
	p.ch.Close()
}

// write records n events with ids prefix-0..n-1 in batches of 50.
func (p *chPipe) write(t *testing.T, prefix string, n int) {
	t.Helper()
	now := time.Now().UTC()
	for i := 0; i < n; i += 50 {
		batch := make([]sink.Event, 0, 50)
		for j := i; j < min(i+50, n); j++ {
			batch = append(batch, sink.Event{EventID: fmt.Sprintf("%s-%d", prefix, j), Time: now, Tool: "t", Sidecar: "s"})
		}
		if err := p.spool.WriteEvents(context.Background(), batch); err != nil {
			t.Fatalf("spool write: %v", err)
		}
	}
}

// drained waits until the spool has shipped everything.
func (p *chPipe) drained(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st := p.spool.Status()
		if st.PendingEvents == 0 && st.Segments == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spool not drained after %s: %+v", within, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counts returns what analysts count (distinct ids, rows after FINAL) and
// the raw rows stored, duplicates included.
func counts(t *testing.T, srv *chtest.Server, db string) (distinct, final, raw string) {
	t.Helper()
	q := "`" + db + "`.events"
	r := srv.Query(t, "SELECT uniqExact(event_id), (SELECT count() FROM "+q+" FINAL), count() FROM "+q)
	return r[0][0], r[0][1], r[0][2]
}

func TestFaultClickHouseKilledMidStream(t *testing.T) {
	t.Parallel()
	srv := chtest.Start(t)
	p := openPipe(t, srv.Addr(), "faults", t.TempDir())
	p.write(t, "before", 500)
	p.drained(t, 10*time.Second)
	srv.Kill()
	p.write(t, "while-down", 700) // never blocks, never fails
	time.Sleep(300 * time.Millisecond)
	if st := p.spool.Status(); st.PendingEvents == 0 || st.ShipErrors == 0 || st.LastShipError == "" {
		t.Errorf("with ClickHouse down, status = %+v; want pending events and a visible ship error", st)
	}
	srv.Restart(t)
	p.write(t, "after", 300)
	p.drained(t, 20*time.Second)
	if d, f, _ := counts(t, srv, "faults"); d != "1500" || f != "1500" {
		t.Errorf("distinct %s, FINAL %s; want every one of 1500 events once", d, f)
	}
}

func TestFaultClickHouseDownAtStart(t *testing.T) {
	t.Parallel()
	srv := chtest.Start(t)
	srv.Stop()
	p := openPipe(t, srv.Addr(), "late", t.TempDir()) // must not fail
	p.write(t, "early", 400)
	time.Sleep(500 * time.Millisecond)
	if st := p.spool.Status(); st.PendingEvents != 400 {
		t.Errorf("pending = %d while ClickHouse is down, want 400", st.PendingEvents)
	}
	srv.Restart(t) // the schema is created when it answers
	p.drained(t, 20*time.Second)
	if d, f, _ := counts(t, srv, "late"); d != "400" || f != "400" {
		t.Errorf("distinct %s, FINAL %s; want 400", d, f)
	}
}

func TestFaultAcknowledgementLost(t *testing.T) {
	t.Parallel()
	srv := chtest.Start(t)
	cut := chtest.NewCuttingProxy(t, srv.Addr())
	p := openPipe(t, cut.Addr(), "acklost", t.TempDir())
	p.write(t, "warm", 50)
	p.drained(t, 10*time.Second)
	armed := true
	clickhouse.SetBeforeSend(p.ch, func() {
		if armed {
			armed = false
			cut.CutNextReply() // the server commits; its acknowledgement is lost
		}
	})
	p.write(t, "ambiguous", 200)
	p.drained(t, 20*time.Second)
	if cut.Cuts() != 1 {
		t.Fatalf("cuts = %d, want 1", cut.Cuts())
	}
	d, f, raw := counts(t, srv, "acklost")
	if d != "250" || f != "250" {
		t.Errorf("distinct %s, FINAL %s; want 250: a replay must not inflate what analysts count", d, f)
	}
	if st := p.spool.Status(); st.ShipErrors == 0 {
		t.Errorf("no ship error recorded: the lost acknowledgement did not happen")
	}
	t.Logf("raw rows stored: %s (duplicates collapse as parts merge)", raw)
	rows := srv.Query(t, "SELECT uniqExactMerge(calls) FROM `acklost`.events_per_minute")
	if rows[0][0] != "250" {
		t.Errorf("per-minute rollup counts %s calls, want 250", rows[0][0])
	}
}

func TestFaultEventsTableDropped(t *testing.T) {
	t.Parallel()
	srv := chtest.Start(t)
	p := openPipe(t, srv.Addr(), "dropped", t.TempDir())
	p.write(t, "before", 100)
	p.drained(t, 10*time.Second)
	srv.Exec(t, "DROP TABLE dropped.events_per_minute_mv")
	srv.Exec(t, "DROP TABLE dropped.envelope_adoption_mv")
	srv.Exec(t, "DROP TABLE dropped.events")
	p.write(t, "while-gone", 300)
	deadline := time.Now().Add(5 * time.Second)
	for p.spool.Status().ShipErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := p.spool.Status()
	if st.PendingEvents != 300 || !strings.Contains(st.LastShipError, "events") {
		t.Errorf("with the table gone, status = %+v; want 300 pending and the error visible", st)
	}
	if p.ch.Rejected() != 0 {
		t.Errorf("a missing table must not drop rows as bad; rejected = %d", p.ch.Rejected())
	}
	// The DBA puts the table back, as toolgate schema print writes it.
	for _, stmt := range clickhouse.SchemaDDL("dropped", clickhouse.FlavorLegacy) {
		if !strings.Contains(stmt, "toolgate_schema_migrations") {
			srv.Exec(t, stmt)
		}
	}
	p.drained(t, 20*time.Second)
	if d, f, _ := counts(t, srv, "dropped"); d != "300" || f != "300" {
		t.Errorf("distinct %s, FINAL %s; want the 300 spooled events", d, f)
	}
}
