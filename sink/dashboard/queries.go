package dashboard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// The panels' data. Every query runs on ClickHouse 18.16: no
// toStartOfInterval (buckets are intDiv(toUInt32(time), width) * width), no
// server-side parameters. Values reach the SQL only as clickhouse-go `?`
// binds, which the driver writes as quoted, escaped literals (strings) or
// numbers (times as Unix seconds, bucket widths): and every value bound has
// been validated by ParseFilter first. Counts are uniqExact(cityHash64(event_id)), so a
// replayed batch never inflates them, without FINAL.

// Series is one error code's failures per bucket.
type Series struct {
	Code   string   `json:"error_code"`
	Counts []uint64 `json:"counts"`
	Total  uint64   `json:"total"`
}

// Failures is the stacked chart: failures per bucket and error code.
type Failures struct {
	// Start is the first bucket's start; bucket i starts at Start + i*Bucket.
	Start time.Time `json:"start"`
	// BucketSeconds is the bucket width.
	BucketSeconds int64 `json:"bucket_seconds"`
	// Buckets is the number of buckets.
	Buckets int `json:"buckets"`
	// Series has one entry per error code with failures, in ErrorCodes order.
	Series []Series `json:"series"`
}

// ToolRow is one row of the per-tool table.
type ToolRow struct {
	Tool        string  `json:"tool"`
	Calls       uint64  `json:"calls"`
	Failures    uint64  `json:"failures"`
	FailureRate float64 `json:"failure_rate"`
	TopCode     string  `json:"top_error_code"`
	P50MS       float64 `json:"p50_ms"`
	P95MS       float64 `json:"p95_ms"`
	// Spark is calls and failures per sparkline bucket.
	SparkCalls    []uint64 `json:"spark_calls"`
	SparkFailures []uint64 `json:"spark_failures"`
}

// Message is one of the most frequent validation or policy details, per
// tool; SampleTraceID is the smallest trace id among its calls (a stable
// pick, so a shared link shows the same sample).
type Message struct {
	Code          string `json:"error_code"`
	Reason        string `json:"reason"`
	Detail        string `json:"detail"`
	Calls         uint64 `json:"calls"`
	Tool          string `json:"tool"`
	SampleTraceID string `json:"sample_trace_id"`
}

// BudgetRow is one line of the budgets and loops panel: the calls the
// budget step refused for one agent, tool, reason and budget (a budget's
// name, "loops", or an upstream host), the sessions they came from, and
// the last one.
type BudgetRow struct {
	Agent    string    `json:"agent"`
	Tool     string    `json:"tool"`
	Reason   string    `json:"reason"`
	Budget   string    `json:"budget"`
	Calls    uint64    `json:"calls"`
	Sessions uint64    `json:"sessions"`
	Last     time.Time `json:"last"`
}

// BudgetReasons are the reasons of the budget step's refusals, from
// bucketing's vocabulary: the rows of the budgets and loops panel.
var BudgetReasons = []string{bucketing.ReasonBudgetExhausted, bucketing.ReasonLoopDetected, bucketing.ReasonLocalRateLimit, bucketing.ReasonUpstreamBackoff}

// budgetReasonsSQL is BudgetReasons as an SQL list ('a', 'b'); the
// reasons are fixed words, no value from a request.
var budgetReasonsSQL = "'" + strings.Join(BudgetReasons, "', '") + "'"

// RevisionRow is one line of the policy revisions panel: the calls one
// sidecar decided under one policy version (with policy bundles, the
// bundles' revisions: see docs/bundles.md), and when the first and the last
// of them came, in range.
type RevisionRow struct {
	Sidecar       string    `json:"sidecar"`
	PolicyVersion string    `json:"policy_version"`
	Calls         uint64    `json:"calls"`
	First         time.Time `json:"first"`
	Last          time.Time `json:"last"`
}

