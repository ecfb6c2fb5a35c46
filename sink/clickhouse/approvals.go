package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policies/approval/audit"
)

// ApprovalStore keeps approval requests and decisions in the
// approval_requests and approval_decisions tables (migration 7; the
// call's method and destination since migration 10), so every
// sidecar and the dashboard on one server share them. Rows are inserted
// once, never changed: they are the audit trail.
type ApprovalStore struct {
	w        *Writer
	requests string
	decision string
	window   time.Duration
}

var requestColumns = []string{"id", "time", "time_us", "expires_at", "key", "tool", "agent", "session",
	"args_digest", "effect", "summary", "policy", "sidecar", "trace_id", "method", "destination"}

var decisionColumns = []string{"id", "time", "time_us", "verdict", "decider", "note"}

// Approvals returns the approval store on the writer's connection. A
// window above zero bounds FindRows to the requests made in the last
// window (give it the gate's pending_ttl plus decision_ttl, past which
// every request is expired whatever happened to it, as the file store
// drops them), so that a lookup reads the recent part of the table
// (ordered by time) rather than the whole audit trail; zero finds
// requests of any age.
func (c *Writer) Approvals(window time.Duration) *ApprovalStore {
	db := quoteIdent(c.cfg.Database)
	return &ApprovalStore{w: c, requests: db + ".approval_requests", decision: db + ".approval_decisions", window: max(window, 0)}
}

// findSlack widens FindRows's window for the clocks of the sidecars that
// wrote the rows, which may run ahead of or behind this one's.
const findSlack = 10 * time.Minute

func (s *ApprovalStore) ready(ctx context.Context) error {
	if s.w.migrated.Load() {
		return nil
	}
	return s.w.Migrate(ctx)
}

// PutRequest inserts a request row.
func (s *ApprovalStore) PutRequest(ctx context.Context, r audit.ApprovalRequest) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	summary, err := json.Marshal(r.Summary)
	if err != nil {
		return fmt.Errorf("clickhouse: approval summary: %w", err)
	}
	t := r.Time.UTC()
	return s.insert(ctx, s.requests, requestColumns,
		clean(r.ID, maxCHShort), t, uint32(t.Nanosecond()/1000), r.ExpiresAt.UTC(), clean(r.Key, maxCHShort),
		clean(r.Tool, maxCHShort), clean(r.Agent, maxCHShort), clean(r.Session, maxCHShort),
		clean(r.ArgsDigest, maxCHShort), clean(r.Effect, maxCHString), clean(string(summary), maxCHString*4),
		clean(r.Policy, maxCHShort), clean(r.Sidecar, maxCHShort), clean(r.TraceID, maxCHShort),
		clean(r.Method, maxCHShort), clean(r.Destination, maxCHString))
}

// PutDecision inserts a decision row.
func (s *ApprovalStore) PutDecision(ctx context.Context, d audit.ApprovalDecision) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	t := d.Time.UTC()
	return s.insert(ctx, s.decision, decisionColumns,
		clean(d.ID, maxCHShort), t, uint32(t.Nanosecond()/1000), clean(d.Verdict, maxCHShort),
		clean(d.Decider, maxCHShort), clean(d.Note, maxCHString))
}

func (s *ApprovalStore) insert(ctx context.Context, table string, cols []string, vals ...any) error {
	ctx, cancel := context.WithTimeout(ctx, s.w.cfg.WriteTimeout)
	defer cancel()
	b, err := s.w.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+")")
	if err != nil {
		return fmt.Errorf("clickhouse: prepare %s insert: %w", table, err)
	}
	if err := b.Append(vals...); err != nil {
		b.Abort()
		return fmt.Errorf("clickhouse: append %s: %w", table, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: insert %s: %w", table, err)
	}
	return nil
}

// FindRows returns the request with id (when id is not ""), else the
// newest request with key, and its decisions in time order: among the
// requests of the store's window (Approvals) when it has one.
func (s *ApprovalStore) FindRows(ctx context.Context, id, key string) (audit.ApprovalRequest, []audit.ApprovalDecision, bool, error) {
	if err := s.ready(ctx); err != nil {
		return audit.ApprovalRequest{}, nil, false, err
	}
	where, args := "key = ?", []any{key}
	if id != "" {
		where, args = "id = ?", []any{id}
	}
	if s.window > 0 {
		// time leads the table's order: the server reads only the parts
		// and granules of the window.
		where += " AND time >= ?"
		args = append(args, time.Now().Add(-s.window-findSlack).UTC().Truncate(time.Second))
	}
	reqs, err := s.requestRows(ctx, "WHERE "+where+" ORDER BY time DESC, time_us DESC LIMIT 1", args...)
	if err != nil || len(reqs) == 0 {
		return audit.ApprovalRequest{}, nil, false, err
	}
	decs, err := s.decisionRows(ctx, []string{reqs[0].ID})
	if err != nil {
		return audit.ApprovalRequest{}, nil, false, err
	}
	return reqs[0], decs[reqs[0].ID], true, nil
}

