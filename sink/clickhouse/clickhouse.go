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
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	chproto "github.com/ClickHouse/ch-go/proto"
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
	// Cluster names a cluster of the servers' <remote_servers>. When set,
	// every migration runs ON CLUSTER it, tables are replicated
	// (Replicated* engines, ZooKeeper) and named NAME_local, and NAME is a
	// Distributed table over them, so every query reads the whole
	// cluster. Default "" (one server).
	Cluster string `yaml:"cluster"`
	// Insert says where a cluster's sidecars insert: "distributed" (the
	// default) through the Distributed table, acknowledged once every
	// shard has its rows; "local" into the shard-local table of the server
	// connected to (Addr must then list the replicas of one shard only).
	// Only with Cluster.
	Insert string `yaml:"insert"`
	// ReplicaPath is the ZooKeeper path of each replicated table: toolgate
	// fills {cluster}, {database} and {table}, the server fills {shard} and
	// any other of its macros. Default
	// "/clickhouse/tables/{cluster}/{shard}/{database}/{table}". Only with
	// Cluster.
	ReplicaPath string `yaml:"replica_path"`
	// ReplicaName is each replica's name, filled by the server from its
	// macros. Default "{replica}". Only with Cluster.
	ReplicaName string `yaml:"replica_name"`
	// DDLTimeout bounds the wait for every server of the cluster to run one
	// ON CLUSTER statement (distributed_ddl_task_timeout); a server that is
	// away runs it when it comes back. Default 60s. Only with Cluster.
	DDLTimeout time.Duration `yaml:"ddl_timeout"`
}

// DefaultDDLTimeout is Config.DDLTimeout's default.
const DefaultDDLTimeout = 60 * time.Second

// layout returns the cluster layout the configuration asks for.
func (c *Config) layout() Layout {
	return Layout{Cluster: c.Cluster, ReplicaPath: c.ReplicaPath, ReplicaName: c.ReplicaName}
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
	return c.validateCluster()
}

