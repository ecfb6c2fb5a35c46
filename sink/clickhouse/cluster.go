package clickhouse

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Defaults for a cluster layout.
const (
	// DefaultReplicaPath is the ZooKeeper path of a replicated table.
	// toolgate fills {cluster}, {database} and {table}; the server fills
	// {shard} (and any other macro) from its <macros>.
	DefaultReplicaPath = "/clickhouse/tables/{cluster}/{shard}/{database}/{table}"
	// DefaultReplicaName is a replica's name in ZooKeeper, filled by the
	// server from its <macros>.
	DefaultReplicaName = "{replica}"
	// LocalSuffix ends the name of a shard-local table in cluster mode; the
	// table without it is the Distributed table over the shards, so
	// queries written for one server (`FROM {db}.events`) read the whole
	// cluster unchanged.
	LocalSuffix = "_local"
)

// Insert modes for Config.Insert.
const (
	// InsertDistributed inserts through the Distributed table, which
	// routes each row to its shard and answers once every shard has stored
	// its rows (insert_distributed_sync), so a shard that is away fails
	// the insert and the spool keeps the batch.
	InsertDistributed = "distributed"
	// InsertLocal inserts into the shard-local table of the server the
	// sidecar is connected to.
	InsertLocal = "local"
)

// ErrClusterStatement is returned when a migration's statement has a form
// the cluster layout does not know how to run on a cluster.
var ErrClusterStatement = errors.New("statement cannot be run on a cluster")

// Layout says how toolgate's tables are laid out on a ClickHouse cluster.
// The zero Layout (no Cluster) is one server: statements are left as they
// are.
type Layout struct {
	// Cluster names the cluster in the servers' <remote_servers>; every
	// DDL statement runs ON CLUSTER it.
	Cluster string
	// ReplicaPath is the ZooKeeper path template of replicated tables
	// (DefaultReplicaPath when empty).
	ReplicaPath string
	// ReplicaName is the replica name template (DefaultReplicaName when
	// empty).
	ReplicaName string
}

// On reports whether the layout is a cluster.
func (l Layout) On() bool { return l.Cluster != "" }

// clusterNameRE is what a cluster name may be: an XML element name as
// ClickHouse's <remote_servers> takes it, with nothing to quote.
var clusterNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,127}$`)

// checkTemplate rejects a path or name template that could not sit in a
// SQL string literal as is.
func checkTemplate(s string) error {
	if s == "" || len(s) > 1024 || strings.ContainsAny(s, "'\\\n\r\x00") {
		return fmt.Errorf("%q: want 1 to 1024 bytes without quote, backslash or line break", s)
	}
	return nil
}

// Statement patterns, matched against the statements Migrations writes
// (one statement each, `db` quoted with backquotes).
var (
	createTableRE = regexp.MustCompile("(?s)^CREATE TABLE IF NOT EXISTS (`[^`]+`)\\.(\\w+)\\s+(\\(.*\\))\\s+ENGINE = (\\w+)\\(([^)]*)\\)(.*)$")
	orderByRE     = regexp.MustCompile(`(?s)\bORDER BY (\(.*?\)|\S+)\s*(SETTINGS\b.*)?$`)
	createMVRE    = regexp.MustCompile("(?s)^CREATE MATERIALIZED VIEW IF NOT EXISTS (`[^`]+`)\\.(\\w+) TO (`[^`]+`)\\.(\\w+)\\s+AS\\s+(.*)$")
	createViewRE  = regexp.MustCompile("(?s)^CREATE VIEW IF NOT EXISTS (`[^`]+`)\\.(\\w+)\\s+AS\\s+(.*)$")
	alterRE       = regexp.MustCompile("(?s)^ALTER TABLE (`[^`]+`)\\.(\\w+)\\s+(.*)$")
	dropRE        = regexp.MustCompile("(?s)^DROP TABLE IF EXISTS (`[^`]+`)\\.(\\w+)$")
	columnAlterRE = regexp.MustCompile(`(?s)^(ADD|DROP|MODIFY|RENAME|CLEAR|COMMENT) COLUMN\b`)
	tableRefRE    = regexp.MustCompile("(`[^`]+`)\\.(\\w+)\\b")
)

