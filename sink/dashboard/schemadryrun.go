package dashboard

import (
	"context"
	"fmt"
	"sort"
)

// The schema dry run panel: for each tool whose schema runs in
// schema_mode: dry_run (a schema proposed by `toolgate schema suggest`,
// docs/schema-suggest.md), how many of its calls the schema would have
// refused and why, before anyone enforces it. A dry-run schema's refusals
// are the event's dry_run_violations lines that start with "schema: ".

// SchemaDryRunRow is one line of the panel: one tool's calls in range, the
// calls its dry-run schema would have refused, and the most frequent
// reasons (a violation line: its JSON pointer and message, never a value).
type SchemaDryRunRow struct {
	Tool        string  `json:"tool"`
	Calls       uint64  `json:"calls"`
	WouldRefuse uint64  `json:"would_refuse"`
	Share       float64 `json:"share"`
	// Reasons are the violation lines (without "schema: ") and in how many
	// calls each was, most calls first, at most MaxSchemaReasons.
	Reasons []SchemaReason `json:"reasons"`
}

// SchemaReason is one reason a dry-run schema gave, and in how many calls.
type SchemaReason struct {
	Reason string `json:"reason"`
	Calls  uint64 `json:"calls"`
}

// MaxSchemaReasons bounds the reasons the panel lists per tool.
const MaxSchemaReasons = 5

// schemaDryRunSQL counts each tool's calls and those a dry-run schema
// would have refused, for the tools with any (distinct ids, as the other
// panels count).
const schemaDryRunSQL = `/* dashboard: schema_dry_run */ SELECT tool,
    toUInt64(uniqExact(cityHash64(event_id))) AS calls,
    toUInt64(uniqExactIf(cityHash64(event_id), arrayExists(x -> startsWith(x, 'schema: '), dry_run_violations))) AS would
FROM {db}.events
WHERE %s
GROUP BY tool
HAVING would > 0
ORDER BY would DESC, tool
LIMIT 200`

// schemaReasonsSQL counts the calls each reason of a dry-run schema was in.
const schemaReasonsSQL = `/* dashboard: schema_dry_run_reasons */ SELECT tool, substring(line, 9) AS reason, toUInt64(uniqExact(cityHash64(event_id))) AS n
FROM {db}.events
ARRAY JOIN dry_run_violations AS line
PREWHERE dry_run_denied = 1
WHERE %s AND startsWith(line, 'schema: ')
GROUP BY tool, reason
ORDER BY tool, n DESC, reason
LIMIT %d BY tool`

// schemaDryRun is the schema dry run panel. The tool and agent filters
// apply; the error code does not (a dry-run refusal is no failure).
func (s store) schemaDryRun(ctx context.Context, f Filter) ([]SchemaDryRunRow, error) {
	where, args := f.where(false, true)
	var out []SchemaDryRunRow
	idx := map[string]int{}
	var r SchemaDryRunRow
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(schemaDryRunSQL, where)), args...)
	err = collect(rows, err, func() error {
		r = SchemaDryRunRow{}
		if err := rows.Scan(&r.Tool, &r.Calls, &r.WouldRefuse); err != nil {
			return err
		}
		if r.Calls > 0 {
			r.Share = float64(r.WouldRefuse) / float64(r.Calls)
		}
		idx[r.Tool] = len(out)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schema dry run: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	var tool string
	var sr SchemaReason
	rows, err = s.q.query(ctx, s.sql(fmt.Sprintf(schemaReasonsSQL, where, MaxSchemaReasons)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&tool, &sr.Reason, &sr.Calls); err != nil {
			return err
		}
		if i, ok := idx[tool]; ok {
			out[i].Reasons = append(out[i].Reasons, sr)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schema dry run reasons: %w", err)
	}
	// Stable: equals keep the query's order (most refused, then by name).
	sort.SliceStable(out, func(i, j int) bool { return out[i].WouldRefuse > out[j].WouldRefuse })
	return out, nil
}