// Adoption is one tool's envelope adoption.
type Adoption struct {
	Tool     string  `json:"tool"`
	Envelope uint64  `json:"envelope_calls"`
	Legacy   uint64  `json:"legacy_calls"`
	Share    float64 `json:"envelope_share"`
	// LastLegacy is the last legacy call in range, zero when none.
	LastLegacy time.Time `json:"last_legacy_call"`
	// Ready is true past ReadyShare: the tool's default may flip to
	// envelope: always.
	Ready bool `json:"ready"`
}

// ReadyShare is the envelope share past which a tool is marked ready.
const ReadyShare = 0.8

// Freshness is one sidecar's newest event.
type Freshness struct {
	Sidecar   string    `json:"sidecar"`
	LastEvent time.Time `json:"last_event"`
	// LagSeconds is how far the newest event is behind the range's end (or
	// now, when the range ends later). A sidecar whose spool is backed up
	// shows a growing lag until the spool drains.
	LagSeconds int64  `json:"lag_seconds"`
	Events     uint64 `json:"events"`
	// IngestDelaySeconds is the longest an event of the last
	// IngestWindow of the range took from its call to its row in
	// ClickHouse (the sidecar's queue, disk spool and insert): near zero
	// when events flow, the spool's backlog when they had to wait; -1
	// when the sidecar recorded no call in that window.
	IngestDelaySeconds int64 `json:"ingest_delay_seconds"`
}

// IngestWindow is how far back from the range's end the freshness panel
// measures ingest delay.
const IngestWindow = 10 * time.Minute

// Options are the choices the form offers: tools and agents seen in range.
type Options struct {
	Tools  []string `json:"tools"`
	Agents []string `json:"agents"`
}

// rowScanner is the part of a result set the panels read.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// querier runs one SELECT with `?` binds; *Dashboard's connection adapts to it.
type querier interface {
	query(ctx context.Context, sql string, args ...any) (rowScanner, error)
}

// where is the WHERE clause every events query shares, with its binds.
// withCode adds the error_code filter.
func (f Filter) where(withCode, withToolAgent bool) (string, []any) {
	conds := []string{"time >= toDateTime(?)", "time < toDateTime(?)"}
	args := []any{f.From.Unix(), f.To.Unix()}
	if withToolAgent && f.Tool != "" {
		conds, args = append(conds, "tool = ?"), append(args, f.Tool)
	}
	if withToolAgent && f.Agent != "" {
		conds, args = append(conds, "agent = ?"), append(args, f.Agent)
	}
	if withCode && f.ErrorCode != "" {
		conds, args = append(conds, "error_code = ?"), append(args, f.ErrorCode)
	}
	return strings.Join(conds, " AND "), args
}

// store runs the panels' queries on one database.
type store struct {
	q  querier
	db string // quoted identifier
}

func (s store) sql(q string) string { return strings.ReplaceAll(q, "{db}", s.db) }

func collect(rows rowScanner, err error, each func() error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// bucketStart is the aligned start of the bucket holding t.
func bucketStart(t time.Time, w time.Duration) time.Time {
	s := int64(w / time.Second)
	return time.Unix(t.Unix()/s*s, 0).UTC()
}

// failuresSQL is the stacked chart's query.
const failuresSQL = `/* dashboard: failures */ SELECT toUInt32(intDiv(toUInt32(time), ?) * ?) AS b, error_code, toUInt64(uniqExact(cityHash64(event_id))) AS n
FROM {db}.events
PREWHERE error_code != ''
WHERE %s
GROUP BY b, error_code
ORDER BY b, error_code`

func (s store) failures(ctx context.Context, f Filter) (Failures, error) {
	w := int64(f.Bucket / time.Second)
	start := bucketStart(f.From, f.Bucket)
	n := int((f.To.Add(-time.Second).Unix()-start.Unix())/w) + 1
	out := Failures{Start: start, BucketSeconds: w, Buckets: n}
	where, wargs := f.where(true, true)
	byCode := map[string][]uint64{}
	var b uint32
	var code string
	var c uint64
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(failuresSQL, where)), append([]any{w, w}, wargs...)...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&b, &code, &c); err != nil {
			return err
		}
		i := int((int64(b) - start.Unix()) / w)
		if i < 0 || i >= n {
			return nil
		}
		if byCode[code] == nil {
			byCode[code] = make([]uint64, n)
		}
		byCode[code][i] += c
		return nil
	})
	if err != nil {
		return Failures{}, fmt.Errorf("failures over time: %w", err)
	}
	for _, k := range orderedCodes(byCode) {
		sr := Series{Code: k, Counts: byCode[k]}
		for _, v := range sr.Counts {
			sr.Total += v
		}
		out.Series = append(out.Series, sr)
	}
	return out, nil
}

