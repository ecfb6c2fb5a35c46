package schemasuggest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/proxy/argshape"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// TestReadClickHouse suggests a schema from shapes stored in a real
// ClickHouse, as toolgate schema suggest --clickhouse does.
func TestReadClickHouse(t *testing.T) {
	srv := chtest.Shared(t)
	db := srv.Database(t)
	cfg := clickhouse.Config{Addr: []string{srv.Addr()}, Database: db}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := clickhouse.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var evs []sink.Event
	for i, c := range []string{`{"term":"a","retmax":5}`, `{"term":"b"}`, `{"term":"c","retmax":7}`} {
		evs = append(evs, sink.Event{EventID: fmt.Sprintf("e%d", i), Time: now.Add(-time.Duration(i) * time.Minute), Tool: "search", ArgShape: argshape.Of(args(t, c), argshape.Options{})})
	}
	evs = append(evs, sink.Event{EventID: "old", Time: now.Add(-48 * time.Hour), Tool: "search", ArgShape: argshape.Of(args(t, `{"old":1}`), argshape.Options{})})
	if err := w.WriteEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	ch := ClickHouse{Addr: cfg.Addr, Database: db}
	obs, err := ReadClickHouse(ctx, ch, "search", now.Add(-24*time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := Suggest(obs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sg.Calls != 3 || !strings.Contains(string(sg.Schema), `"required": [
    "term"
  ]`) || strings.Contains(string(sg.Schema), `"old"`) {
		t.Errorf("%d calls, schema %s; want 3 calls, term required, no old", sg.Calls, sg.Schema)
	}
	if _, err := ReadClickHouse(ctx, ch, "nothing", now.Add(-24*time.Hour), 100); !errors.Is(err, ErrNoShapes) {
		t.Errorf("a tool never observed: %v", err)
	}
}

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }
