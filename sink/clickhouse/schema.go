package clickhouse

import (
	"fmt"
	"regexp"
	"strings"
)

// Flavor says which column types the ClickHouse server has. The schema is
// written once for both: Debian's 18.16 server (no DateTime64, no
// LowCardinality without a setting) and newer servers.
type Flavor int

// The flavors.
const (
	// FlavorLegacy is for servers before 19.9: DateTime with a separate
	// microsecond column, plain String for low-cardinality columns.
	FlavorLegacy Flavor = iota
	// FlavorModern is for 19.9 and later: LowCardinality(String) columns.
	FlavorModern
)

// FlavorFor picks the flavor for a server version.
func FlavorFor(major, minor uint64) Flavor {
	if major > 19 || (major == 19 && minor >= 9) {
		return FlavorModern
	}
	return FlavorLegacy
}

// Migration is one numbered schema step. Every statement is idempotent (IF
// NOT EXISTS), so two sidecars migrating at the same time do no harm; an
// ADD COLUMN, which 18.16 cannot qualify with IF NOT EXISTS, is applied
// once and a second attempt's "column already exists" is taken as done.
type Migration struct {
	Version    int
	Name       string
	Statements []string
}

// eventColumns is the events table's column list, in insert order: the
// explicit list every INSERT names.
var eventColumns = []string{
	"event_id", "time", "time_us", "sidecar", "listener", "tool", "agent", "session", "trace_id",
	"method", "host", "path_template", "upstream_status", "ok", "error_code", "error_class", "reason",
	"detail", "violation_paths", "envelope", "refused", "retry_after_ms", "total_us", "upstream_us",
	"request_bytes", "response_bytes", "config_version", "policy_version", "dry_run_denied",
	"dry_run_violations", "policy_error", "mcp_server", "rpc_method", "rpc_id", "inspected", "outcome",
	"mcp_protocol", "approval", "budget", "limit_scope",
	"answer", "answer_findings", "redactions", "definition_changes",
	"arg_shape",
}

