package policies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// decodeUseNumber decodes one JSON value as the proxy's argument decoder
// does (encoding/json with UseNumber), or fails.
func decodeUseNumber(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data")
	}
	return v, nil
}

// fastDiff checks the fast path's one promise on one value: when it says
// valid, the library says valid. It reports the two answers.
func fastDiff(t *testing.T, s *Schema, v any, what string) (fast, lib bool) {
	t.Helper()
	fast = s.fast.ok(v, 0)
	lib = s.sch.Validate(v) == nil
	if fast && !lib {
		doc, _ := json.Marshal(v)
		t.Errorf("%s: fast path says valid, jsonschema/v6 refuses %s", what, doc)
	}
	return fast, lib
}

// libraryOnly returns a copy of s without the fast path: what Validate
// answered before it.
func libraryOnly(s *Schema) *Schema {
	c := *s
	c.fast = nil
	return &c
}

// TestFastSchemaSuite runs every draft2020-12 and draft7 case of the
// JSON-Schema-Test-Suite (the copy TestJSONSchemaTestSuite reads, any
// data shape) whose schema gets a fast path, in both modes: the fast path
// may say valid only where jsonschema/v6 does (and, as written, only
// where the suite does), and Validate's answer, violations included, is
// the same with and without it. Each keyword of the subset must take the
// fast path in some case, and the fast path must accept most of the valid
// cases it sees.
func TestFastSchemaSuite(t *testing.T) {
	root := suiteDir(t)
	remotes, remotesURL := localRemotes(t, root)
	for _, draft := range []string{"draft2020-12", "draft7"} {
		t.Run(draft, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(root, draft, "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no suite files: %v", err)
			}
			var total, fastCases, fastValid, libValid, sameViolations int
			fastFiles := map[string]bool{}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var groups []suiteGroup
				if err := json.Unmarshal(b, &groups); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				file := filepath.Base(f)
				for _, g := range groups {
					schema, dir := withDraft(g.Schema, draft), ""
					if bytes.Contains(schema, []byte(remoteBase)) {
						schema, dir = bytes.ReplaceAll(schema, []byte(remoteBase), []byte(remotesURL)), remotes
					}
					for _, strict := range []bool{false, true} {
						s, err := CompileSchema(schema, SchemaOptions{Tool: "suite", Strict: strict, UnknownFormats: FormatsIgnore, Dir: dir})
						if err != nil {
							continue // TestJSONSchemaTestSuite reports compile errors
						}
						for _, tc := range g.Tests {
							total++
							if s.fast == nil {
								continue
							}
							name := fmt.Sprintf("%s: %s: %s (strict %v)", file, g.Description, tc.Description, strict)
							data, err := decodeUseNumber(tc.Data)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							fastCases++
							fastFiles[file] = true
							fast, lib := fastDiff(t, s, data, name)
							if lib {
								libValid++
							}
							if fast {
								fastValid++
								if !strict && !tc.Valid {
									t.Errorf("%s: fast path says valid, the suite says invalid", name)
								}
							}
							obj, ok := data.(map[string]any)
							if !ok {
								continue
							}
							got, want := s.Validate(obj), libraryOnly(s).Validate(obj)
							if !reflect.DeepEqual(got, want) {
								t.Errorf("%s: Validate answers %+v with the fast path, %+v without", name, got, want)
							} else {
								sameViolations++
							}
						}
					}
				}
			}
			t.Logf("%s: %d case runs (both modes), %d with a fast path; it says valid on %d of the %d jsonschema/v6 accepts; %d object-shaped runs answer the same violations with and without it; files with a fast-path case: %d",
				draft, total, fastCases, fastValid, libValid, sameViolations, len(fastFiles))
			for _, f := range []string{"additionalProperties.json", "allOf.json", "anyOf.json", "boolean_schema.json",
				"const.json", "enum.json", "exclusiveMaximum.json", "exclusiveMinimum.json", "items.json",
				"maxItems.json", "maxLength.json", "maxProperties.json", "maximum.json", "minItems.json",
				"minLength.json", "minProperties.json", "minimum.json", "pattern.json", "patternProperties.json",
				"properties.json", "ref.json", "required.json", "type.json"} {
				if !fastFiles[f] {
					t.Errorf("no case of %s took the fast path", f)
				}
			}
			if draft == "draft2020-12" && !fastFiles["prefixItems.json"] {
				t.Errorf("no case of prefixItems.json took the fast path")
			}
			// Unsure answers are allowed, but the fast path must carry
			// its weight: most valid calls of schemas it covers.
			if fastValid*10 < libValid*9 {
				t.Errorf("the fast path accepted %d of %d valid runs", fastValid, libValid)
			}
		})
	}
}

