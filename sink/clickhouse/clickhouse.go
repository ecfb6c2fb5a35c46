// Package clickhouse writes toolgate's events into ClickHouse over the
// native protocol: the tables and their migrations (per server flavor),
// batch inserts with an explicit column list, and retention. It is the one
// package that links clickhouse-go; the data path (proxy, the queue, the
// spool) only sees sink.Writer, which Writer satisfies.
package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/sink"
)

// Defaults for Config.
const (
	DefaultDatabase      = "toolgate"
	DefaultDialTimeout   = 5 * time.Second
	DefaultWriteTimeout  = 30 * time.Second
	DefaultRetentionDays = 30
)

// Bounds applied to string columns on the way in, so one over-long value
// cannot poison a batch.
const (
	maxCHString = 4096
	maxCHShort  = 256
	maxCHArray  = 100
)

// Config configures the ClickHouse destination (YAML snake_case).
type Config struct {
	// Addr lists native-protocol addresses (host:9000). Empty disables
	// ClickHouse.
	Addr []string `yaml:"addr"`
	// Database holds toolgate's tables; created when missing. Default
	// "toolgate".
	Database string `yaml:"database"`
	// Username to connect as. Default "default".
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password, so
	// the password never sits in the configuration file.
	PasswordEnv string `yaml:"password_env"`
	// Migrate creates and migrates the tables at start. Default true; set
	// false when a DBA applies `toolgate schema print` by hand.
	Migrate *bool `yaml:"migrate"`
	// DialTimeout bounds connecting. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// WriteTimeout bounds one batch insert. Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// RetentionDays keeps this many days of events and rollups; older daily
	// partitions are dropped once an hour. Default 30; -1 keeps everything.
	RetentionDays int `yaml:"retention_days"`
}