// Migrations returns the schema steps for a database, in order.
//
//   - events: one row per call, partitioned by day, ordered for "one tool
//     over a time range"; a ReplacingMergeTree keyed on (tool, time,
//     event_id), so a replayed event collapses into the original.
//   - events_per_minute (+ its materialized view): per minute, tool and
//     error_code, the calls as a uniqExact state of event ids, so a replayed
//     batch cannot inflate the counts.
//   - envelope_adoption (+ view): per tool and day, envelope and legacy
//     calls (again as uniqExact states) and the time of the last legacy call.
//   - mcp columns: the MCP server, JSON-RPC method and id, whether the call
//     was inspected, and the tools/call outcome, added to events.
//   - inserted_at: when ClickHouse received the row (the server's clock, set
//     by its DEFAULT; inserts never name it), so the delay between a call and
//     its arrival shows how long events waited in the queue and spool.
//     Rows written before the column existed read now() until merged: only
//     recent rows are meaningful, which is all the dashboard reads.
//   - mcp_protocol: the MCP protocol version of a message on an MCP route.
//   - approval_requests, approval_decisions: the approvals' audit trail and
//     shared state (approvals.store: clickhouse): one row per request, one
//     per decision or use of a grant; never updated.
//   - approval: the approval state of a call (events.approval).
//   - budget (9): what refused a call in the budget step: a budget's name,
//     "loops", or an upstream host (its rate limit or backoff).
//   - method, destination (10): the approval request's call as the person
//     deciding sees it (its method; scheme, host, port and path template,
//     or the MCP route and server).
//   - limit_scope (11): which counters decided the budget step: fleet
//     (state.redis) or local.
//   - answer, answer_findings, redactions, definition_changes (12): what
//     the answer checks did with upstream's answer, the kinds they found,
//     how many values they replaced; the MCP tool definitions that
//     differed from their pins.
//   - arg_shape (13): the shape of the call's arguments on a tool in
//     observe mode (names, types, formats; never values), for toolgate
//     schema suggest.
func Migrations(db string, f Flavor) []Migration {
	lc, ine := "String", ""
	if f == FlavorModern {
		lc, ine = "LowCardinality(String)", "IF NOT EXISTS "
	}
	q := func(s string) string {
		return strings.NewReplacer("{db}", quoteIdent(db), "{lc}", lc, "{ine}", ine).Replace(s)
	}
	return []Migration{
		{Version: 1, Name: "events", Statements: []string{q(`CREATE TABLE IF NOT EXISTS {db}.events (
    event_id String,
    time DateTime,
    time_us UInt32,
    sidecar {lc},
    listener {lc},
    tool {lc},
    agent {lc},
    session String,
    trace_id String,
    method {lc},
    host {lc},
    path_template {lc},
    upstream_status UInt16,
    ok UInt8,
    error_code {lc},
    error_class {lc},
    reason {lc},
    detail String,
    violation_paths Array(String),
    envelope UInt8,
    refused UInt8,
    retry_after_ms Int64,
    total_us Int64,
    upstream_us Int64,
    request_bytes Int64,
    response_bytes Int64,
    config_version {lc},
    policy_version {lc},
    dry_run_denied UInt8,
    dry_run_violations Array(String),
    policy_error String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(time)
ORDER BY (tool, time, event_id)`)}},
		{Version: 2, Name: "events_per_minute", Statements: []string{
			q(`CREATE TABLE IF NOT EXISTS {db}.events_per_minute (
    minute DateTime,
    tool {lc},
    error_code {lc},
    calls AggregateFunction(uniqExact, String)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMMDD(minute)
ORDER BY (tool, error_code, minute)`),
			q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.events_per_minute_mv TO {db}.events_per_minute AS
SELECT toStartOfMinute(time) AS minute, tool, error_code, uniqExactState(event_id) AS calls
FROM {db}.events
GROUP BY minute, tool, error_code`),
		}},
		{Version: 3, Name: "envelope_adoption", Statements: []string{
			q(`CREATE TABLE IF NOT EXISTS {db}.envelope_adoption (
    day Date,
    tool {lc},
    envelope_calls AggregateFunction(uniqExactIf, String, UInt8),
    legacy_calls AggregateFunction(uniqExactIf, String, UInt8),
    last_legacy AggregateFunction(maxIf, DateTime, UInt8)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMMDD(day)
ORDER BY (tool, day)`),
			q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.envelope_adoption_mv TO {db}.envelope_adoption AS
SELECT toDate(time) AS day, tool,
    uniqExactIfState(event_id, envelope = 1) AS envelope_calls,
    uniqExactIfState(event_id, envelope = 0) AS legacy_calls,
    maxIfState(time, envelope = 0) AS last_legacy
FROM {db}.events
WHERE tool != ''
GROUP BY day, tool`),
		}},
		{Version: 4, Name: "events_mcp", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}mcp_server String`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}rpc_method {lc}`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}rpc_id String`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}inspected UInt8`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}outcome {lc}`),
		}},
		{Version: 5, Name: "events_inserted_at", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}inserted_at DateTime DEFAULT now()`),
		}},
		{Version: 6, Name: "events_mcp_protocol", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}mcp_protocol {lc}`),
		}},
		{Version: 7, Name: "approvals", Statements: []string{
			q(`CREATE TABLE IF NOT EXISTS {db}.approval_requests (
    id String,
    time DateTime,
    time_us UInt32,
    expires_at DateTime,
    key String,
    tool {lc},
    agent {lc},
    session String,
    args_digest String,
    effect String,
    summary String,
    policy {lc},
    sidecar {lc},
    trace_id String
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(time)
ORDER BY (time, id)`),
			q(`CREATE TABLE IF NOT EXISTS {db}.approval_decisions (
    id String,
    time DateTime,
    time_us UInt32,
    verdict {lc},
    decider String,
    note String
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(time)
ORDER BY (id, time)`),
		}},
		{Version: 8, Name: "events_approval", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}approval {lc}`),
		}},
		{Version: 9, Name: "events_budget", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}budget {lc}`),
		}},
		{Version: 10, Name: "approval_requests_call", Statements: []string{
			q(`ALTER TABLE {db}.approval_requests ADD COLUMN {ine}method {lc}`),
			q(`ALTER TABLE {db}.approval_requests ADD COLUMN {ine}destination String`),
		}},
		{Version: 11, Name: "events_limit_scope", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}limit_scope {lc}`),
		}},
		{Version: 12, Name: "events_answer", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}answer {lc}`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}answer_findings Array(String)`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}redactions UInt32`),
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}definition_changes Array(String)`),
		}},
		{Version: 13, Name: "events_arg_shape", Statements: []string{
			q(`ALTER TABLE {db}.events ADD COLUMN {ine}arg_shape String`),
		}},
	}
}