// shapeGen draws schema documents and instances from a byte source (fuzz
// bytes, or random bytes in go test): the keywords of the fast path's
// subset, plus a few outside it, over a small pool of names, numbers and
// strings so that instances often meet their schemas.
type shapeGen struct {
	b      []byte
	i      int
	legacy bool // draft-07: items as a tuple, additionalItems, definitions
}

func (g *shapeGen) next() int {
	if g.i >= len(g.b) {
		return 0
	}
	c := g.b[g.i]
	g.i++
	return int(c)
}

var (
	genNames   = []string{"a", "b", "c", "x1", "Ab"}
	genNumbers = []string{"0", "1", "-1", "0.5", "1.5", "2", "10", "1e2", "-0.0001", "100", "3.000", "0.1", "1E-7",
		"12345678901234567890123", "0.30000000000000004", "-2.5", "9007199254740993", "1.0", "-0"}
	genStrings  = []string{"", "a", "abc", "ab1", "ñé", "日本語", "x1", "A", "aaaaa"}
	genPatterns = []string{"^a", "b$", "^[a-z]+$", "\\d", "^.{2,3}$", "é"}
	genTypes    = []string{"null", "boolean", "number", "integer", "string", "array", "object"}
)

func (g *shapeGen) pick(list []string) string { return list[g.next()%len(list)] }

func (g *shapeGen) number() json.Number { return json.Number(g.pick(genNumbers)) }

// value draws an instance.
func (g *shapeGen) value(depth int) any {
	c := g.next() % 9
	if depth > 3 {
		c %= 5
	}
	switch c {
	case 0:
		return nil
	case 1:
		return g.next()%2 == 0
	case 2, 3:
		return g.number()
	case 4:
		return g.pick(genStrings)
	case 5, 6:
		obj := map[string]any{}
		for n := g.next() % 4; n > 0; n-- {
			obj[g.pick(genNames)] = g.value(depth + 1)
		}
		return obj
	default:
		arr := []any{}
		for n := g.next() % 4; n > 0; n-- {
			arr = append(arr, g.value(depth+1))
		}
		return arr
	}
}

// schema draws a schema.
func (g *shapeGen) schema(depth int) any {
	c := g.next() % 20
	if depth > 2 {
		c %= 8
	}
	s := map[string]any{}
	switch c {
	case 0:
		return g.next()%3 != 0
	case 1:
		s["type"] = g.pick(genTypes)
	case 2:
		s["type"] = []any{g.pick(genTypes), g.pick(genTypes)}
	case 3:
		if g.next()%2 == 0 {
			s["type"] = "integer"
		}
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if g.next()%3 == 0 {
				s[k] = g.number()
			}
		}
	case 4:
		s["type"] = "string"
		if g.next()%2 == 0 {
			s["minLength"] = g.next() % 4
		}
		if g.next()%2 == 0 {
			s["maxLength"] = g.next() % 4
		}
		if g.next()%2 == 0 {
			s["pattern"] = g.pick(genPatterns)
		}
	case 5:
		var e []any
		for n := 1 + g.next()%3; n > 0; n-- {
			e = append(e, g.value(3))
		}
		s["enum"] = e
	case 6:
		s["const"] = g.value(3)
	case 7:
		// Outside the subset: no fast path, the library alone.
		k := g.pick([]string{"format", "multipleOf", "uniqueItems", "not"})
		s[k] = map[string]any{"format": "email", "multipleOf": json.Number("0.5"), "uniqueItems": true,
			"not": map[string]any{"type": "string"}}[k]
	case 8, 9, 10, 11:
		s["type"] = "object"
		props := map[string]any{}
		for n := g.next() % 4; n > 0; n-- {
			props[g.pick(genNames)] = g.schema(depth + 1)
		}
		if len(props) > 0 || g.next()%2 == 0 {
			s["properties"] = props
		}
		var req []any
		for n := g.next() % 3; n > 0; n-- {
			req = append(req, g.pick(genNames))
		}
		if len(req) > 0 {
			s["required"] = req
		}
		switch g.next() % 4 {
		case 0:
			s["additionalProperties"] = false
		case 1:
			s["additionalProperties"] = g.schema(depth + 1)
		}
		if g.next()%4 == 0 {
			s["patternProperties"] = map[string]any{g.pick(genPatterns): g.schema(depth + 1)}
		}
		if g.next()%4 == 0 {
			s["minProperties"] = g.next() % 3
		}
		if g.next()%4 == 0 {
			s["maxProperties"] = g.next() % 4
		}
	case 12, 13, 14:
		s["type"] = "array"
		if g.next()%2 == 0 {
			var tuple []any
			for n := 1 + g.next()%2; n > 0; n-- {
				tuple = append(tuple, g.schema(depth+1))
			}
			if g.legacy {
				s["items"] = tuple
				switch g.next() % 3 {
				case 0:
					s["additionalItems"] = false
				case 1:
					s["additionalItems"] = g.schema(depth + 1)
				}
			} else {
				s["prefixItems"] = tuple
				if g.next()%2 == 0 {
					s["items"] = g.schema(depth + 1)
				}
			}
		} else if g.next()%3 != 0 {
			s["items"] = g.schema(depth + 1)
		} else if g.legacy {
			s["additionalItems"] = g.schema(depth + 1)
		}
		if g.next()%3 == 0 {
			s["minItems"] = g.next() % 3
		}
		if g.next()%3 == 0 {
			s["maxItems"] = g.next() % 4
		}
	case 15:
		s["allOf"] = []any{g.schema(depth + 1), g.schema(depth + 1)}
	case 16, 17:
		// Optional, as pydantic writes it.
		s["anyOf"] = []any{g.schema(depth + 1), map[string]any{"type": "null"}}
		if g.next()%2 == 0 {
			s["anyOf"] = []any{g.schema(depth + 1), g.schema(depth + 1)}
		}
	case 18, 19:
		defs := "$defs"
		if g.legacy {
			defs = "definitions"
		}
		s["$ref"] = "#/" + defs + "/d"
		if g.next()%2 == 0 {
			s["type"] = g.pick(genTypes)
		}
		if g.next()%2 == 0 {
			s["minProperties"] = 1 // ignored beside $ref in draft-07
		}
	}
	if g.next()%5 == 0 {
		s["description"] = "d"
	}
	return s
}

