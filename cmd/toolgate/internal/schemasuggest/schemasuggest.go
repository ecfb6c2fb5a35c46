// Package schemasuggest is the work of toolgate schema suggest: it merges
// the argument shapes a tool in observe mode recorded (events' arg_shape,
// proxy/argshape) and proposes a strict JSON Schema (draft 2020-12) with
// its evidence: how many calls were seen, and per field how often it
// appeared and with which types.
//
// The rules, each from what was observed and nothing else:
//   - every object is closed (additionalProperties: false), except where
//     the shapes were cut by a bound or held names too long to record;
//   - a member is required only when it was present in every object at
//     its place;
//   - the type is the union of the types seen, "integer" when every number
//     was whole; a value from a string-only source (the path, the query,
//     a form) that always read as an integer, number or boolean gets that
//     type, which toolgate's coercion applies to such sources;
//   - a format only when every string at the place had it;
//   - an enum only for the fields the operator listed in
//     observe.enum_fields, and only when every value there was recorded.
//
// Observed traffic holds the callers' mistakes too. Options.MinShare
// (default 0: off) leaves out of the schema what is rarer than that share
// at its place (a member name, a type, strings that do not read as the
// number their source usually carries, strings without the format the
// others have): a typo seen in 1 call of 200 is then refused rather than
// learned. What it leaves out is listed in the evidence. It never makes a
// member required that some call lacked.
package schemasuggest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/argshape"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// ErrNoShapes is returned when the events hold no shape of the tool.
var ErrNoShapes = errors.New("no observed calls")

// Observed is what the events say about one tool's calls.
type Observed struct {
	// Tool is the tool's name.
	Tool string
	// Calls is how many of its events carry a shape; Unshaped how many do
	// not (the tool did not observe then, or the call was refused before
	// its arguments were read); Unread how many shapes note a body the
	// tool did not read; Bad how many shapes could not be read.
	Calls, Unshaped, Unread, Bad int
	// Shape is every call's shape, merged.
	Shape argshape.Shape
}

