package dashboard

import (
	"context"
	"regexp"
	"time"
)

// ObserveQueries makes d report each query's name (from its leading
// /* dashboard: NAME */ comment) and the time from sending it to closing its
// rows. Call it before serving.
func ObserveQueries(d *Dashboard, fn func(name string, took time.Duration)) {
	d.store.q = timedQuerier{q: d.store.q, fn: fn}
}

var queryName = regexp.MustCompile(`^/\* dashboard: (\w+) \*/`)

type timedQuerier struct {
	q  querier
	fn func(string, time.Duration)
}

func (t timedQuerier) query(ctx context.Context, sql string, args ...any) (rowScanner, error) {
	name := "unnamed"
	if m := queryName.FindStringSubmatch(sql); m != nil {
		name = m[1]
	}
	start := time.Now()
	rows, err := t.q.query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return &timedRows{rowScanner: rows, done: func() { t.fn(name, time.Since(start)) }}, nil
}

type timedRows struct {
	rowScanner
	done func()
}

func (r *timedRows) Close() error {
	err := r.rowScanner.Close()
	r.done()
	return err
}