// RecentRows returns requests made at or after since, newest first, at
// most limit, and their decisions by request id.
func (s *ApprovalStore) RecentRows(ctx context.Context, since time.Time, limit int) ([]audit.ApprovalRequest, map[string][]audit.ApprovalDecision, error) {
	if err := s.ready(ctx); err != nil {
		return nil, nil, err
	}
	reqs, err := s.requestRows(ctx, fmt.Sprintf("WHERE time >= ? ORDER BY time DESC, time_us DESC LIMIT %d", max(limit, 0)), since.UTC().Truncate(time.Second))
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(reqs))
	for i := range reqs {
		ids[i] = reqs[i].ID
	}
	decs, err := s.decisionRows(ctx, ids)
	return reqs, decs, err
}

// CountPending counts the requests made at or after since (to the
// second) that have no verdict and have not expired at now, up to limit,
// in one query: the server counts, so a new approval request does not
// fetch every recent request and its decisions to count them.
func (s *ApprovalStore) CountPending(ctx context.Context, since, now time.Time, limit int) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.w.cfg.WriteTimeout)
	defer cancel()
	since = since.UTC().Truncate(time.Second)
	// expires_at is whole seconds, so expires_at > now to the second is
	// now.Before(expires_at).
	var n uint64
	err := s.w.conn.QueryRow(ctx, "SELECT uniqExact(id) FROM "+s.requests+
		" WHERE time >= ? AND expires_at > ? AND id NOT IN (SELECT id FROM "+s.decision+
		" WHERE verdict != 'used' AND id IN (SELECT id FROM "+s.requests+" WHERE time >= ?))",
		since, now.UTC().Truncate(time.Second), since).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("clickhouse: count pending approval requests: %w", err)
	}
	return int(min(n, uint64(max(limit, 0)))), nil
}

func (s *ApprovalStore) requestRows(ctx context.Context, tail string, args ...any) ([]audit.ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, s.w.cfg.WriteTimeout)
	defer cancel()
	rows, err := s.w.conn.Query(ctx, "SELECT "+strings.Join(requestColumns, ", ")+" FROM "+s.requests+" "+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: read approval requests: %w", err)
	}
	defer rows.Close()
	var out []audit.ApprovalRequest
	for rows.Next() {
		var r audit.ApprovalRequest
		var us uint32
		var summary string
		if err := rows.Scan(&r.ID, &r.Time, &us, &r.ExpiresAt, &r.Key, &r.Tool, &r.Agent, &r.Session,
			&r.ArgsDigest, &r.Effect, &summary, &r.Policy, &r.Sidecar, &r.TraceID, &r.Method, &r.Destination); err != nil {
			return nil, fmt.Errorf("clickhouse: read approval requests: %w", err)
		}
		r.Time = r.Time.UTC().Add(time.Duration(us) * time.Microsecond)
		r.ExpiresAt = r.ExpiresAt.UTC()
		_ = json.Unmarshal([]byte(summary), &r.Summary)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *ApprovalStore) decisionRows(ctx context.Context, ids []string) (map[string][]audit.ApprovalDecision, error) {
	out := map[string][]audit.ApprovalDecision{}
	// The ids are toolgate's own (hex), written into the query as a
	// literal list: 18.16 cannot take a bound array after IN.
	var list []string
	for _, id := range ids {
		if id != "" && strings.Trim(id, "0123456789abcdef") == "" {
			list = append(list, "'"+id+"'")
		}
	}
	if len(list) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.w.cfg.WriteTimeout)
	defer cancel()
	rows, err := s.w.conn.Query(ctx, "SELECT "+strings.Join(decisionColumns, ", ")+" FROM "+s.decision+" WHERE id IN ("+strings.Join(list, ", ")+")")
	if err != nil {
		return nil, fmt.Errorf("clickhouse: read approval decisions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d audit.ApprovalDecision
		var us uint32
		if err := rows.Scan(&d.ID, &d.Time, &us, &d.Verdict, &d.Decider, &d.Note); err != nil {
			return nil, fmt.Errorf("clickhouse: read approval decisions: %w", err)
		}
		d.Time = d.Time.UTC().Add(time.Duration(us) * time.Microsecond)
		out[d.ID] = append(out[d.ID], d)
	}
	for _, ds := range out {
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].Time.Before(ds[j].Time) })
	}
	return out, rows.Err()
}
