package schemasuggest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/argshape"
	"github.com/toolgate/toolgate/sink"
)

func args(t testing.TB, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// events writes one event per call of tool, with its shape, as NDJSON.
func events(t testing.TB, tool string, o argshape.Options, calls ...string) *bytes.Buffer {
	var b bytes.Buffer
	for _, c := range calls {
		ev := sink.Event{EventID: "e", Tool: tool, ArgShape: argshape.Of(args(t, c), o)}
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	other, _ := json.Marshal(sink.Event{EventID: "o", Tool: "other", ArgShape: argshape.Of(args(t, `{"zzz":1}`), o)})
	b.Write(append(other, '\n'))
	return &b
}

func suggest(t testing.TB, evs *bytes.Buffer, tool string) *Suggestion {
	t.Helper()
	obs, err := Read(evs, tool)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := Suggest(obs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

func TestSuggest(t *testing.T) {
	calls := []string{
		`{"query":"egfr","organism":"human","limit":5,"at":"2026-12-01T10:00:00Z","filters":{"phase_min":2}}`,
		`{"query":"braf","organism":"mouse","limit":10,"at":"2026-11-30T09:00:00Z"}`,
		`{"query":"kras","organism":"human","at":"2026-11-29T08:00:00+01:00","score":0.5,"filters":{"phase_min":1,"modality":"antibody"}}`,
		`{"query":"tp53","organism":"rat","at":"2026-11-28T07:00:00Z","score":1,"tags":["a","b"]}`,
	}
	sg := suggest(t, events(t, "drug_targets", argshape.Options{EnumFields: map[string]bool{"organism": true}}, calls...), "drug_targets")
	want := `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "drug_targets arguments, suggested from 4 observed calls",
  "type": "object",
  "properties": {
    "at": {
      "type": "string",
      "format": "date-time"
    },
    "filters": {
      "type": "object",
      "properties": {
        "modality": {
          "type": "string"
        },
        "phase_min": {
          "type": "integer"
        }
      },
      "required": [
        "phase_min"
      ],
      "additionalProperties": false
    },
    "limit": {
      "type": "integer"
    },
    "organism": {
      "type": "string",
      "enum": [
        "human",
        "mouse",
        "rat"
      ]
    },
    "query": {
      "type": "string"
    },
    "score": {
      "type": "number"
    },
    "tags": {
      "type": "array",
      "items": {
        "type": "string"
      }
    }
  },
  "required": [
    "at",
    "organism",
    "query"
  ],
  "additionalProperties": false
}`
	if string(sg.Schema) != want {
		t.Errorf("schema\n%s\nwant\n%s", sg.Schema, want)
	}
	sch, err := policies.CompileSchema(sg.Schema, policies.SchemaOptions{Tool: "drug_targets", Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if vs := sch.Validate(args(t, c)); len(vs) > 0 {
			t.Errorf("an observed call is refused: %s: %v", c, vs)
		}
	}
	for _, c := range []string{
		`{"qeury":"egfr","organism":"human","at":"2026-12-01T10:00:00Z"}`,
		`{"query":"egfr","organism":"human","at":"2026-12-01T10:00:00Z","limit":"5"}`,
		`{"query":"egfr","organism":"dog","at":"2026-12-01T10:00:00Z"}`,
		`{"query":"egfr","organism":"human","at":"yesterday"}`,
		`{"query":"egfr","organism":"human","at":"2026-12-01T10:00:00Z","filters":{"phase_min":1,"modalty":"x"}}`,
	} {
		if vs := sch.Validate(args(t, c)); len(vs) == 0 {
			t.Errorf("a wrong call passes: %s", c)
		}
	}
	var ev bytes.Buffer
	sg.WriteEvidence(&ev)
	for _, line := range []string{
		"tool drug_targets: 4 observed calls",
		"filters.phase_min            2/2     required integer 2",
		"limit                        2/4     optional integer 2",
		"score                        2/4     optional integer 1, number 1",
		`organism                     4/4     required string 4; enum ["human","mouse","rat"]`,
	} {
		if !strings.Contains(ev.String(), line) {
			t.Errorf("evidence lacks %q:\n%s", line, ev.String())
		}
	}
}

// TestSuggestStringSources checks that values from the query, the path or
// a form that always read as integers are proposed as integers (toolgate
// coerces such sources), and mixed ones as strings.
func TestSuggestStringSources(t *testing.T) {
	o := argshape.Options{StringSourced: func(string) bool { return true }}
	sg := suggest(t, events(t, "pubmed", o, `{"term":"a","retmax":"5"}`, `{"term":"b","retmax":"50","flag":"true"}`, `{"term":"7"}`), "pubmed")
	for _, want := range []string{`"retmax": {
      "type": "integer"`, `"flag": {
      "type": "boolean"`, `"term": {
      "type": "string"`} {
		if !strings.Contains(string(sg.Schema), want) {
			t.Errorf("schema lacks %s:\n%s", want, sg.Schema)
		}
	}
}

func TestSuggestOpenWhereCut(t *testing.T) {
	long := strings.Repeat("k", 100)
	sg := suggest(t, events(t, "t", argshape.Options{}, `{"a":{"`+long+`":1}}`, `{"a":{"b":1}}`), "t")
	if !strings.Contains(string(sg.Schema), `"additionalProperties": true`) || strings.Contains(string(sg.Schema), long) {
		t.Errorf("schema %s: want the object with an unrecorded name left open, and the name absent", sg.Schema)
	}
	sch, err := policies.CompileSchema(sg.Schema, policies.SchemaOptions{Tool: "t", Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if vs := sch.Validate(args(t, `{"a":{"`+long+`":1}}`)); len(vs) > 0 {
		t.Errorf("the observed call with a long name is refused under strict: %v", vs)
	}
}

func TestReadErrors(t *testing.T) {
	if _, err := Read(strings.NewReader(`{"tool":"x"}`+"\n"), "x"); !errors.Is(err, ErrNoShapes) {
		t.Errorf("no shapes: %v", err)
	}
	if _, err := Read(strings.NewReader(`{"tool":"x",`+"\n"), "x"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad line: %v", err)
	}
	big := `{"tool":"x","detail":"` + strings.Repeat("a", sink.MaxLineBytes) + `"}`
	if _, err := Read(strings.NewReader(big), "x"); !errors.Is(err, sink.ErrLineTooLong) {
		t.Errorf("long line: %v", err)
	}
	obs, err := Read(strings.NewReader(`{"tool":"x","arg_shape":"{\"t\":{\"object\":-1}}"}`+"\n"+`{"tool":"x","arg_shape":"{}"}`), "x")
	if err != nil || obs.Bad != 1 || obs.Calls != 1 {
		t.Errorf("bad shape: %+v, %v", obs, err)
	}
}

// FuzzRead checks that any events text is read or refused without a
// panic, and that a suggestion from it compiles.
func FuzzRead(f *testing.F) {
	f.Add(`{"tool":"x","arg_shape":"{\"t\":{\"object\":1},\"m\":{\"a\":{\"t\":{\"string\":1},\"f\":{\"uuid\":1}}}}"}`)
	f.Add(`{"tool":"x","arg_shape":"{\"t\":{\"object\":2},\"m\":{\"a\":{\"t\":{\"string\":1},\"e\":{\"1\":1,\"\\\"x\\\"\":3}}}}"}`)
	f.Add(`{"tool":"x","arg_shape":"{\"m\":{\"a\":{\"i\":{\"t\":{\"array\":1}}}}}"}`)
	f.Fuzz(func(t *testing.T, text string) {
		obs, err := Read(strings.NewReader(text), "x")
		if err != nil {
			return
		}
		if _, err := Suggest(obs, Options{}); err != nil {
			t.Fatalf("Suggest: %v", err)
		}
	})
}

// TestSuggestMinShare checks that with a minimum share the rare typo and
// the rare wrong type are left out (and refused by the schema), listed in
// the evidence, while no member some call lacked becomes required.
func TestSuggestMinShare(t *testing.T) {
	var calls []string
	for i := 0; i < 40; i++ {
		calls = append(calls, `{"term":"x","retmax":5}`)
	}
	calls = append(calls, `{"trem":"x"}`, `{"term":"x","retmax":"many"}`)
	obs, err := Read(events(t, "t", argshape.Options{}, calls...), "t")
	if err != nil {
		t.Fatal(err)
	}
	sg, err := Suggest(obs, Options{MinShare: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	sch, err := policies.CompileSchema(sg.Schema, policies.SchemaOptions{Tool: "t", Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{`{"term":"x","retmax":5}`: true, `{"term":"x"}`: true, `{"trem":"x"}`: false, `{"term":"x","retmax":"many"}`: false} {
		if vs := sch.Validate(args(t, c)); (len(vs) == 0) != want {
			t.Errorf("%s: violations %v; want accepted=%v\n%s", c, vs, want, sg.Schema)
		}
	}
	var ev bytes.Buffer
	sg.WriteEvidence(&ev)
	for _, want := range []string{"trem                         1/42    optional string 1; rare: left out", "rare types left out: string"} {
		if !strings.Contains(ev.String(), want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev.String())
		}
	}
	if _, err := Suggest(obs, Options{MinShare: 0.6}); err == nil {
		t.Error("min share 0.6 accepted")
	}
}
