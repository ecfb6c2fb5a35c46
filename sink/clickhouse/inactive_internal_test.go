package clickhouse

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
)

// TestInactiveHint reads the DDL timeouts 18.16 gave in this package's
// cluster tests: one whose server had not finished but was at work, and one
// whose server's DDL worker had stopped.
func TestInactiveHint(t *testing.T) {
	const (
		working = "Watching task /clickhouse/task_queue/ddl/query-0000000101 is executing longer than distributed_ddl_task_timeout (=60) seconds. There are 1 unfinished hosts (1 of them are currently active), they are going to execute the query in background"
		stopped = "Watching task /clickhouse/task_queue/ddl/query-0000000104 is executing longer than distributed_ddl_task_timeout (=60) seconds. There are 2 unfinished hosts (0 of them are currently active), they are going to execute the query in background"
	)
	wrap := func(code int32, msg string) error {
		return fmt.Errorf("clickhouse: %w", &chgo.Exception{Code: code, Name: "DB::Exception", Message: msg})
	}
	if h := inactiveHint(wrap(159, working)); h != "" {
		t.Errorf("a server at work: hint %q, want none", h)
	}
	h := inactiveHint(wrap(159, stopped))
	for _, want := range []string{"2 of the servers", "distributed DDL worker has stopped", "Terminating", "restart"} {
		if !strings.Contains(h, want) {
			t.Errorf("hint %q lacks %q", h, want)
		}
	}
	if h := inactiveHint(wrap(44, stopped)); h != "" {
		t.Errorf("another error code: hint %q, want none", h)
	}
	if h := inactiveHint(errors.New(stopped)); h != "" {
		t.Errorf("not a server's exception: hint %q, want none", h)
	}
}