// orderedCodes lists the keys of m: known codes in ErrorCodes order, then
// any other in sorted order.
func orderedCodes[V any](m map[string]V) []string {
	var out []string
	for _, k := range ErrorCodes {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	var rest []string
	for k := range m {
		known := false
		for _, c := range ErrorCodes {
			known = known || c == k
		}
		if !known {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// toolsSQL counts calls per tool, sparkline bucket and error code in one
// pass: an event has one tool, time and code (a replay too), so these
// distinct counts add up exactly to per-tool calls, failures and codes.
const toolsSQL = `/* dashboard: tools */ SELECT tool, toUInt32(intDiv(toUInt32(time), ?) * ?) AS b, error_code,
    toUInt64(uniqExact(cityHash64(event_id))) AS n
FROM {db}.events
WHERE %s AND tool != ''
GROUP BY tool, b, error_code`

// latencySQL is the per-tool latency quantiles.
const latencySQL = `/* dashboard: latency */ SELECT tool, quantiles(0.5, 0.95)(total_us) AS q
FROM {db}.events
WHERE %s AND tool != ''
GROUP BY tool`

// sparkBucket is the sparklines' bucket: at most SparkBuckets per range.
func (f Filter) sparkBucket() time.Duration {
	return Buckets[pickBucket(f.To.Sub(f.From), SparkBuckets, 0)].Width
}

// maxTools bounds the per-tool table.
const maxTools = 200

// tools builds the per-tool table: calls, failures (any code, or the
// filtered one), the most frequent failing code (a tie goes to the code
// first in alphabetical order, so the pick is stable), latency quantiles and
// the sparkline, most failures first.
func (s store) tools(ctx context.Context, f Filter) ([]ToolRow, error) {
	where, wargs := f.where(false, true)
	sw := f.sparkBucket()
	w := int64(sw / time.Second)
	start := bucketStart(f.From, sw)
	n := int((f.To.Add(-time.Second).Unix()-start.Unix())/w) + 1
	rowsBy := map[string]*ToolRow{}
	codes := map[string]map[string]uint64{}
	var tool, code string
	var b uint32
	var c uint64
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(toolsSQL, where)), append([]any{w, w}, wargs...)...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&tool, &b, &code, &c); err != nil {
			return err
		}
		r := rowsBy[tool]
		if r == nil {
			r = &ToolRow{Tool: tool, SparkCalls: make([]uint64, n), SparkFailures: make([]uint64, n)}
			rowsBy[tool], codes[tool] = r, map[string]uint64{}
		}
		failed := code != "" && (f.ErrorCode == "" || code == f.ErrorCode)
		r.Calls += c
		i := int((int64(b) - start.Unix()) / w)
		if i >= 0 && i < n {
			r.SparkCalls[i] += c
		}
		if failed {
			r.Failures += c
			codes[tool][code] += c
			if i >= 0 && i < n {
				r.SparkFailures[i] += c
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("per-tool table: %w", err)
	}
	out := make([]ToolRow, 0, len(rowsBy))
	for t, r := range rowsBy {
		if r.Calls > 0 {
			r.FailureRate = float64(r.Failures) / float64(r.Calls)
		}
		var best uint64
		for k, v := range codes[t] {
			if v > best || v == best && k < r.TopCode {
				best, r.TopCode = v, k
			}
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Failures != b.Failures {
			return a.Failures > b.Failures
		}
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		return a.Tool < b.Tool
	})
	if len(out) > maxTools {
		out = out[:maxTools]
	}
	if len(out) == 0 {
		return out, nil
	}
	idx := make(map[string]int, len(out))
	for i, r := range out {
		idx[r.Tool] = i
	}
	var qs []float64
	rows, err = s.q.query(ctx, s.sql(fmt.Sprintf(latencySQL, where)), wargs...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&tool, &qs); err != nil {
			return err
		}
		if i, ok := idx[tool]; ok && len(qs) == 2 {
			out[i].P50MS, out[i].P95MS = qs[0]/1000, qs[1]/1000
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	return out, nil
}

const messagesSQL = `/* dashboard: messages */ SELECT error_code, reason, detail, toUInt64(uniqExact(cityHash64(event_id))) AS calls, tool, min(trace_id)
FROM {db}.events
PREWHERE error_code IN ('validation', 'policy')
WHERE %s
GROUP BY error_code, reason, detail, tool
ORDER BY calls DESC, detail, tool
LIMIT 20`

func (s store) messages(ctx context.Context, f Filter) ([]Message, error) {
	where, args := f.where(true, true)
	var out []Message
	var m Message
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(messagesSQL, where)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&m.Code, &m.Reason, &m.Detail, &m.Calls, &m.Tool, &m.SampleTraceID); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("top messages: %w", err)
	}
	return out, nil
}

const budgetsSQL = `/* dashboard: budgets */ SELECT agent, tool, reason, budget, toUInt64(uniqExact(event_id)) AS calls,
    toUInt64(uniqExact(session)) AS sessions, toUInt32(max(time)) AS last
FROM {db}.events
PREWHERE reason IN (%s)
WHERE %s
GROUP BY agent, tool, reason, budget
ORDER BY calls DESC, agent, tool, reason, budget
LIMIT 50`

// budgets is the budgets and loops panel: the budget step's refusals by
// agent, tool, reason and budget.
func (s store) budgets(ctx context.Context, f Filter) ([]BudgetRow, error) {
	where, args := f.where(true, true)
	var out []BudgetRow
	var r BudgetRow
	var last uint32
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(budgetsSQL, budgetReasonsSQL, where)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&r.Agent, &r.Tool, &r.Reason, &r.Budget, &r.Calls, &r.Sessions, &last); err != nil {
			return err
		}
		r.Last = time.Unix(int64(last), 0).UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("budgets: %w", err)
	}
	return out, nil
}

