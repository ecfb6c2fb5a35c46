package clickhouse_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
)

// TestArgShapes checks that arg_shape goes into ClickHouse as written
// (migration 13, the insert's column list) and comes back through
// ArgShapes: the tool's shapes only, newest first, since the time given,
// each event once though its batch was sent twice.
func TestArgShapes(t *testing.T) {
	srv := chtest.Shared(t)
	ch, _ := openCH(t, srv)
	base := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	var evs []sink.Event
	for i := 0; i < 5; i++ {
		evs = append(evs, sink.Event{EventID: fmt.Sprintf("s-%d", i), Time: base.Add(time.Duration(i) * time.Minute), Tool: "search",
			ArgShape: fmt.Sprintf(`{"t":{"object":1},"m":{"f%d":{"t":{"string":1}}}}`, i)})
	}
	evs = append(evs,
		sink.Event{EventID: "s-none", Time: base, Tool: "search"}, // not observing
		sink.Event{EventID: "o-1", Time: base, Tool: "other", ArgShape: `{"t":{"object":1}}`})
	ctx := context.Background()
	for _, b := range [][]sink.Event{evs, evs[:3]} {
		if err := ch.WriteEvents(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := ch.ArgShapes(ctx, "search", base.Add(time.Minute), 10, func(s string) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{evs[4].ArgShape, evs[3].ArgShape, evs[2].ArgShape, evs[1].ArgShape}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ArgShapes = %q\nwant %q", got, want)
	}
	got = nil
	if err := ch.ArgShapes(ctx, "search", base, 2, func(s string) error { got = append(got, s); return nil }); err != nil || len(got) != 2 {
		t.Errorf("limit 2: %q, %v", got, err)
	}
	if err := ch.ArgShapes(ctx, "search", base, 0, func(string) error { return nil }); err == nil {
		t.Error("limit 0 accepted")
	}
}
