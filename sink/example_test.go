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

func ExampleQueue() {
	dir, err := os.MkdirTemp("", "toolgate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.ndjson")

	file, err := sink.OpenFile(sink.FileConfig{Path: path})
	if err != nil {
		log.Fatal(err)
	}
	q, err := sink.NewQueue(file, sink.QueueConfig{}, nil)
	if err != nil {
		log.Fatal(err)
	}

	// The request path: Record never blocks.
	q.Record(sink.Event{EventID: "1", Time: time.Now().UTC(), Tool: "pubmed_search", OK: true})
	q.Record(sink.Event{EventID: "2", Time: time.Now().UTC(), Tool: "doc_edit", ErrorCode: "validation"})
	q.Record(sink.Event{EventID: "3", Time: time.Now().UTC(), Tool: "chembl_target", ErrorCode: "rate_limit"})

	// Flush hands everything recorded so far to the file.
	ctx := context.Background()
	if err := q.Flush(ctx); err != nil {
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
		fmt.Printf("%s ok=%t\n", e.Tool, e.OK)
	}

	// At shutdown: drain the queue, then close the file.
	if err := q.Close(ctx); err != nil {
		log.Fatal(err)
	}
	if err := file.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Stats().Written, "written")
	// Output:
	// pubmed_search ok=true
	// doc_edit ok=false
	// chembl_target ok=false
	// 3 written
}