// replicatedEngines are the engines that have a Replicated form.
var replicatedEngines = map[string]bool{
	"MergeTree": true, "ReplacingMergeTree": true, "AggregatingMergeTree": true,
	"SummingMergeTree": true, "CollapsingMergeTree": true, "VersionedCollapsingMergeTree": true,
	"GraphiteMergeTree": true,
}

// Migrations rewrites single-server migrations for the layout; on one
// server it returns them unchanged. On a cluster, every statement runs ON
// CLUSTER, and:
//
//   - CREATE TABLE with a MergeTree-family engine creates NAME_local with
//     the Replicated engine, and NAME, a Distributed table over the
//     NAME_local of every shard, sharded by a hash of the sorting key: rows
//     a ReplacingMergeTree would collapse (a replayed event) always land on
//     the same shard, so they still collapse.
//   - CREATE MATERIALIZED VIEW reads and writes the local tables, so each
//     shard keeps the rollups of its own events; queries read the rollups
//     through the Distributed tables and merge the shards' states.
//   - ALTER TABLE changes NAME_local; when it changes columns, NAME is
//     dropped and created again over the new columns (18.16 refuses ALTER
//     ON CLUSTER on a Distributed table whose shards replicate internally).
//   - CREATE VIEW and DROP TABLE run ON CLUSTER.
//
// Any other statement is an error wrapping ErrClusterStatement, so a new
// migration of an unknown form is caught by the tests, not by a DBA.
func (l Layout) Migrations(ms []Migration) ([]Migration, error) {
	if !l.On() {
		return ms, nil
	}
	local := map[string]distTable{} // the tables made shard-local so far
	out := make([]Migration, len(ms))
	for i, m := range ms {
		var stmts []string
		var redo []string // Distributed tables to create again at the end of m
		for _, s := range m.Statements {
			got, again, err := l.statement(s, local)
			if err != nil {
				return nil, fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
			stmts = append(stmts, got...)
			for _, t := range again {
				if !contains(redo, t) {
					redo = append(redo, t)
				}
			}
		}
		for _, t := range redo {
			d := local[t]
			stmts = append(stmts, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s ON CLUSTER %s", d.db, t, l.Cluster), d.create)
		}
		out[i] = Migration{Version: m.Version, Name: m.Name, Statements: stmts}
	}
	return out, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// distTable is a table made shard-local: its (quoted) database and the
// statement that creates its Distributed table.
type distTable struct{ db, create string }

// statement rewrites one statement. local holds the tables made
// shard-local so far; again names the tables whose Distributed table must
// be created again.
func (l Layout) statement(s string, local map[string]distTable) (stmts, again []string, err error) {
	s = strings.TrimSpace(s)
	on := " ON CLUSTER " + l.Cluster
	// localize points references to shard-local tables at their local form.
	localize := func(q string) string {
		return tableRefRE.ReplaceAllStringFunc(q, func(ref string) string {
			m := tableRefRE.FindStringSubmatch(ref)
			if _, ok := local[m[2]]; ok {
				return m[1] + "." + m[2] + LocalSuffix
			}
			return ref
		})
	}
	if m := createTableRE.FindStringSubmatch(s); m != nil {
		db, table, cols, engine, args, rest := m[1], m[2], m[3], m[4], m[5], m[6]
		if !replicatedEngines[engine] {
			return nil, nil, fmt.Errorf("%w: table %s has engine %s; cluster mode replicates MergeTree engines only", ErrClusterStatement, table, engine)
		}
		ob := orderByRE.FindStringSubmatch(rest)
		if ob == nil {
			return nil, nil, fmt.Errorf("%w: table %s has no ORDER BY", ErrClusterStatement, table)
		}
		key := strings.TrimSuffix(strings.TrimPrefix(ob[1], "("), ")")
		rargs := l.replicaArgs(strings.Trim(db, "`"), table)
		if strings.TrimSpace(args) != "" {
			rargs += ", " + args
		}
		create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s%s %s ENGINE = Replicated%s(%s)%s",
			db, table, LocalSuffix, on, cols, engine, rargs, rest)
		dist := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s AS %s.%s%s ENGINE = Distributed(%s, %s, %s, cityHash64(%s))",
			db, table, on, db, table, LocalSuffix, quoteIdent(l.Cluster), db, quoteIdent(table+LocalSuffix), key)
		local[table] = distTable{db: db, create: dist}
		return []string{create, dist}, nil, nil
	}
	if m := createMVRE.FindStringSubmatch(s); m != nil {
		return []string{fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s.%s%s TO %s AS %s",
			m[1], m[2], on, localize(m[3]+"."+m[4]), localize(m[5]))}, nil, nil
	}
	if m := createViewRE.FindStringSubmatch(s); m != nil {
		return []string{fmt.Sprintf("CREATE VIEW IF NOT EXISTS %s.%s%s AS %s", m[1], m[2], on, m[3])}, nil, nil
	}
	if m := alterRE.FindStringSubmatch(s); m != nil {
		db, table, change := m[1], m[2], m[3]
		if _, ok := local[table]; !ok {
			return []string{fmt.Sprintf("ALTER TABLE %s.%s%s %s", db, table, on, change)}, nil, nil
		}
		stmt := fmt.Sprintf("ALTER TABLE %s.%s%s%s %s", db, table, LocalSuffix, on, change)
		if columnAlterRE.MatchString(change) {
			again = []string{table}
		}
		return []string{stmt}, again, nil
	}
	if m := dropRE.FindStringSubmatch(s); m != nil {
		db, table := m[1], m[2]
		drop := fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s", db, table, on)
		if _, ok := local[table]; !ok {
			return []string{drop}, nil, nil
		}
		delete(local, table)
		return []string{drop, fmt.Sprintf("DROP TABLE IF EXISTS %s.%s%s%s", db, table, LocalSuffix, on)}, nil, nil
	}
	first, _, _ := strings.Cut(s, "\n")
	return nil, nil, fmt.Errorf("%w: %q", ErrClusterStatement, abbrevSQL(first))
}