// document draws a whole schema document: the root and the $defs (or
// definitions) entry "d" that $ref names, which may refer to itself.
func (g *shapeGen) document() []byte {
	g.legacy = g.next()%4 == 0
	root, ok := g.schema(0).(map[string]any)
	if !ok {
		root = map[string]any{"allOf": []any{g.schema(0)}}
	}
	if g.legacy {
		root["$schema"] = "http://json-schema.org/draft-07/schema#"
		root["definitions"] = map[string]any{"d": g.schema(1)}
	} else {
		root["$defs"] = map[string]any{"d": g.schema(1)}
	}
	b, err := json.Marshal(root)
	if err != nil {
		panic(err)
	}
	return b
}

// checkGenerated compiles doc in both modes and checks the fast path's
// promise on v. It returns how many runs had a fast path and how many of
// them it called valid, and how many the library accepted.
func checkGenerated(t *testing.T, doc []byte, v any) (runs, fastValid, libValid int) {
	t.Helper()
	if HasHugeNumber(v) {
		return 0, 0, 0 // Validate refuses these before either path
	}
	for _, strict := range []bool{false, true} {
		s, err := CompileSchema(doc, SchemaOptions{Tool: "gen", Strict: strict})
		if err != nil || s.fast == nil {
			continue
		}
		runs++
		what := fmt.Sprintf("schema %s (strict %v)", doc, strict)
		fast, lib := fastDiff(t, s, v, what)
		if fast {
			fastValid++
		}
		if lib {
			libValid++
		}
		if obj, ok := v.(map[string]any); ok {
			if got, want := s.Validate(obj), libraryOnly(s).Validate(obj); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: Validate answers %+v with the fast path, %+v without", what, got, want)
			}
		}
	}
	return runs, fastValid, libValid
}

// instanceFrom decodes data as JSON (UseNumber); bytes that are not one
// JSON value draw an instance from the generator instead, marshalled and
// decoded the same way.
func instanceFrom(data []byte) any {
	if len(data) <= 4096 {
		if v, err := decodeUseNumber(data); err == nil {
			return v
		}
	}
	g := &shapeGen{b: data}
	b, _ := json.Marshal(g.value(0))
	v, err := decodeUseNumber(b)
	if err != nil {
		panic(err)
	}
	return v
}