// addColumnRE is an ADD COLUMN that Squash folds into its table's CREATE
// TABLE: one column, not placed with AFTER or FIRST (folding appends).
var (
	addColumnRE = regexp.MustCompile(`^ADD COLUMN (?:IF NOT EXISTS )?(\w+ [^,]+)$`)
	placedRE    = regexp.MustCompile(`(?i)\b(AFTER|FIRST)\b`)
)

// Squash returns ms as a database to which none of them has been applied
// takes them: each ADD COLUMN is folded into the CREATE TABLE of its table
// earlier in ms, so a new database gets each table with its final columns
// in one statement and no ALTER at all (on a cluster: no replicated ALTER
// waiting for every replica, no Distributed table dropped and created
// again). A migration whose statements were all folded keeps its version
// and is recorded like any other. Columns keep the history's order, as
// ADD COLUMN appends. Any other statement that changes a table (ALTER,
// DROP) stops the folding into that table from there on, so the result
// always builds what applying ms one by one builds.
func Squash(ms []Migration) []Migration {
	out, _ := squash(ms)
	return out
}

// squash is Squash, and also returns the columns it folded, by table name.
func squash(ms []Migration) ([]Migration, map[string][]string) {
	type created struct{ m, s int } // where a table's CREATE TABLE is in out
	tables := map[string]created{}
	folded := map[string][]string{}
	out := make([]Migration, len(ms))
	for i, m := range ms {
		out[i] = Migration{Version: m.Version, Name: m.Name}
		for _, s := range m.Statements {
			s = strings.TrimSpace(s)
			if c := createTableRE.FindStringSubmatch(s); c != nil {
				tables[c[1]+"."+c[2]] = created{i, len(out[i].Statements)}
			} else if a := alterRE.FindStringSubmatch(s); a != nil {
				key := a[1] + "." + a[2]
				at, ok := tables[key]
				col := addColumnRE.FindStringSubmatch(strings.TrimSpace(a[3]))
				if ok && col != nil && !placedRE.MatchString(col[1]) {
					create := out[at.m].Statements[at.s]
					idx := createTableRE.FindStringSubmatchIndex(create)
					end := idx[7] - 1 // the column list's closing parenthesis
					out[at.m].Statements[at.s] = strings.TrimRight(create[:end], " \n") + ",\n    " + col[1] + "\n" + create[end:]
					name, _, _ := strings.Cut(col[1], " ")
					folded[a[2]] = append(folded[a[2]], name)
					continue
				}
				delete(tables, key)
			} else if d := dropRE.FindStringSubmatch(s); d != nil {
				delete(tables, d[1]+"."+d[2])
			}
			out[i].Statements = append(out[i].Statements, s)
		}
	}
	return out, folded
}

// migrationsTable records applied migrations; duplicates from concurrent
// sidecars collapse.
func migrationsTable(db string) string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.toolgate_schema_migrations (
    version UInt32,
    name String,
    applied_at DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY version`, quoteIdent(db))
}

// SchemaDDL is every statement that creates the schema from nothing on
// one server, for DBAs who apply it by hand (`toolgate schema print`).
func SchemaDDL(db string, f Flavor) []string {
	out, _ := Layout{}.SchemaDDL(db, f) // one server: no statement to refuse
	return out
}

// SchemaDDL is every statement that creates the schema from nothing in
// the layout (`toolgate schema print --cluster`): the migrations squashed
// (Squash), each recorded as applied.
func (l Layout) SchemaDDL(db string, f Flavor) ([]string, error) {
	ms, err := l.Migrations(Squash(Migrations(db, f)))
	if err != nil {
		return nil, err
	}
	out := []string{l.createDatabase(db), l.migrationsTable(db)}
	for _, m := range ms {
		out = append(out, m.Statements...)
		out = append(out, fmt.Sprintf("INSERT INTO %s.toolgate_schema_migrations (version, name, applied_at) VALUES (%d, '%s', now())",
			quoteIdent(db), m.Version, m.Name))
	}
	return out, nil
}

// quoteIdent quotes a database or table name for ClickHouse.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "`", "\\`") + "`"
}