// Read reads NDJSON events (as the file sink writes them) and merges the
// shapes of tool's calls. A line longer than sink.MaxLineBytes or that is
// not an event is an error naming its line.
func Read(r io.Reader, tool string) (*Observed, error) {
	o := &Observed{Tool: tool}
	br := bufio.NewReaderSize(r, 64<<10)
	needle := []byte(`"tool":"` + tool + `"`)
	for n := 1; ; n++ {
		line, err := readLine(br, sink.MaxLineBytes)
		if len(bytes.TrimSpace(line)) > 0 && bytes.Contains(line, needle) {
			evs, derr := sink.ReadEvents(bytes.NewReader(line))
			if derr != nil {
				return nil, fmt.Errorf("line %d: %w", n, derr)
			}
			for _, ev := range evs {
				o.add(ev)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	return o, o.check()
}

func (o *Observed) check() error {
	if o.Calls == 0 {
		return fmt.Errorf("%w of tool %q (%d events without a shape): put it in observe mode (observe: true) and let calls flow", ErrNoShapes, o.Tool, o.Unshaped)
	}
	return nil
}

// ClickHouse names the ClickHouse events table ReadClickHouse reads.
type ClickHouse struct {
	Addr        []string
	Database    string // default clickhouse.DefaultDatabase
	Username    string
	PasswordEnv string // the environment variable holding the password
}

// ReadClickHouse merges the shapes of tool's calls recorded in ClickHouse
// at or after since, the newest limit of them. It only reads (no
// migration): SELECT on the events table is enough.
func ReadClickHouse(ctx context.Context, ch ClickHouse, tool string, since time.Time, limit int) (*Observed, error) {
	no := false
	cfg := clickhouse.Config{Addr: ch.Addr, Database: ch.Database, Username: ch.Username, PasswordEnv: ch.PasswordEnv, Migrate: &no}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w, err := clickhouse.Open(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	o := &Observed{Tool: tool}
	if err := w.ArgShapes(ctx, tool, since, limit, func(s string) error { o.addShape(s); return nil }); err != nil {
		return nil, err
	}
	return o, o.check()
}

func (o *Observed) add(ev sink.Event) {
	if ev.Tool != o.Tool {
		return
	}
	if ev.ArgShape == "" {
		o.Unshaped++
		return
	}
	o.addShape(ev.ArgShape)
}

// addShape merges one call's encoded shape.
func (o *Observed) addShape(text string) {
	s, err := argshape.Parse(text)
	if err != nil {
		o.Bad++
		return
	}
	if s.Note == argshape.NoteBodyUnread {
		o.Unread++
	}
	o.Calls++
	o.Shape.Merge(s)
}

// readLine reads one line (without its newline) of at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit+1 {
			return nil, fmt.Errorf("%w", sink.ErrLineTooLong)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// Field is the evidence for one place of the arguments.
type Field struct {
	// Path is the place: member names joined with '.', "[]" for an
	// array's items.
	Path string `json:"path"`
	// Seen is how many values were at the place; Of how many objects (or
	// arrays, for items) held the place, so Seen < Of means it was
	// sometimes absent.
	Seen int `json:"seen"`
	Of   int `json:"of"`
	// Types counts the values by JSON type.
	Types map[string]int `json:"types"`
	// Format is the format every string here had ("" when none did).
	Format string `json:"format,omitempty"`
	// Coerced is the type string values from a string-only source all
	// read as, which the schema asks for ("" when none).
	Coerced string `json:"coerced,omitempty"`
	// Enum is the values seen, when the field is an enum field and every
	// value was recorded.
	Enum []any `json:"enum,omitempty"`
	// Open is true when the schema leaves the place open: its shapes were
	// cut by a bound, or held names too long to record.
	Open bool `json:"open,omitempty"`
	// Rare is true when the place was left out of the schema, seen in
	// fewer than Options.MinShare of the objects at its parent; RareTypes
	// are the types left out at a place kept.
	Rare      bool     `json:"rare,omitempty"`
	RareTypes []string `json:"rare_types,omitempty"`
}

// Options tune a suggestion.
type Options struct {
	// MinShare, between 0 and 0.5, leaves out of the schema what is rarer
	// than this share at its place (see the package doc). Default 0: all
	// that was observed is in the schema.
	MinShare float64
}

// Suggestion is a proposed schema and its evidence.
type Suggestion struct {
	Tool string `json:"tool"`
	// Calls is how many observed calls the schema was built from.
	Calls int `json:"calls"`
	// Unshaped, Unread and Bad are as in Observed.
	Unshaped int `json:"unshaped,omitempty"`
	Unread   int `json:"unread,omitempty"`
	Bad      int `json:"bad,omitempty"`
	// MinShare is Options.MinShare.
	MinShare float64 `json:"min_share,omitempty"`
	// Fields is the evidence, one per place, in path order.
	Fields []Field `json:"fields"`
	// Schema is the proposed schema, as JSON.
	Schema json.RawMessage `json:"schema"`
}

// Suggest builds the schema and its evidence from what was observed, and
// checks that the schema compiles in toolgate's own (strict) compiler.
func Suggest(o *Observed, opts Options) (*Suggestion, error) {
	if opts.MinShare < 0 || opts.MinShare > 0.5 {
		return nil, fmt.Errorf("min share %v: want a share between 0 and 0.5", opts.MinShare)
	}
	sg := &Suggestion{Tool: o.Tool, Calls: o.Calls, Unshaped: o.Unshaped, Unread: o.Unread, Bad: o.Bad, MinShare: opts.MinShare}
	root := sg.schemaOf(&o.Shape, "", o.Calls)
	doc := ordered{
		{"$schema", "https://json-schema.org/draft/2020-12/schema"},
		{"title", fmt.Sprintf("%s arguments, suggested from %d observed calls", o.Tool, o.Calls)},
	}
	doc = append(doc, root...)
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	if _, err := policies.CompileSchema(b, policies.SchemaOptions{Tool: o.Tool, Strict: true}); err != nil {
		return nil, fmt.Errorf("the suggested schema does not compile: %w", err)
	}
	sg.Schema = b
	sort.Slice(sg.Fields, func(i, j int) bool { return sg.Fields[i].Path < sg.Fields[j].Path })
	return sg, nil
}

// schemaOf is the schema of one place; of is how many objects held it.
func (sg *Suggestion) schemaOf(s *argshape.Shape, path string, of int) ordered {
	f := Field{Path: path, Seen: s.Count(), Of: of, Types: s.Types}
	if path == "" {
		f.Path = "(arguments)"
	}
	types, rare := sg.typesOf(s)
	f.RareTypes = rare
	coerced := sg.coercedType(s)
	if coerced != "" {
		types = []string{coerced}
		f.Coerced = coerced
	}
	var out ordered
	if len(types) == 1 {
		out = append(out, kv{"type", types[0]})
	} else if len(types) > 1 {
		out = append(out, kv{"type", types})
	}
	if n := s.Types[argshape.TypeString]; n > 0 && coerced == "" {
		for name, c := range s.Formats {
			if sg.most(c, n) {
				out = append(out, kv{"format", name})
				f.Format = name
			}
		}
	}
	if vals := enumOf(s); vals != nil && coerced == "" {
		out = append(out, kv{"enum", vals})
		f.Enum = vals
	}
	kept := func(t string) bool {
		for _, k := range types {
			if k == t {
				return true
			}
		}
		return false
	}
	if kept(argshape.TypeObject) {
		names := make([]string, 0, len(s.Members))
		for k := range s.Members {
			names = append(names, k)
		}
		sort.Strings(names)
		props := ordered{}
		var required []string
		for _, k := range names {
			m := s.Members[k]
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if sg.rare(m.Count(), s.Types[argshape.TypeObject]) {
				sg.Fields = append(sg.Fields, Field{Path: sub, Seen: m.Count(), Of: s.Types[argshape.TypeObject], Types: m.Types, Rare: true})
				continue
			}
			props = append(props, kv{k, sg.schemaOf(m, sub, s.Types[argshape.TypeObject])})
			if m.Count() == s.Types[argshape.TypeObject] {
				required = append(required, k)
			}
		}
		if len(props) > 0 {
			out = append(out, kv{"properties", props})
		}
		if len(required) > 0 {
			out = append(out, kv{"required", required})
		}
		f.Open = s.Cut || s.Unnamed > 0
		out = append(out, kv{"additionalProperties", f.Open})
	} else if s.Cut {
		f.Open = true
	}
	if kept(argshape.TypeArray) && s.Items != nil && s.Items.Count() > 0 {
		out = append(out, kv{"items", sg.schemaOf(s.Items, path+"[]", s.Types[argshape.TypeArray])})
	}
	sg.Fields = append(sg.Fields, f)
	return out
}

// rare reports whether n of total is under the minimum share.
func (sg *Suggestion) rare(n, total int) bool {
	return sg.MinShare > 0 && float64(n) < sg.MinShare*float64(total)
}

// most reports whether n of total is all of it, or all but a rare part.
func (sg *Suggestion) most(n, total int) bool {
	return n == total || n < total && sg.rare(total-n, total)
}

// typesOf is the union of the types seen, without the rare ones, and
// "integer" folded into "number" when both were; and the rare types.
func (sg *Suggestion) typesOf(s *argshape.Shape) (kept, rare []string) {
	total := s.Count()
	for t, n := range s.Types {
		switch {
		case n <= 0:
		case sg.rare(n, total):
			rare = append(rare, t)
		case t == argshape.TypeInteger && s.Types[argshape.TypeNumber] > 0 && !sg.rare(s.Types[argshape.TypeNumber], total):
		default:
			kept = append(kept, t)
		}
	}
	sort.Strings(kept)
	sort.Strings(rare)
	return kept, rare
}

// coercedType is the type the string values at the place read as (all of
// them, or all but a rare part), when the values were strings from a
// string-only source.
func (sg *Suggestion) coercedType(s *argshape.Shape) string {
	n := s.Types[argshape.TypeString]
	if n == 0 || !sg.most(n, s.Count()) || s.Strings != n {
		return ""
	}
	switch {
	case sg.most(s.Lexical[argshape.TypeInteger], n):
		return argshape.TypeInteger
	case sg.most(s.Lexical[argshape.TypeInteger]+s.Lexical[argshape.TypeNumber], n):
		return argshape.TypeNumber
	case sg.most(s.Lexical[argshape.TypeBoolean], n):
		return argshape.TypeBoolean
	}
	return ""
}

// enumOf is the enum values of a place, when every value there was
// recorded; nil otherwise.
func enumOf(s *argshape.Shape) []any {
	if len(s.Enum) == 0 || s.EnumOver {
		return nil
	}
	total := 0
	texts := make([]string, 0, len(s.Enum))
	for t, n := range s.Enum {
		total += n
		texts = append(texts, t)
	}
	if total != s.Count() {
		return nil
	}
	sort.Strings(texts)
	vals := make([]any, 0, len(texts))
	for _, t := range texts {
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil
		}
		vals = append(vals, v)
	}
	return vals
}

// WriteEvidence writes the evidence as a table.
func (sg *Suggestion) WriteEvidence(w io.Writer) {
	fmt.Fprintf(w, "tool %s: %d observed calls", sg.Tool, sg.Calls)
	if sg.Unshaped > 0 {
		fmt.Fprintf(w, " (%d more events without a shape)", sg.Unshaped)
	}
	fmt.Fprintln(w)
	if sg.MinShare > 0 {
		fmt.Fprintf(w, "  left out: what is rarer than %g of its place\n", sg.MinShare)
	}
	if sg.Unread > 0 {
		fmt.Fprintf(w, "  %d calls had a body the tool did not read as arguments: their body is not in the schema\n", sg.Unread)
	}
	if sg.Bad > 0 {
		fmt.Fprintf(w, "  %d shapes could not be read and were skipped\n", sg.Bad)
	}
	for _, f := range sg.Fields {
		if f.Path == "(arguments)" {
			continue
		}
		ts := make([]string, 0, len(f.Types))
		for t := range f.Types {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		for i, t := range ts {
			ts[i] = fmt.Sprintf("%s %d", t, f.Types[t])
		}
		req := "optional"
		if f.Seen == f.Of {
			req = "required"
		}
		if strings.HasSuffix(f.Path, "[]") {
			req = "items"
		}
		line := fmt.Sprintf("  %-24s %5d/%-5d %-8s %s", f.Path, f.Seen, f.Of, req, strings.Join(ts, ", "))
		if f.Coerced != "" {
			line += "; all read as " + f.Coerced
		}
		if f.Format != "" {
			line += "; format " + f.Format
		}
		if f.Enum != nil {
			b, _ := json.Marshal(f.Enum)
			line += "; enum " + string(b)
		}
		if f.Open {
			line += "; left open (shapes cut or names not recorded)"
		}
		if len(f.RareTypes) > 0 {
			line += "; rare types left out: " + strings.Join(f.RareTypes, ", ")
		}
		if f.Rare {
			line += "; rare: left out"
		}
		fmt.Fprintln(w, line)
	}
}

// kv is one member of an ordered JSON object.
type kv struct {
	k string
	v any
}

// ordered is a JSON object whose members keep their order.
type ordered []kv

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
