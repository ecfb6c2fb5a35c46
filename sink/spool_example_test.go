package sink_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/sink"
)

func ExampleSpool() {
	dir, err := os.MkdirTemp("", "toolgate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The destination: here an NDJSON file; in production ClickHouse.
	path := filepath.Join(dir, "events.ndjson")
	file, err := sink.OpenFile(sink.FileConfig{Path: path})
	if err != nil {
		log.Fatal(err)
	}
	// Record → Queue → Spool (on disk, fsync'ed) → destination.
	spool, err := sink.OpenSpool(sink.SpoolConfig{Dir: filepath.Join(dir, "spool")}, file, nil)
	if err != nil {
		log.Fatal(err)
	}
	q, err := sink.NewQueue(spool, sink.QueueConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}

	q.Record(sink.Event{EventID: "1", Time: time.Now().UTC(), Tool: "pubmed_search", OK: true})
	q.Record(sink.Event{EventID: "2", Time: time.Now().UTC(), Tool: "doc_edit", ErrorCode: "validation"})

	// At shutdown: the queue first, then the spool, which ships what it
	// holds while the destination is up and keeps the rest on disk.
	ctx := context.Background()
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}
	if err := spool.Close(ctx); err != nil {
		log.Fatal(err)
	}
	if err := file.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	events, err := sink.ReadEvents(r)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range events {
		fmt.Println(e.EventID, e.Tool)
	}
	st := spool.Status()
	fmt.Println(st.ShippedEvents, "shipped,", st.PendingEvents, "pending")
	// Output:
	// 1 pubmed_search
	// 2 doc_edit
	// 2 shipped, 0 pending
}