const revisionsSQL = `/* dashboard: revisions */ SELECT sidecar, policy_version, toUInt64(uniqExact(event_id)) AS calls,
    toUInt32(min(time)) AS first, toUInt32(max(time)) AS last
FROM {db}.events
WHERE %s
GROUP BY sidecar, policy_version
ORDER BY sidecar, last DESC, policy_version
LIMIT 200`

// revisions is the policy revisions panel: which sidecars decided calls
// under which policy version, newest first for each sidecar.
func (s store) revisions(ctx context.Context, f Filter) ([]RevisionRow, error) {
	where, args := f.where(true, true)
	var out []RevisionRow
	var r RevisionRow
	var first, last uint32
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(revisionsSQL, where)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&r.Sidecar, &r.PolicyVersion, &r.Calls, &first, &last); err != nil {
			return err
		}
		r.First = time.Unix(int64(first), 0).UTC()
		r.Last = time.Unix(int64(last), 0).UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	return out, nil
}

const adoptionSQL = `/* dashboard: adoption */ SELECT tool, toUInt64(uniqExactIf(cityHash64(event_id), envelope = 1)) AS env, toUInt64(uniqExactIf(cityHash64(event_id), envelope = 0)) AS legacy,
    toUInt32(maxIf(time, envelope = 0)) AS last_legacy
FROM {db}.events
WHERE %s AND tool != ''
GROUP BY tool
ORDER BY tool
LIMIT 200`

