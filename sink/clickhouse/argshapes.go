package clickhouse

import (
	"context"
	"fmt"
	"time"
)

// MaxArgShapes is the most shapes ArgShapes reads in one call.
const MaxArgShapes = 1_000_000

// ArgShapes calls fn with the arg_shape of each event of tool recorded at
// or after since that has one (a tool in observe mode), newest first, at
// most limit (1 to MaxArgShapes), each event once however often its
// batch was replayed. It only reads: it needs SELECT on the events table,
// and does not migrate.
func (c *Writer) ArgShapes(ctx context.Context, tool string, since time.Time, limit int, fn func(shape string) error) error {
	if limit < 1 || limit > MaxArgShapes {
		return fmt.Errorf("clickhouse: arg shapes: limit %d: want 1 to %d", limit, MaxArgShapes)
	}
	q := fmt.Sprintf("SELECT any(arg_shape) FROM %s.events WHERE tool = ? AND time >= ? AND arg_shape != '' "+
		"GROUP BY event_id ORDER BY max(time) DESC LIMIT %d", quoteIdent(c.cfg.Database), limit)
	rows, err := c.conn.Query(ctx, q, tool, since.UTC().Truncate(time.Second))
	if err != nil {
		return fmt.Errorf("clickhouse: read arg shapes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("clickhouse: read arg shapes: %w", err)
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse: read arg shapes: %w", err)
	}
	return nil
}