// TestFastSchemaGenerated draws schemas of the subset (and a few keywords
// outside it) and instances near them from a fixed random source, and
// checks the fast path's promise on each, in both modes.
func TestFastSchemaGenerated(t *testing.T) {
	n := 1500
	if raceEnabled || testing.Short() {
		n = 200
	}
	r := rand.New(rand.NewPCG(45, 2026))
	var runs, fastValid, libValid int
	for range n {
		shape := make([]byte, 64)
		for i := range shape {
			shape[i] = byte(r.Uint32())
		}
		doc := (&shapeGen{b: shape}).document()
		for range 4 {
			data := make([]byte, 24)
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			a, b, c := checkGenerated(t, doc, instanceFrom(data))
			runs, fastValid, libValid = runs+a, fastValid+b, libValid+c
		}
	}
	t.Logf("%d runs with a fast path; it said valid on %d of the %d jsonschema/v6 accepted", runs, fastValid, libValid)
	if runs == 0 || fastValid*10 < libValid*8 {
		t.Errorf("the fast path accepted %d of %d valid runs (%d runs)", fastValid, libValid, runs)
	}
}

// FuzzFastSchema checks the fast path's promise on schemas drawn from the
// shape bytes and an instance from the data bytes (JSON decoded with
// UseNumber, or drawn from them), in strict and non-strict mode.
func FuzzFastSchema(f *testing.F) {
	shapes := [][]byte{
		{8, 3, 1, 4, 2, 1, 2, 3},
		{9, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{12, 13, 14, 4, 1, 2, 3, 0, 1},
		{16, 4, 1, 1, 2, 0},
		{18, 1, 1, 8, 3, 3, 0, 1},
		{3, 1, 0, 0, 0, 2, 3, 5},
		{0, 15, 3, 1, 3, 5, 7, 9, 1, 2},
		{5, 2, 2, 7, 11, 13},
	}
	datas := []string{
		`{"a": 1, "b": "abc", "c": [1, 2]}`, `1.5`, `"ab1"`, `[1, "a", null]`, `{"a": {"b": 1e2}}`,
		`12345678901234567890123`, `{"x1": -0.0001, "Ab": true}`, `{}`, `[]`, `3.000`, `null`,
		"\x05\x02\x01\x09\x08",
	}
	for i, s := range shapes {
		f.Add(s, []byte(datas[i%len(datas)]))
		f.Add(s, []byte(datas[(i+5)%len(datas)]))
	}
	f.Fuzz(func(t *testing.T, shape, data []byte) {
		if len(shape) > 256 || len(data) > 4096 {
			return
		}
		doc := (&shapeGen{b: shape}).document()
		checkGenerated(t, doc, instanceFrom(data))
	})
}

// mcpToolSchema is what an MCP SDK lists for a typical tool: an object of
// strings, integers, numbers, booleans, an enum and an array of strings,
// some required, with an Optional field as pydantic writes it.
const mcpToolSchema = `{
	"type": "object",
	"properties": {
		"query": {"type": "string", "description": "What to search for", "minLength": 1, "maxLength": 500},
		"limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
		"threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
		"include_archived": {"type": "boolean"},
		"sort": {"type": "string", "enum": ["relevance", "date"]},
		"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
		"cursor": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
	},
	"required": ["query"],
	"additionalProperties": false,
	"$schema": "http://json-schema.org/draft-07/schema#"
}`

// TestFastSchemaTypicalTool checks that a typical MCP tool schema takes
// the fast path in strict mode, that a valid call is accepted without a
// single allocation, and that an invalid one still gets the library's
// violations.
func TestFastSchemaTypicalTool(t *testing.T) {
	s := inline(t, "search", mcpToolSchema, true)
	if s.fast == nil {
		t.Fatal("a typical tool schema has no fast path")
	}
	args := decodeArgs(t, `{"query": "egfr", "limit": 20, "threshold": 0.25, "include_archived": false,
		"sort": "date", "tags": ["a", "b"], "cursor": null}`, true)
	if vs := s.Validate(args); vs != nil {
		t.Fatalf("valid call refused: %+v", vs)
	}
	if !s.fast.ok(args, 0) {
		t.Fatal("the fast path is unsure of a valid call")
	}
	if n := testing.AllocsPerRun(200, func() { _ = s.Validate(args) }); n != 0 {
		t.Errorf("Validate of a valid call allocates %v times, want 0", n)
	}
	for _, bad := range []string{
		`{"query": "", "limit": 20}`,
		`{"query": "q", "limit": 1.5}`,
		`{"query": "q", "threshold": 0}`,
		`{"query": "q", "sort": "Date"}`,
		`{"query": "q", "tags": ["a", 1]}`,
		`{"query": "q", "qeury": "typo"}`,
		`{"limit": 2}`,
	} {
		args := decodeArgs(t, bad, true)
		got, want := s.Validate(args), libraryOnly(s).Validate(args)
		if got == nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Validate = %+v, without the fast path %+v", bad, got, want)
		}
	}
}