// Validate applies defaults and rejects bad values. Errors are
// *section.Error values at "clickhouse.<field>".
func (c *Config) Validate() error {
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if err := sink.CheckDatabaseName(c.Database); err != nil {
		return section.At("clickhouse.database", err)
	}
	if c.Username == "" {
		c.Username = "default"
	}
	if c.PasswordEnv != "" {
		if _, ok := os.LookupEnv(c.PasswordEnv); !ok {
			return section.Errorf("clickhouse.password_env", "environment variable %s is not set", c.PasswordEnv)
		}
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.RetentionDays == 0 {
		c.RetentionDays = DefaultRetentionDays
	}
	if c.RetentionDays < -1 {
		return section.Errorf("clickhouse.retention_days", "%d; want a number of days, or -1 to keep everything", c.RetentionDays)
	}
	if c.DialTimeout < 0 {
		return section.Errorf("clickhouse.dial_timeout", "must be positive, got %s", c.DialTimeout)
	}
	if c.WriteTimeout < 0 {
		return section.Errorf("clickhouse.write_timeout", "must be positive, got %s", c.WriteTimeout)
	}
	return nil
}

// Writer writes event batches into ClickHouse over the native protocol,
// always with an explicit column list. It satisfies sink.Writer; put a sink.Spool in
// front of it so nothing is lost while the server is away.
type Writer struct {
	cfg    Config
	conn   driver.Conn
	log    *slog.Logger
	flavor Flavor
	insert string

	rejected atomic.Uint64 // rows the server refused on their own
	migrated atomic.Bool   // the schema is known to be in place

	beforeSend func() // tests: runs between preparing an insert and sending it
}

var _ sink.Writer = (*Writer)(nil)

// Open connects (the first connection is made lazily by the
// driver, so a server that is down does not fail the start) and, when the
// server answers and Migrate is on, creates and migrates the schema.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Writer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pw := ""
	if cfg.PasswordEnv != "" {
		pw = os.Getenv(cfg.PasswordEnv)
	}
	conn, err := chgo.Open(&chgo.Options{
		Addr:        cfg.Addr,
		Auth:        chgo.Auth{Username: cfg.Username, Password: pw},
		DialTimeout: cfg.DialTimeout,
		ReadTimeout: cfg.WriteTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	c := &Writer{cfg: cfg, conn: conn, log: log}
	c.insert = fmt.Sprintf("INSERT INTO %s.events (%s)", quoteIdent(cfg.Database), strings.Join(eventColumns, ", "))
	if !c.migrates() {
		c.migrated.Store(true) // a DBA owns the schema
	} else if err := c.Migrate(ctx); err != nil {
		log.Warn("clickhouse not ready; the schema is created when it answers, and events wait in the spool meanwhile", "err", err)
	}
	return c, nil
}

func (c *Writer) migrates() bool { return c.cfg.Migrate == nil || *c.cfg.Migrate }

// Migrate detects the server's flavor, creates the database and applies
// every migration not yet recorded. It is safe to run from several
// sidecars at once.
func (c *Writer) Migrate(ctx context.Context) error {
	v, err := c.conn.ServerVersion()
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	c.flavor = FlavorFor(v.Version.Major, v.Version.Minor)
	db := quoteIdent(c.cfg.Database)
	if err := c.conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+db); err != nil {
		return fmt.Errorf("clickhouse: create database: %w", err)
	}
	if err := c.conn.Exec(ctx, migrationsTable(c.cfg.Database)); err != nil {
		return fmt.Errorf("clickhouse: migrations table: %w", err)
	}
	applied := map[int]bool{}
	rows, err := c.conn.Query(ctx, "SELECT DISTINCT version FROM "+db+".toolgate_schema_migrations")
	if err != nil {
		return fmt.Errorf("clickhouse: read migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("clickhouse: read migrations: %w", err)
		}
		applied[int(v)] = true
	}
	rows.Close()
	for _, m := range Migrations(c.cfg.Database, c.flavor) {
		if applied[m.Version] {
			continue
		}
		for _, stmt := range m.Statements {
			if err := c.conn.Exec(ctx, stmt); err != nil && !columnExists(stmt, err) {
				return fmt.Errorf("clickhouse: migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		rec := fmt.Sprintf("INSERT INTO %s.toolgate_schema_migrations (version, name, applied_at)", db)
		b, err := c.conn.PrepareBatch(ctx, rec)
		if err == nil {
			err = b.Append(uint32(m.Version), m.Name, time.Now())
		}
		if err == nil {
			err = b.Send()
		}
		if err != nil {
			return fmt.Errorf("clickhouse: record migration %d: %w", m.Version, err)
		}
		c.log.Info("clickhouse migration applied", "version", m.Version, "name", m.Name)
	}
	c.migrated.Store(true)
	return nil
}

// columnExists reports whether err says an ADD COLUMN statement's column
// is already there (another sidecar, or an earlier try, added it).
func columnExists(stmt string, err error) bool {
	var ex *chgo.Exception
	if !strings.Contains(stmt, " ADD COLUMN ") || !errors.As(err, &ex) {
		return false
	}
	return ex.Code == 15 || ex.Code == 44 // DUPLICATE_COLUMN, ILLEGAL_COLUMN
}

// partitionedTables are the tables partitioned by day (YYYYMMDD).
var partitionedTables = []string{"events", "events_per_minute", "envelope_adoption"}

// DropPartitionsBefore drops the daily partitions of toolgate's tables
// older than day, and returns how many it dropped.
func (c *Writer) DropPartitionsBefore(ctx context.Context, day time.Time) (int, error) {
	cutoff := day.UTC().Format("20060102")
	rows, err := c.conn.Query(ctx, "SELECT DISTINCT table, partition FROM system.parts WHERE database = '"+
		strings.ReplaceAll(c.cfg.Database, "'", "")+"' AND active AND table IN ('"+strings.Join(partitionedTables, "', '")+"')")
	if err != nil {
		return 0, fmt.Errorf("clickhouse: list partitions: %w", err)
	}
	type part struct{ table, id string }
	var old []part
	for rows.Next() {
		var p part
		if err := rows.Scan(&p.table, &p.id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("clickhouse: list partitions: %w", err)
		}
		if len(p.id) == 8 && p.id < cutoff && strings.Trim(p.id, "0123456789") == "" {
			old = append(old, p)
		}
	}
	rows.Close()
	for i, p := range old {
		q := fmt.Sprintf("ALTER TABLE %s.%s DROP PARTITION %s", quoteIdent(c.cfg.Database), quoteIdent(p.table), p.id)
		if err := c.conn.Exec(ctx, q); err != nil {
			return i, fmt.Errorf("clickhouse: drop partition %s of %s: %w", p.id, p.table, err)
		}
		c.log.Info("clickhouse partition dropped by retention", "table", p.table, "partition", p.id)
	}
	return len(old), nil
}

// Rejected counts rows the server refused on their own (isolated from
// their batch and dropped, each logged with its event id).
func (c *Writer) Rejected() uint64 { return c.rejected.Load() }

// Close closes the connections.
func (c *Writer) Close() error { return c.conn.Close() }

// WriteEvents inserts a batch. Values are sanitized first (valid UTF-8,
// bounded lengths). When the server refuses the batch for its data, the
// batch is split until the bad rows are isolated: they are dropped, counted
// and logged, the rest is stored. Any other error (the server away, the
// table missing, no permission) is returned, so the spool keeps the data
// and retries.
func (c *Writer) WriteEvents(ctx context.Context, events []sink.Event) error {
	if len(events) == 0 {
		return nil
	}
	if !c.migrated.Load() {
		// The server was away at start: create the schema now.
		if err := c.Migrate(ctx); err != nil {
			return err
		}
	}
	return c.write(ctx, events)
}

func (c *Writer) write(ctx context.Context, events []sink.Event) error {
	err := c.send(ctx, events)
	if err == nil || !isDataError(err) {
		return err
	}
	if len(events) == 1 {
		c.rejected.Add(1)
		c.log.Error("clickhouse refused an event; dropped", "event_id", events[0].EventID, "err", err)
		return nil
	}
	half := len(events) / 2
	if err := c.write(ctx, events[:half]); err != nil {
		return err
	}
	return c.write(ctx, events[half:])
}

func (c *Writer) send(ctx context.Context, events []sink.Event) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	b, err := c.conn.PrepareBatch(ctx, c.insert)
	if err != nil {
		return fmt.Errorf("clickhouse: prepare insert: %w", err)
	}
	for i := range events {
		e := &events[i]
		t := e.Time.UTC()
		err := b.Append(
			clean(e.EventID, maxCHShort), t, uint32(t.Nanosecond()/1000),
			clean(e.Sidecar, maxCHShort), clean(e.Listener, maxCHShort), clean(e.Tool, maxCHShort),
			clean(e.Agent, maxCHShort), clean(e.Session, maxCHShort), clean(e.TraceID, maxCHShort),
			clean(e.Method, maxCHShort), clean(e.Host, maxCHShort), clean(e.PathTemplate, maxCHShort),
			uint16(min(max(e.UpstreamStatus, 0), 65535)), b2u(e.OK),
			clean(e.ErrorCode, maxCHShort), clean(e.ErrorClass, maxCHShort), clean(e.Reason, maxCHShort),
			clean(e.Detail, maxCHString), cleanAll(e.ViolationPaths), b2u(e.Envelope), b2u(e.Refused),
			e.RetryAfterMS, e.TotalUS, e.UpstreamUS, e.RequestBytes, e.ResponseBytes,
			clean(e.ConfigVersion, maxCHShort), clean(e.PolicyVersion, maxCHShort), b2u(e.DryRunDenied),
			cleanAll(e.DryRunViolations), clean(e.PolicyError, maxCHString),
			clean(e.MCPServer, maxCHShort), clean(e.RPCMethod, maxCHShort), clean(e.RPCID, maxCHShort),
			b2u(e.Inspected), clean(e.Outcome, maxCHShort), clean(e.MCPProtocol, maxCHShort),
			clean(e.Approval, maxCHShort),
		)
		if err != nil {
			b.Abort()
			return fmt.Errorf("clickhouse: append: %w", err)
		}
	}
	if c.beforeSend != nil {
		c.beforeSend()
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %d events: %w", len(events), err)
	}
	return nil
}

// isDataError reports whether the server refused a batch because of the
// values in it (as opposed to being away, the table missing, or access).
func isDataError(err error) bool {
	var ex *chgo.Exception
	if !errors.As(err, &ex) {
		return false
	}
	switch ex.Code {
	case 60, 81, 497, 516, 241, 242, 159, 209, 210, 394:
		// UNKNOWN_TABLE, UNKNOWN_DATABASE, ACCESS_DENIED,
		// AUTHENTICATION_FAILED, MEMORY_LIMIT_EXCEEDED, TABLE_IS_READ_ONLY,
		// TIMEOUT_EXCEEDED, SOCKET_TIMEOUT, NETWORK_ERROR, QUERY_WAS_CANCELLED:
		// nothing to do with one row.
		return false
	}
	return true
}

// clean makes a string storable: valid UTF-8, no NUL, at most n bytes (cut
// on a rune boundary).
func clean(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

func cleanAll(ss []string) []string {
	if len(ss) > maxCHArray {
		ss = ss[:maxCHArray]
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clean(s, maxCHShort)
	}
	return out
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
