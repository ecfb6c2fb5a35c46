package steps

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"go.yaml.in/yaml/v3"
)

// fuzzAnswerRead is what a Go caller decoding an answer into tagged
// structs reads (encoding/json matches member names up to case folding).
type fuzzAnswerRead struct {
	Status string `json:"status"`
	Count  int    `json:"count"`
	Items  []struct {
		ID string `json:"id"`
	} `json:"items"`
}

// FuzzAnswerSchema holds the answer schema step to a differential: every
// answer body it lets through, read by encoding/json into tagged structs
// (as a Go caller reads it), holds only values the schema accepts; and a
// refusal never holds a marker value the body carries.
func FuzzAnswerSchema(f *testing.F) {
	const cfgYAML = `
tools:
  - name: guarded
    match: {path: /x}
    answer:
      schema: {type: object, properties: {status: {enum: [ok, pending]}, count: {type: integer, maximum: 10}, items: {type: array, items: {type: object, properties: {id: {type: string, maxLength: 4}}}}}}
`
	var cfg conf.Config
	dec := yaml.NewDecoder(strings.NewReader(cfgYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		f.Fatal(err)
	}
	if err := cfg.Validate(f.TempDir()); err != nil {
		f.Fatal(err)
	}
	step := buildAnswerSchema(cfg.Compiled[0])
	if step == nil {
		f.Fatal("no answer schema step")
	}
	st := &pipe.State{Snapshot: pipe.Snapshot{Config: &cfg}, Cfg: &cfg}
	for _, s := range []string{
		`{"status":"ok","count":1}`,
		`{"status":"hacked"}`,
		`{"STATUS":"hacked"}`,
		`{"ſtatus":"hacked"}`,
		`{"status":"ok","Status":"hacked"}`,
		`{"status":"ok","status":"hacked"}`,
		`{"st\u0061tus":"hacked"}`,
		`{"count":1,"Count":99}`,
		`{"count":1e1}`,
		`{"count":1.1e1}`,
		`{"items":[{"id":"ok"},{"ID":"hacked"}]}`,
		`{"items":[{"id":"ok","İD":"hacked"}]}`,
		`{"status":"ok"}{"status":"hacked"}`,
		"\ufeff{\"status\":\"hacked\"}",
		`{"hacked":true}`,
		`[{"status":"hacked"}]`,
		` {"status":"pending"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := &pipe.Call{State: st}
		a := &pipe.Answer{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
		ref := step.Answer(context.Background(), c, a)
		if ref != nil {
			if strings.Contains(string(body), "hacked") && strings.Contains(string(ref.Envelope()), "hacked") {
				t.Fatalf("the refusal echoes the answer: %s", ref.Envelope())
			}
			return
		}
		var r fuzzAnswerRead
		if json.Unmarshal(body, &r) != nil {
			return // the caller cannot read it either
		}
		if r.Status != "" && r.Status != "ok" && r.Status != "pending" || r.Count > 10 {
			t.Fatalf("passed %q, which a Go caller reads as %+v", body, r)
		}
		for _, it := range r.Items {
			if len([]rune(it.ID)) > 4 {
				t.Fatalf("passed %q, which a Go caller reads as %+v", body, r)
			}
		}
	})
}