// replicaArgs returns the Replicated engine's first two arguments for a
// table: its ZooKeeper path and replica name, as string literals.
func (l Layout) replicaArgs(db, table string) string {
	path, name := l.ReplicaPath, l.ReplicaName
	if path == "" {
		path = DefaultReplicaPath
	}
	if name == "" {
		name = DefaultReplicaName
	}
	path = strings.NewReplacer("{cluster}", l.Cluster, "{database}", db, "{table}", table).Replace(path)
	return quoteString(path) + ", " + quoteString(name)
}

// quoteString quotes s as a ClickHouse string literal.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// migrationsTable returns the statement that creates the table recording
// applied migrations. On a cluster it is one replicated table with every
// server of the cluster as a replica (its path has "all" for {shard}), so
// a migration recorded through any server is seen by every sidecar, each
// reading its own server.
func (l Layout) migrationsTable(db string) string {
	if !l.On() {
		return migrationsTable(db)
	}
	path, name := l.ReplicaPath, l.ReplicaName
	if path == "" {
		path = DefaultReplicaPath
	}
	if name == "" {
		name = DefaultReplicaName
	}
	if strings.Contains(path, "{shard}") {
		path = strings.ReplaceAll(path, "{shard}", "all")
		name = "{shard}-" + name // replica names need only be unique within a shard
	}
	path = strings.NewReplacer("{cluster}", l.Cluster, "{database}", db, "{table}", "toolgate_schema_migrations").Replace(path)
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.toolgate_schema_migrations ON CLUSTER %s (
    version UInt32,
    name String,
    applied_at DateTime
) ENGINE = ReplicatedReplacingMergeTree(%s, %s)
ORDER BY version`, quoteIdent(db), l.Cluster, quoteString(path), quoteString(name))
}

// createDatabase returns the statement that creates the database.
func (l Layout) createDatabase(db string) string {
	if !l.On() {
		return "CREATE DATABASE IF NOT EXISTS " + quoteIdent(db)
	}
	return "CREATE DATABASE IF NOT EXISTS " + quoteIdent(db) + " ON CLUSTER " + l.Cluster
}

// abbrevSQL shortens a statement for an error message.
func abbrevSQL(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