// validateCluster applies the cluster fields' defaults and rejects bad
// values; without Cluster they must be unset.
func (c *Config) validateCluster() error {
	if c.Cluster == "" {
		for _, f := range []struct{ name, v string }{{"insert", c.Insert}, {"replica_path", c.ReplicaPath}, {"replica_name", c.ReplicaName}} {
			if f.v != "" {
				return section.Errorf("clickhouse."+f.name, "is set but clickhouse.cluster is not")
			}
		}
		if c.DDLTimeout != 0 {
			return section.Errorf("clickhouse.ddl_timeout", "is set but clickhouse.cluster is not")
		}
		return nil
	}
	if !clusterNameRE.MatchString(c.Cluster) {
		return section.Errorf("clickhouse.cluster", "%q: want a cluster name of <remote_servers> (letters, digits, _ and -)", c.Cluster)
	}
	switch c.Insert {
	case "":
		c.Insert = InsertDistributed
	case InsertDistributed, InsertLocal:
	default:
		return section.Errorf("clickhouse.insert", "%q; want %q or %q", c.Insert, InsertDistributed, InsertLocal)
	}
	if c.ReplicaPath == "" {
		c.ReplicaPath = DefaultReplicaPath
	}
	if err := checkTemplate(c.ReplicaPath); err != nil {
		return section.At("clickhouse.replica_path", err)
	}
	if !strings.Contains(c.ReplicaPath, "{table}") {
		return section.Errorf("clickhouse.replica_path", "%q has no {table}: every table needs a path of its own", c.ReplicaPath)
	}
	if c.ReplicaName == "" {
		c.ReplicaName = DefaultReplicaName
	}
	if err := checkTemplate(c.ReplicaName); err != nil {
		return section.At("clickhouse.replica_name", err)
	}
	if c.DDLTimeout == 0 {
		c.DDLTimeout = DefaultDDLTimeout
	}
	if c.DDLTimeout < time.Second {
		return section.Errorf("clickhouse.ddl_timeout", "%s; want at least 1s", c.DDLTimeout)
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
	layout Layout
	insert string

	rejected atomic.Uint64 // rows the server refused on their own
	migrated atomic.Bool   // the schema is known to be in place

	beforeSend func() // tests: runs between preparing an insert and sending it
	until      int    // tests: Migrate applies migrations up to this version only (0: all)

	beforeMigration func(version int) // tests: runs before a migration's statements
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
	c := &Writer{cfg: cfg, conn: conn, log: log, layout: cfg.layout()}
	table := "events"
	if c.layout.On() && cfg.Insert == InsertLocal {
		table += LocalSuffix
	}
	c.insert = fmt.Sprintf("INSERT INTO %s.%s (%s)", quoteIdent(cfg.Database), table, strings.Join(eventColumns, ", "))
	if !c.migrates() {
		c.migrated.Store(true) // a DBA owns the schema
	} else if err := c.Migrate(ctx); err != nil {
		log.Warn("clickhouse not ready; the schema is created when it answers, and events wait in the spool meanwhile", "err", err)
	}
	return c, nil
}

func (c *Writer) migrates() bool { return c.cfg.Migrate == nil || *c.cfg.Migrate }

// Migrate detects the server's flavor, creates the database and applies
// every migration not yet recorded; a new database takes them squashed
// (Squash, hasColumns). It is safe to run from several sidecars at once. On a cluster every statement runs ON CLUSTER; the
// database and the migrations table are created only when the server
// connected to lacks them, so a sidecar whose schema is in place starts
// while another server of the cluster is away.
func (c *Writer) Migrate(ctx context.Context) error {
	v, err := c.conn.ServerVersion()
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	c.flavor = FlavorFor(v.Version.Major, v.Version.Minor)
	if c.layout.On() {
		ctx = c.ddlSettings(ctx, v.Revision)
	}
	db := quoteIdent(c.cfg.Database)
	if err := c.ensureMigrationsTable(ctx); err != nil {
		return err
	}
	applied, err := c.applied(ctx)
	if err != nil {
		return err
	}
	history := Migrations(c.cfg.Database, c.flavor)
	if c.until > 0 {
		history = slices.DeleteFunc(history, func(m Migration) bool { return m.Version > c.until })
	}
	if len(applied) == 0 {
		squashed, folded := squash(history)
		ok, err := c.hasColumns(ctx, folded)
		if err != nil {
			return err
		}
		if ok {
			history = squashed
		}
	}
	migrations, err := c.layout.Migrations(history)
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	first := true
	for _, m := range migrations {
		if applied[m.Version] {
			continue
		}
		if !first && len(m.Statements) > 0 {
			// Another sidecar starting beside this one may have applied it
			// meanwhile: its statements (ON CLUSTER, on a cluster) would
			// only run again for nothing.
			if applied, err = c.applied(ctx); err != nil {
				return err
			}
			if applied[m.Version] {
				continue
			}
		}
		first = false
		if c.beforeMigration != nil {
			c.beforeMigration(m.Version)
		}
		for _, stmt := range m.Statements {
			if err := c.ddl(ctx, stmt); err != nil && !columnExists(stmt, err) {
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
		c.log.Info("clickhouse migration applied", "version", m.Version, "name", m.Name, "cluster", c.cfg.Cluster)
	}
	c.migrated.Store(true)
	return nil
}

// applied returns the versions of the migrations recorded.
func (c *Writer) applied(ctx context.Context) (map[int]bool, error) {
	rows, err := c.conn.Query(ctx, "SELECT DISTINCT version FROM "+quoteIdent(c.cfg.Database)+".toolgate_schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("clickhouse: read migrations: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("clickhouse: read migrations: %w", err)
		}
		applied[int(v)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: read migrations: %w", err)
	}
	return applied, nil
}

// hasColumns reports whether each table named in cols (its local form
// too, on a cluster) either does not exist yet or already has those
// columns: then the squashed migrations (Squash), whose CREATE TABLE IF
// NOT EXISTS leave an existing table as it is, build what the history
// builds. A database with no migration recorded but tables of an older
// schema (its records lost, or tables made by hand) takes the history,
// ADD COLUMN by ADD COLUMN.
func (c *Writer) hasColumns(ctx context.Context, cols map[string][]string) (bool, error) {
	rows, err := c.conn.Query(ctx, "SELECT table, name FROM system.columns WHERE database = ?", c.cfg.Database)
	if err != nil {
		return false, fmt.Errorf("clickhouse: read columns: %w", err)
	}
	defer rows.Close()
	have := map[string]map[string]bool{}
	for rows.Next() {
		var table, name string
		if err := rows.Scan(&table, &name); err != nil {
			return false, fmt.Errorf("clickhouse: read columns: %w", err)
		}
		if have[table] == nil {
			have[table] = map[string]bool{}
		}
		have[table][name] = true
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("clickhouse: read columns: %w", err)
	}
	for table, names := range cols {
		for _, t := range []string{table, table + LocalSuffix} {
			if have[t] == nil {
				continue
			}
			for _, n := range names {
				if !have[t][n] {
					return false, nil
				}
			}
		}
	}
	return true, nil
}

// ensureMigrationsTable creates the database and the migrations table. On
// a cluster it does so only when the server connected to lacks the table.
func (c *Writer) ensureMigrationsTable(ctx context.Context) error {
	if c.layout.On() {
		var n uint64
		err := c.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'toolgate_schema_migrations'",
			c.cfg.Database).Scan(&n)
		if err != nil {
			return fmt.Errorf("clickhouse: look for the migrations table: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
	if err := c.ddl(ctx, c.layout.createDatabase(c.cfg.Database)); err != nil {
		return fmt.Errorf("clickhouse: create database: %w", err)
	}
	if err := c.ddl(ctx, c.layout.migrationsTable(c.cfg.Database)); err != nil {
		return fmt.Errorf("clickhouse: migrations table: %w", err)
	}
	return nil
}

// settingsAsStringsRevision is the last protocol revision whose servers
// read query settings in binary, each by its own type; later ones read
// them as strings.
const settingsAsStringsRevision = 54429

// ddlSettings returns ctx with the settings of an ON CLUSTER statement for
// a server of protocol revision rev: it waits up to DDLTimeout for every
// host. distributed_ddl_task_timeout is a signed setting, which servers
// up to settingsAsStringsRevision (ClickHouse 18.16 among them) read as a
// zigzag varint, while the driver writes every integer setting to them
// unsigned: such a server read 60 as 30 and any odd number as negative,
// which it takes for "wait forever". So for them the value is written as
// its zigzag encoding (twice the seconds).
func (c *Writer) ddlSettings(ctx context.Context, rev uint64) context.Context {
	secs := int(c.cfg.DDLTimeout / time.Second)
	if rev <= settingsAsStringsRevision {
		secs *= 2
	}
	return chgo.Context(ctx, chgo.WithSettings(chgo.Settings{"distributed_ddl_task_timeout": secs}))
}

// ddlGrace is how much longer than the server (DDLTimeout) the client
// waits for an ON CLUSTER statement.
const ddlGrace = 15 * time.Second

// ddl runs one DDL statement. On a cluster the server waits up to
// DDLTimeout for every host to run it, sending nothing meanwhile; so the
// client waits ddlGrace longer than that, not the connection's read
// timeout (WriteTimeout, shorter by default), and a slow cluster ends in
// the server's own timeout error, which counts the hosts that have not
// finished (and, when some of them are not working on it, inactiveHint
// says what to do), rather than a cut connection. A deadline ctx already has that
// comes sooner still holds.
func (c *Writer) ddl(ctx context.Context, stmt string) error {
	if c.layout.On() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.DDLTimeout+ddlGrace)
		defer cancel()
	}
	err := c.conn.Exec(ctx, stmt)
	if h := inactiveHint(err); h != "" {
		return fmt.Errorf("%w%s", err, h)
	}
	return err
}

// inactiveHosts reads the DDL timeout error (TIMEOUT_EXCEEDED, 159) of an
// ON CLUSTER statement: how many servers have not run it, and how many of
// those are working on it.
var inactiveHosts = regexp.MustCompile(`There are (\d+) unfinished hosts \((\d+) of them are currently active\)`)

// inactiveHint is what an operator can do about err when it is an ON
// CLUSTER statement's timeout with servers that are not working on it
// (else ""): such a server is down, or its distributed DDL worker has
// stopped, which ClickHouse 18.16 does for good after a ZooKeeper error it
// does not expect (two replicas both marking an ON CLUSTER ALTER of a
// replicated table done, seen in this package's cluster tests), until the
// server restarts.
func inactiveHint(err error) string {
	var ex *chgo.Exception
	if !errors.As(err, &ex) || ex.Code != 159 {
		return ""
	}
	m := inactiveHosts.FindStringSubmatch(ex.Message)
	if m == nil {
		return ""
	}
	unfinished, _ := strconv.Atoi(m[1])
	active, _ := strconv.Atoi(m[2])
	if active >= unfinished {
		return ""
	}
	return fmt.Sprintf(" (%d of the servers that have not run it are not working on it: each is down, or its distributed DDL worker has stopped;"+
		" ClickHouse 18.16 stops it after an unexpected ZooKeeper error, and its log then says \"Terminating\";"+
		" start or restart that server, and the migration, retried, goes on)", unfinished-active)
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
// older than day, and returns how many it dropped. On a cluster it lists
// the partitions of every shard and drops them ON CLUSTER.
func (c *Writer) DropPartitionsBefore(ctx context.Context, day time.Time) (int, error) {
	cutoff := day.UTC().Format("20060102")
	parts, on, suffix := "system.parts", "", ""
	if c.layout.On() {
		parts = fmt.Sprintf("cluster(%s, system, parts)", quoteIdent(c.cfg.Cluster))
		on, suffix = " ON CLUSTER "+c.cfg.Cluster, LocalSuffix
		v, err := c.conn.ServerVersion()
		if err != nil {
			return 0, fmt.Errorf("clickhouse: %w", err)
		}
		ctx = c.ddlSettings(ctx, v.Revision)
	}
	tables := make([]string, len(partitionedTables))
	for i, t := range partitionedTables {
		tables[i] = t + suffix
	}
	rows, err := c.conn.Query(ctx, "SELECT DISTINCT table, partition FROM "+parts+" WHERE database = '"+
		strings.ReplaceAll(c.cfg.Database, "'", "")+"' AND active AND table IN ('"+strings.Join(tables, "', '")+"')")
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
		q := fmt.Sprintf("ALTER TABLE %s.%s%s DROP PARTITION %s", quoteIdent(c.cfg.Database), quoteIdent(p.table), on, p.id)
		if err := c.ddl(ctx, q); err != nil {
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
	if c.layout.On() {
		// No block deduplication by the replicated tables: a batch sent
		// again after a replica died with its acknowledgement (its block's
		// hash in ZooKeeper, its part only on the dead replica) must be
		// stored by the replica that is up, and reach the rollups, whose
		// own part the dead replica may never have written. Rows are
		// deduplicated by event_id (ReplacingMergeTree, and the rollups
		// count distinct ids), so storing a batch twice is harmless.
		settings := chgo.Settings{"insert_deduplicate": 0}
		if c.cfg.Insert == InsertDistributed {
			// Answer only once every shard has stored its rows, and give
			// up within the write timeout: a shard that is away fails the
			// insert, and the spool keeps the batch rather than the
			// server's own queue.
			settings["insert_distributed_sync"] = 1
			settings["insert_distributed_timeout"] = max(int(c.cfg.WriteTimeout/time.Second), 1)
		}
		ctx = chgo.Context(ctx, chgo.WithSettings(settings))
	}
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
			clean(e.Budget, maxCHShort),
			clean(e.LimitScope, maxCHShort),
			clean(e.Answer, maxCHShort), cleanAll(e.AnswerFindings),
			uint32(min(max(e.Redactions, 0), math.MaxUint32)), cleanAll(e.DefinitionChanges),
			clean(e.ArgShape, maxCHString),
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
// values of some of its rows, so that isolating and dropping them (write)
// stores the rest. Only the errors a row's values cause are: a value that
// does not fit its column or cannot be parsed or converted, and a row a
// CHECK constraint or a materialized expression (throwIf, a division)
// refuses. Anything else (the server or a shard away, the table or a
// column missing while a DBA recreates the schema, no permission, a limit,
// or an error this list does not know) is returned, so the spool keeps the
// batch and retries it: before, every code not named as the server's fault
// counted as bad rows, and a batch that met a table recreated without its
// newest columns (NO_SUCH_COLUMN_IN_TABLE) was split into rows that were
// all dropped.
func isDataError(err error) bool {
	var ex *chgo.Exception
	if !errors.As(err, &ex) {
		return false
	}
	switch chproto.Error(ex.Code) {
	case chproto.ErrCannotParseText, chproto.ErrCannotParseInputAssertionFailed,
		chproto.ErrCannotParseDate, chproto.ErrCannotParseDatetime, chproto.ErrCannotParseNumber,
		chproto.ErrTypeMismatch, chproto.ErrArgumentOutOfBound, chproto.ErrCannotConvertType,
		chproto.ErrIncorrectData, chproto.ErrTooLargeStringSize, chproto.ErrIllegalDivision,
		chproto.ErrSizesOfArraysDontMatch, chproto.ErrValueIsOutOfRangeOfDataType,
		chproto.ErrCannotInsertNullInOrdinaryColumn, chproto.ErrFunctionThrowIfValueIsNonZero,
		chproto.ErrDecimalOverflow, chproto.ErrViolatedConstraint:
		return true
	}
	return false
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