// TestFastSchemaCoverage lists which schemas take the fast path: the
// subset does, any keyword outside it anywhere leaves the schema to the
// library.
func TestFastSchemaCoverage(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		fast      bool
	}{
		{"flat object", `{"type": "object", "properties": {"a": {"type": "string"}}}`, true},
		{"ref and defs", `{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}`, true},
		{"patternProperties", `{"type": "object", "patternProperties": {"^x": {"type": "integer"}}}`, true},
		{"draft-07 tuple", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "string"}], "additionalItems": false}`, true},
		{"format", `{"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}`, false},
		{"oneOf deep", `{"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}`, false},
		{"not", `{"not": {"type": "string"}}`, false},
		{"multipleOf", `{"type": "object", "properties": {"n": {"multipleOf": 2}}}`, false},
		{"uniqueItems", `{"type": "object", "properties": {"t": {"type": "array", "uniqueItems": true}}}`, false},
		{"if", `{"if": {"type": "string"}, "then": {"minLength": 1}}`, false},
		{"unevaluatedProperties", `{"type": "object", "unevaluatedProperties": false}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, strict := range []bool{false, true} {
				s := inline(t, "cov", tc.doc, strict)
				if got := s.fast != nil; got != tc.fast {
					t.Errorf("strict %v: fast path %v, want %v", strict, got, tc.fast)
				}
			}
		})
	}
}

// TestDecimal compares the fast path's decimals with big.Rat, which the
// library compares numbers with, over JSON numbers and float64 values.
func TestDecimal(t *testing.T) {
	texts := []string{"0", "-0", "0.0", "1", "-1", "1.0", "1.00", "10", "100", "1e2", "1E+2", "1e-2", "0.01",
		"0.1", "0.10", "-0.1", "0.5", "1.5", "2.5e1", "25", "9999999999999999999", "999999999999999999",
		"1000000000000000000000", "1e21", "0.000000000000000000001", "1e-21", "123456789012345678.9",
		"12345678901234567.89", "-123.456e3", "-123456", "3.14159", "314159e-5", "5e-324", "1.7976931348623157e308",
		"0.30000000000000004", "9007199254740993", "9007199254740992", "-9007199254740993", "42", "4.2e1", "420e-1"}
	for _, a := range texts {
		da, ok := parseDecimal(a)
		if !ok {
			t.Errorf("parseDecimal(%q) failed", a)
			continue
		}
		ra, _ := new(big.Rat).SetString(a)
		if da.isInteger() != ra.IsInt() {
			t.Errorf("%s: isInteger %v, big.Rat %v", a, da.isInteger(), ra.IsInt())
		}
		for _, b := range texts {
			db, _ := parseDecimal(b)
			rb, _ := new(big.Rat).SetString(b)
			if got, want := da.cmp(db), ra.Cmp(rb); got != want {
				t.Errorf("cmp(%s, %s) = %d, big.Rat says %d", a, b, got, want)
			}
		}
		if f, err := strconv.ParseFloat(a, 64); err == nil {
			df, ok := numberDecimal(f)
			rf, _ := new(big.Rat).SetString(fmt.Sprint(f))
			if ok {
				rd, _ := new(big.Rat).SetString(decimalString(df))
				if rd.Cmp(rf) != 0 {
					t.Errorf("float64 %v: decimal %s, fmt %s", f, decimalString(df), fmt.Sprint(f))
				}
			}
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "12345678901234567891", "1e9999999", "0.12345678901234567891"} {
		if _, ok := parseDecimal(bad); ok {
			t.Errorf("parseDecimal(%q) succeeded", bad)
		}
	}
	for _, x := range []any{int64(math.MinInt64), int64(math.MaxInt64), uint64(math.MaxUint64), int8(-128), uint32(4000000000), math.Copysign(0, -1), math.NaN()} {
		d, ok := numberDecimal(x)
		r, rok := new(big.Rat).SetString(fmt.Sprint(x))
		switch {
		case !rok:
			if ok {
				t.Errorf("%v: a decimal where big.Rat has none", x)
			}
		case ok:
			rd, _ := new(big.Rat).SetString(decimalString(d))
			if rd.Cmp(r) != 0 {
				t.Errorf("%v: decimal %s", x, decimalString(d))
			}
		}
	}
}

func decimalString(d decimal) string {
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	fmt.Fprintf(&b, "%de%d", d.mant, d.exp)
	return b.String()
}