func (s store) adoption(ctx context.Context, f Filter) ([]Adoption, error) {
	where, args := f.where(false, true)
	var out []Adoption
	var a Adoption
	var last uint32
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(adoptionSQL, where)), args...)
	err = collect(rows, err, func() error {
		a = Adoption{}
		if err := rows.Scan(&a.Tool, &a.Envelope, &a.Legacy, &last); err != nil {
			return err
		}
		if total := a.Envelope + a.Legacy; total > 0 {
			a.Share = float64(a.Envelope) / float64(total)
		}
		if last > 0 {
			a.LastLegacy = time.Unix(int64(last), 0).UTC()
		}
		a.Ready = a.Share > ReadyShare
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("envelope adoption: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Share > out[j].Share })
	return out, nil
}

const freshnessSQL = `/* dashboard: freshness */ SELECT sidecar, toUInt32(max(time)) AS last, toUInt64(uniqExact(cityHash64(event_id))) AS events,
    toInt64(countIf(time >= toDateTime(?))) AS recent,
    toInt64(maxIf(toInt64(inserted_at) - toInt64(time), time >= toDateTime(?))) AS delay
FROM {db}.events
WHERE %s
GROUP BY sidecar
ORDER BY sidecar
LIMIT 500`

// freshness ignores the tool, agent and code filters: it is about sidecars.
func (s store) freshness(ctx context.Context, f Filter, now time.Time) ([]Freshness, error) {
	where, args := f.where(false, false)
	end := f.To
	if now.Before(end) {
		end = now
	}
	var out []Freshness
	var r Freshness
	var last uint32
	var recent int64
	since := end.Add(-IngestWindow).Unix()
	args = append([]any{since, since}, args...)
	rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(freshnessSQL, where)), args...)
	err = collect(rows, err, func() error {
		if err := rows.Scan(&r.Sidecar, &last, &r.Events, &recent, &r.IngestDelaySeconds); err != nil {
			return err
		}
		if recent == 0 {
			r.IngestDelaySeconds = -1
		}
		r.IngestDelaySeconds = max(-1, r.IngestDelaySeconds)
		r.LastEvent = time.Unix(int64(last), 0).UTC()
		r.LagSeconds = max(0, int64(end.Sub(r.LastEvent)/time.Second))
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("freshness: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LagSeconds > out[j].LagSeconds })
	return out, nil
}

const optionsSQL = `/* dashboard: options */ SELECT %[1]s, count() AS n
FROM {db}.events
WHERE %[2]s AND %[1]s != ''
GROUP BY %[1]s
ORDER BY n DESC, %[1]s
LIMIT 200`

// options lists the tools and agents seen in the range, most frequent
// first (the column names are constants, never input).
func (s store) options(ctx context.Context, f Filter) (Options, error) {
	where, args := f.where(false, false)
	var out Options
	for _, col := range []string{"tool", "agent"} {
		var v string
		var n uint64
		var list []string
		rows, err := s.q.query(ctx, s.sql(fmt.Sprintf(optionsSQL, col, where)), args...)
		err = collect(rows, err, func() error {
			if err := rows.Scan(&v, &n); err != nil {
				return err
			}
			list = append(list, v)
			return nil
		})
		if err != nil {
			return Options{}, fmt.Errorf("%s options: %w", col, err)
		}
		sort.Strings(list)
		if col == "tool" {
			out.Tools = list
		} else {
			out.Agents = list
		}
	}
	return out, nil
}
