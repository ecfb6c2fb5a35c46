package policies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/toolgate/toolgate/bucketing"
)

// MaxSchemaFileBytes bounds a schema file loaded through a relative $ref.
const MaxSchemaFileBytes = 4 << 20

// MaxViolations bounds the violations Validate returns. A call with more
// problems gets the first MaxViolations in path order; this keeps a refusal
// (and its envelope) small whatever the size of the arguments.
const MaxViolations = 100

// ErrInvalidSchema is matched (errors.Is) by every error CompileSchema returns.
var ErrInvalidSchema = errors.New("invalid schema")

// SchemaError says why a schema document did not compile. It matches
// ErrInvalidSchema.
type SchemaError struct {
	// Tool is the tool name from SchemaOptions ("" when none was given).
	Tool string
	// Pointer is the JSON pointer of the offending keyword in the schema
	// document, such as "/properties/retmax/minimum"; "" when unknown.
	Pointer string
	// Msg is the human reason, without the tool prefix.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error returns "schema for tool "x": at /properties/retmax/minimum: got
// string, want number".
func (e *SchemaError) Error() string {
	var b strings.Builder
	b.WriteString("schema")
	if e.Tool != "" {
		fmt.Fprintf(&b, " for tool %q", e.Tool)
	}
	b.WriteString(": ")
	if e.Pointer != "" {
		fmt.Fprintf(&b, "at %s: ", e.Pointer)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error.
func (e *SchemaError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidSchema.
func (e *SchemaError) Is(target error) bool { return target == ErrInvalidSchema }

// SchemaOptions configures CompileSchema. The zero value compiles the schema
// as written (not strict) with no $ref to other files allowed.
type SchemaOptions struct {
	// Tool is the tool name, used in error messages. Default "".
	Tool string
	// Strict refuses, at every depth, a property that no schema describing
	// its location declares or evaluates, so unknown fields and typos are
	// refused (see CompileSchema). Callers pass true by default; false uses
	// the schema exactly as written.
	Strict bool
	// UnknownFormats says what to do with a "format" the validator does not
	// know, such as a typo ("emial") or "idn-email": FormatsRefuse (the
	// default, also "") fails the compile, naming the known formats;
	// FormatsIgnore accepts the schema and leaves those formats unchecked.
	UnknownFormats string
	// UnknownKeywords says what to do with a keyword the schema's draft
	// does not define, such as a typo ("maxium"), which the validator
	// would ignore: KeywordsRefuse (the default, also "") fails the
	// compile, naming the keyword's pointer and the known keyword it most
	// likely means; KeywordsIgnore accepts the schema, and the compiled
	// schema lists them (Schema.UnknownKeywords). Keywords starting with
	// "x-" are extensions, always accepted.
	UnknownKeywords string
	// Dir is the directory that relative $ref file references (such as
	// "common.json#/$defs/Range") resolve against. Files outside Dir, and
	// any network reference, are refused. Default "": no file references.
	Dir string
	// Limits bound the schema's shape (depth, values, patterns) over all
	// its documents, checked before it is compiled; a schema past them is
	// refused with an error matching ErrSchemaTooComplex. Zero fields take
	// DefaultSchemaLimits (the bounds of a schema an MCP server lists);
	// schemas from configuration files use FileSchemaLimits.
	Limits SchemaLimits
}

// Schema is a compiled JSON Schema for one tool's arguments. It is
// immutable and safe for concurrent use.
type Schema struct {
	tool string
	sch  *jsonschema.Schema

	// byLoc maps each compiled schema's location to it.
	byLoc map[string]*jsonschema.Schema
	// closed maps the location of a closed object schema to the names it
	// allows, for unknown-field messages.
	closed map[string]*allowedNames
	// added holds, per closed schema location, property names that strict
	// closing declared as {} (their real schema lives in a sibling branch).
	added map[string]map[string]bool
	// unknownKw lists the unknown keywords a schema compiled with
	// KeywordsIgnore holds. Read-only after compile.
	unknownKw []UnknownKeyword
	// wants caches, per compiled schema, the JSON types it admits on its own
	// keywords (type, enum, const). Read-only after compile.
	wants map[*jsonschema.Schema]typeMask
	// root is the root schema's in-place composition expanded (expand),
	// rootOK false past the analysis limits: what Coerce and FoldedNames
	// start from on every call, computed once. Read-only after compile.
	root   []alt
	rootOK bool
	// mayFold is false when FoldedNames can find nothing
	// (openPropertiesReachable): every schema that declares properties
	// applies together with one whose additionalProperties is false.
	// Read-only after compile.
	mayFold bool
	// fast is the allocation-free check of valid arguments (see
	// fastschema.go), nil when the schema uses a keyword outside its
	// subset. Read-only after compile.
	fast *fastNode
}

// allowedNames lists what a closed object schema accepts.
type allowedNames struct {
	names    []string // sorted
	patterns []string // sorted regexps from patternProperties
}

// Tool returns the tool name the schema was compiled for.
func (s *Schema) Tool() string { return s.tool }

// CompileSchema compiles a JSON Schema document for a tool's arguments.
//
// The draft is chosen by $schema: draft 2020-12 (the default when $schema is
// absent), 2019-09, draft-07, -06 and -04 are accepted. The document is
// checked against its metaschema; format is asserted in every draft.
// Compile errors are *SchemaError values naming the JSON pointer of the
// offending keyword where there is one.
//
// With opts.Strict, the schema is closed before compiling, with JSON
// Schema 2020-12's own means: the outermost schemas of every instance
// location (the root; each properties, patternProperties,
// additionalProperties, items, prefixItems, ... value reached from any
// schema describing the parent location) get unevaluatedProperties: false,
// or additionalProperties: false where that means the same (nothing they
// apply in place evaluates names through additionalProperties or
// unevaluatedProperties; it is cheaper to check). Every property name that any schema
// describing that location declares (across allOf, anyOf, oneOf,
// if/then/else, dependentSchemas, $ref, and $dynamicRef to any schema with
// its anchor, and across the parent's branches) is declared on each of
// them as {}: so a name is unknown, and refused as unknown_field, when no
// schema of its location declares it and none that held evaluated it
// (patternProperties, additionalProperties). Exceptions, by design:
//   - a schema that sets additionalProperties or unevaluatedProperties
//     itself is left as written, and so is everything applied in place
//     under an author's unevaluatedProperties;
//   - a location where another schema lets every name through
//     (additionalProperties true or a schema, unevaluatedProperties true or
//     a schema), or where no schema has a properties or patternProperties
//     keyword at all (a free-form map), stays open; an empty
//     "properties": {} declares that no name is allowed, and is closed
//     (what the MCP SDKs generate for a tool without arguments);
//   - schemas under not, if, contains, propertyNames and contentSchema are
//     not changed, as that would change the condition they express;
//   - schemas in documents toolgate does not hold (the metaschemas the
//     library embeds, which a $ref may name offline) are not changed;
//   - arrays are not closed: items past a prefixItems tuple stay allowed.
//
// Documents in draft-07 and older are read as 2020-12 for strict closing
// (see translateLegacy), so the closing means the same in every draft.
//
// Every "format" must be one toolgate checks (KnownFormats) unless
// opts.UnknownFormats is FormatsIgnore, and every keyword one the
// schema's draft defines (KnownKeywords) or an "x-" extension, unless
// opts.UnknownKeywords is KeywordsIgnore. Keywords are read at every
// place that holds a schema (properties, items, $defs, allOf, ...), in
// every document the schema loads, never in data (enum, const, default,
// examples).
//
// The final schema (after strict closing) is also compiled into a fast
// check of valid arguments, which Validate uses first, when every schema
// it reaches sets only keywords of this subset: type, enum, const, allOf,
// anyOf, $ref; properties, patternProperties, additionalProperties,
// required, minProperties, maxProperties; prefixItems, items,
// additionalItems, minItems, maxItems; minLength, maxLength, pattern;
// minimum, maximum, exclusiveMinimum, exclusiveMaximum; annotations and
// identifiers. The common tool schemas are in it (objects of strings,
// numbers, integers, booleans, enums and arrays, closed with
// additionalProperties false, and Optional fields as anyOf with null).
// Any other keyword reachable (format, oneOf, not, if/then/else,
// dependent*, propertyNames, contains, uniqueItems, multipleOf, content*,
// unevaluated*, $dynamicRef, $recursiveRef) leaves that schema without
// the fast check; it validates exactly as before.
func CompileSchema(doc []byte, opts SchemaOptions) (s *Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, &SchemaError{Tool: opts.Tool, Msg: fmt.Sprintf("internal error while compiling: %v", r)}
		}
	}()
	root, err := decodeJSON(doc)
	if err != nil {
		return nil, &SchemaError{Tool: opts.Tool, Msg: "invalid JSON: " + err.Error(), Err: err}
	}
	switch root.(type) {
	case map[string]any, bool:
	default:
		return nil, &SchemaError{Tool: opts.Tool, Msg: fmt.Sprintf("schema must be a JSON object or boolean, got %s", JSONTypeName(root))}
	}
	budget := &shapeBudget{l: opts.Limits.withDefaults()}
	if err := budget.check(root); err != nil {
		return nil, tooComplex(opts.Tool, err)
	}
	if ptr, ok := hugeNumberInDoc(root, ""); ok {
		return nil, &SchemaError{Tool: opts.Tool, Pointer: ptr, Msg: fmt.Sprintf("number outside the supported range (at most %d characters, exponent at most %d)", MaxNumberLen, maxNumberExponent)}
	}
	ld, rootURL, err := newDocLoader(opts)
	if err != nil {
		return nil, err
	}
	ld.budget = budget
	// The first pass validates the document as written (so error pointers
	// match what the author wrote) and resolves every reference.
	sch, err := compileDocs(rootURL, root, ld)
	if err != nil {
		return nil, ld.schemaError(err)
	}
	if loc := inPlaceCycle(sch); loc != "" {
		doc, ptr, _ := strings.Cut(loc, "#")
		ptr, _ = url.PathUnescape(ptr)
		se := &SchemaError{Tool: opts.Tool, Pointer: ptr, Msg: "reference cycle: this schema refers back to itself without descending into a property or item"}
		if doc != rootURL {
			se.Pointer, se.Msg = "", fmt.Sprintf("%s#%s: %s", ld.short(doc), ptr, se.Msg)
		}
		return nil, se
	}
	unknownKw, err := checkKeywords(sch, root, ld, opts)
	if err != nil {
		return nil, err
	}
	if err := checkFormats(sch, root, ld, opts); err != nil {
		return nil, err
	}
	added := map[string]map[string]bool{}
	var allowed map[string]*allowedNames
	if opts.Strict {
		sch, allowed, err = strictCompile(sch, root, ld, added)
		if err != nil {
			return nil, err
		}
	}
	s = &Schema{tool: opts.Tool, sch: sch, added: added, unknownKw: unknownKw}
	s.index(allowed)
	s.root, s.rootOK = s.expand(alt{s.sch})
	s.fast = compileFast(s.sch)
	return s, nil
}

// Validate validates a call's arguments and returns every violation, sorted
// by path then reason (at most MaxViolations), or nil when they are valid.
// Numbers may be json.Number (a decoder with UseNumber) or float64 (plain
// encoding/json), or Go integers; other values must be what encoding/json
// produces (nil, bool, string, []any, map[string]any). A violation never
// holds a rejected value.
//
// When the schema has a fast check (see CompileSchema) and it finds the
// arguments surely valid, Validate returns nil without running the JSON
// Schema library and without allocating. The fast check says valid only
// where the library would; it compares numbers exactly, as decimals of at
// most 19 significant digits, and anything it cannot decide (a longer
// number, a float32, a value of another Go type) or finds invalid goes to
// the library, which alone makes every refusal: the violations, their
// wording and their order are the same as without the fast check.
func (s *Schema) Validate(args map[string]any) []Violation {
	return s.validate(args, false)
}

// ValidateInRange is Validate of arguments whose every number the caller
// has already found within NumberInRange (the decoder that made them saw
// each one go by): it does not walk them again to look. Arguments with a
// number past the bounds get from it what the library makes of them, so
// a caller that cannot vouch for every number calls Validate.
func (s *Schema) ValidateInRange(args map[string]any) []Violation {
	return s.validate(args, true)
}

func (s *Schema) validate(args map[string]any, inRange bool) []Violation {
	if args == nil {
		args = map[string]any{}
	}
	// The library turns numbers into big.Rat; a short argument such as
	// 1e999999999 would cost seconds. Refuse such numbers up front.
	if !inRange && HasHugeNumber(args) {
		vs := finish(hugeNumbers(args, nil, nil))
		setDisplay(vs, args)
		return vs
	}
	if s.fast != nil && s.fast.ok(args, 0) {
		return nil
	}
	err := s.sch.Validate(args)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Violation{{Reason: bucketing.ReasonSchema, Message: "arguments could not be validated", Expected: "valid arguments", Got: "object"}}
	}
	c := collector{s: s, args: args}
	vs := finish(dropDeclared(c.collect(verr)))
	setDisplay(vs, args)
	return vs
}

// Bounds on a JSON number's text (json.Number) in arguments and schemas.
// Numbers past them are refused, because arbitrary-precision arithmetic on
// them costs time and memory out of proportion to their size.
const (
	MaxNumberLen      = 512
	maxNumberExponent = 1000
)

// NumberInRange reports whether n's text is within the bounds on numbers
// in arguments (at most 512 characters, an exponent of at most 1000):
// Validate refuses arguments holding a number past them.
func NumberInRange(n json.Number) bool {
	s := string(n)
	if len(s) > MaxNumberLen {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	e := strings.TrimLeft(s[i+1:], "+-")
	if len(e) > 6 {
		return false
	}
	x, err := strconv.Atoi(e)
	return err == nil && x <= maxNumberExponent
}

// HasHugeNumber reports whether v (decoded JSON) holds a json.Number past
// the bounds (NumberInRange).
func HasHugeNumber(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return !NumberInRange(x)
	case map[string]any:
		for _, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				if HasHugeNumber(e) {
					return true
				}
			}
		}
	case []any:
		for _, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				if HasHugeNumber(e) {
					return true
				}
			}
		}
	}
	return false
}

// hugeNumbers returns a violation for each json.Number in v past the bounds.
func hugeNumbers(v any, loc []string, out []leaf) []leaf {
	switch x := v.(type) {
	case json.Number:
		if !NumberInRange(x) {
			out = append(out, leaf{v: Violation{Path: pointerOf(loc), Reason: bucketing.ReasonSchema,
				Message:  "number outside the supported range",
				Expected: fmt.Sprintf("a number of at most %d characters with an exponent of at most %d", MaxNumberLen, maxNumberExponent),
				Got:      "number"}})
		}
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				out = hugeNumbers(e, child(loc, k), out)
			}
		}
	case []any:
		for i, e := range x {
			switch e.(type) {
			case json.Number, map[string]any, []any:
				out = hugeNumbers(e, child(loc, strconv.Itoa(i)), out)
			}
		}
	}
	return out
}

// hugeNumberInDoc returns the JSON pointer of the first number in a schema
// document past the bounds, or ok false when there is none.
func hugeNumberInDoc(v any, ptr string) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		if !NumberInRange(x) {
			return ptr, true
		}
	case map[string]any:
		for _, k := range sortedKeysAny(x) {
			if p, ok := hugeNumberInDoc(x[k], ptr+"/"+escapeToken(k)); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := hugeNumberInDoc(e, ptr+"/"+strconv.Itoa(i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

func sortedKeysAny(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compileDocs compiles the document at rootURL with a fresh compiler.
func compileDocs(rootURL string, root any, ld *docLoader) (*jsonschema.Schema, error) {
	sch, _, err := compileWith(rootURL, root, ld)
	return sch, err
}

// compileWith is compileDocs, also returning the compiler, which compiles
// more locations of the same documents into the same schema graph.
func compileWith(rootURL string, root any, ld *docLoader) (*jsonschema.Schema, *jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(ld)
	if err := c.AddResource(rootURL, root); err != nil {
		return nil, nil, err
	}
	sch, err := c.Compile(rootURL)
	return sch, c, err
}

// dynamicAnchors compiles, with c, every schema of the documents that sets
// $dynamicAnchor: a $dynamicRef may resolve to one that nothing else
// refers to, so the compiled graph alone does not show it.
func dynamicAnchors(c *jsonschema.Compiler, docs map[string]any) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, u := range slices.Sorted(maps.Keys(docs)) {
		var walk func(v any, ptr string)
		walk = func(v any, ptr string) {
			switch x := v.(type) {
			case map[string]any:
				if _, ok := x["$dynamicAnchor"].(string); ok {
					if sch, err := c.Compile(u + "#" + ptr); err == nil {
						out = append(out, sch)
					}
				}
				for _, k := range sortedKeysAny(x) {
					switch k {
					case "const", "enum", "default", "examples":
						continue
					}
					walk(x[k], ptr+"/"+escapeToken(k))
				}
			case []any:
				for i, e := range x {
					walk(e, ptr+"/"+strconv.Itoa(i))
				}
			}
		}
		walk(docs[u], "")
	}
	return out
}

// decodeJSON decodes one JSON value, keeping numbers as json.Number.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty document")
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%v (at byte %d)", err, se.Offset)
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the top-level value (at byte %d)", dec.InputOffset())
	}
	return v, nil
}

// docLoader serves the schema documents of one compile: files under dir
// (decoded once, kept for strict rewriting) and nothing else.
type docLoader struct {
	tool    string
	dir     string // absolute; "" = no file references
	rootURL string
	docs    map[string]any
	budget  *shapeBudget // shared by every document of the compile
}

func newDocLoader(opts SchemaOptions) (*docLoader, string, error) {
	name := opts.Tool
	if name == "" {
		name = "schema"
	}
	name = strings.NewReplacer("/", "_", "\\", "_").Replace(name) + ".json"
	ld := &docLoader{tool: opts.Tool, docs: map[string]any{}}
	if opts.Dir == "" {
		ld.rootURL = (&url.URL{Scheme: "toolgate", Path: "/" + name}).String()
		return ld, ld.rootURL, nil
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, "", &SchemaError{Tool: opts.Tool, Msg: fmt.Sprintf("schema directory %q: %v", opts.Dir, err), Err: err}
	}
	ld.dir = dir
	ld.rootURL = (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, name))}).String()
	return ld, ld.rootURL, nil
}

// Load implements jsonschema.URLLoader.
func (l *docLoader) Load(u string) (any, error) {
	if d, ok := l.docs[u]; ok {
		return d, nil
	}
	if l.dir == "" {
		return nil, errors.New("references to other documents need a schema directory (SchemaOptions.Dir)")
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "file" {
		return nil, errors.New("only files under the schema directory may be referenced")
	}
	rel, err := filepath.Rel(l.dir, filepath.FromSlash(pu.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, errors.New("file is outside the schema directory")
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSchemaFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSchemaFileBytes {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxSchemaFileBytes)
	}
	d, err := decodeJSON(b)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if ptr, ok := hugeNumberInDoc(d, ""); ok {
		return nil, fmt.Errorf("number outside the supported range at %s", ptr)
	}
	if l.budget != nil {
		if err := l.budget.check(d); err != nil {
			return nil, err
		}
	}
	l.docs[u] = d
	return d, nil
}

// short makes a library message readable: internal document URLs become
// file names relative to the schema directory, or disappear for the root.
func (l *docLoader) short(msg string) string {
	msg = strings.ReplaceAll(msg, l.rootURL, "")
	if l.dir != "" {
		prefix := (&url.URL{Scheme: "file", Path: filepath.ToSlash(l.dir) + "/"}).String()
		msg = strings.ReplaceAll(msg, prefix, "")
	}
	return strings.ReplaceAll(msg, "toolgate:///", "")
}

// schemaError turns a compile error into a *SchemaError naming the JSON
// pointer of the offending keyword when the library gives one.
func (l *docLoader) schemaError(err error) *SchemaError {
	se := &SchemaError{Tool: l.tool, Err: err}
	var sve *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &verr) {
		doc, base, _ := strings.Cut(sve.URL, "#")
		base, _ = url.PathUnescape(base)
		var parts []string
		seen := map[string]bool{}
		for _, lf := range metaLeaves(verr, nil) {
			ptr := base + pointerOf(lf.InstanceLocation)
			if seen[ptr] {
				continue
			}
			seen[ptr] = true
			msg := strings.TrimPrefix(lf.Error(), "at "+libQuote(pointerOf(lf.InstanceLocation))+": ")
			if se.Pointer == "" {
				se.Pointer = ptr
				parts = append(parts, msg)
			} else if len(parts) < 3 {
				parts = append(parts, fmt.Sprintf("at %s: %s", ptr, msg))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "does not conform to its metaschema")
		}
		se.Msg = strings.Join(parts, "; ")
		if doc != l.rootURL {
			se.Msg = l.short(doc) + ": " + se.Msg
		}
		return se
	}
	var pnf *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &pnf) {
		se.Msg = fmt.Sprintf("$ref target %s not found", libQuote(l.short(pnf.URL)))
		return se
	}
	var lue *jsonschema.LoadURLError
	if errors.As(err, &lue) {
		if errors.Is(lue.Err, ErrSchemaTooComplex) {
			se.Err = lue.Err // the library's error does not unwrap to it
		}
		se.Msg = fmt.Sprintf("$ref to %s: %v", libQuote(l.short(lue.URL)), lue.Err)
		return se
	}
	se.Msg = l.short(err.Error())
	return se
}

// metaLeaves returns the leaf errors of a metaschema validation error,
// deepest location first, in a stable order.
func metaLeaves(verr *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(verr.Causes) == 0 {
		if _, ok := verr.ErrorKind.(*kind.Schema); !ok {
			out = append(out, verr)
		}
		return out
	}
	for _, c := range verr.Causes {
		out = metaLeaves(c, out)
	}
	return out
}

// libQuote quotes the way the library does in its messages.
func libQuote(s string) string {
	s = fmt.Sprintf("%q", s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

// pointerOf builds a JSON pointer from unescaped tokens.
func pointerOf(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return tokenEscaper.Replace(t)
}

// index precomputes the lookups used by Validate and Coerce. allowed holds
// the names strict closing worked out for the schemas it closed.
func (s *Schema) index(allowed map[string]*allowedNames) {
	s.byLoc = map[string]*jsonschema.Schema{}
	s.closed = map[string]*allowedNames{}
	s.wants = map[*jsonschema.Schema]typeMask{}
	walkAll(s.sch, func(x *jsonschema.Schema) {
		s.byLoc[x.Location] = x
		s.wants[x] = ownWants(x)
		if a, ok := allowed[x.Location]; ok {
			s.closed[x.Location] = a
			return
		}
		if b, ok := x.AdditionalProperties.(bool); ok && !b {
			s.closed[x.Location] = ownNames(x)
		}
		if u := x.UnevaluatedProperties; u != nil && u.Bool != nil && !*u.Bool {
			if _, ok := s.closed[x.Location]; !ok {
				s.closed[x.Location] = groupNames(x)
			}
		}
	})
	s.mayFold = s.openPropertiesReachable()
}

// openPropertiesReachable reports whether FoldedNames can find anything:
// whether a schema that declares properties can be reached from the root,
// along what FoldedNames follows, without a schema applying to the same
// value (itself, or one composed with it in place: $ref, allOf, anyOf,
// oneOf) that has additionalProperties false. Such a schema admits only
// its own properties and patterns, so Validate already refuses a name
// that differs from a declared one only by case, and a name a pattern
// admits is no finding. unevaluatedProperties false does not count: an
// open branch can evaluate every name. Schemas only $defs holds (strict
// closing inlines what they described) are not reached.
func (s *Schema) openPropertiesReachable() bool {
	type at struct {
		x      *jsonschema.Schema
		closed bool
	}
	seen := map[at]bool{}
	var visit func(x *jsonschema.Schema, closed bool) bool
	visit = func(x *jsonschema.Schema, closed bool) bool {
		if x == nil || x.Bool != nil || seen[at{x, closed}] {
			return false
		}
		seen[at{x, closed}] = true
		if ap, ok := x.AdditionalProperties.(bool); ok && !ap {
			closed = true
		}
		if !closed && len(x.Properties) > 0 {
			return true
		}
		// The same value, composed in place.
		same := []*jsonschema.Schema{x.Ref, x.RecursiveRef}
		if x.DynamicRef != nil {
			same = append(same, x.DynamicRef.Ref)
		}
		same = append(same, x.AllOf...)
		same = append(same, x.AnyOf...)
		same = append(same, x.OneOf...)
		for _, n := range same {
			if visit(n, closed) {
				return true
			}
		}
		// Values inside it: members and items.
		inner := []*jsonschema.Schema{x.Items2020}
		inner = append(inner, x.PrefixItems...)
		for _, p := range x.Properties {
			inner = append(inner, p)
		}
		for _, p := range x.PatternProperties {
			inner = append(inner, p)
		}
		for _, v := range []any{x.AdditionalProperties, x.Items, x.AdditionalItems} {
			switch v := v.(type) {
			case *jsonschema.Schema:
				inner = append(inner, v)
			case []*jsonschema.Schema:
				inner = append(inner, v...)
			}
		}
		for _, n := range inner {
			if visit(n, false) {
				return true
			}
		}
		return false
	}
	return visit(s.sch, false)
}

// strictCompile closes the compiled schema sch (see CompileSchema): it
// translates draft-07 and older documents to 2020-12, plans and applies the
// closing, and compiles again. It returns the closed schema and, per closed
// location, the names an unknown-field message lists.
func strictCompile(sch *jsonschema.Schema, root any, ld *docLoader, added map[string]map[string]bool) (*jsonschema.Schema, map[string]*allowedNames, error) {
	docs := map[string]any{ld.rootURL: root}
	for u, d := range ld.docs {
		docs[u] = d
	}
	legacy := map[string]int{} // document URL -> draft
	walkAll(sch, func(x *jsonschema.Schema) {
		u, _, _ := strings.Cut(x.Location, "#")
		if _, held := docs[u]; held && x.DraftVersion < 2019 {
			if d, ok := legacy[u]; !ok || x.DraftVersion < d {
				legacy[u] = x.DraftVersion
			}
		}
	})
	if len(legacy) > 0 {
		for u, d := range legacy {
			doc := translateLegacy(docs[u], d)
			if obj, ok := doc.(map[string]any); ok {
				obj["$schema"] = draft2020URL
			}
			docs[u] = doc
		}
		ld.docs = map[string]any{}
		for u, d := range docs {
			if u != ld.rootURL {
				ld.docs[u] = d
			}
		}
	}
	sch, c, err := compileWith(ld.rootURL, docs[ld.rootURL], ld)
	if err != nil {
		se := ld.schemaError(err)
		if len(legacy) > 0 {
			se.Msg = "strict closing of a draft-07 or older schema (read as 2020-12): " + se.Msg
		}
		return nil, nil, se
	}
	edits, err := planStrict(sch, dynamicAnchors(c, docs))
	if err != nil {
		return nil, nil, &SchemaError{Tool: ld.tool, Msg: "strict closing: " + err.Error(), Err: err}
	}
	if len(edits) == 0 {
		return sch, nil, nil
	}
	if err := applyStrict(docs, edits, added); err != nil {
		return nil, nil, &SchemaError{Tool: ld.tool, Msg: "strict closing: " + err.Error(), Err: err}
	}
	allowed := make(map[string]*allowedNames, len(edits))
	for _, e := range edits {
		allowed[e.loc] = e.allowed
	}
	sch, err = compileDocs(ld.rootURL, docs[ld.rootURL], ld)
	if err != nil {
		se := ld.schemaError(err)
		se.Msg = "after strict closing: " + se.Msg
		return nil, nil, se
	}
	return sch, allowed, nil
}

// Values of SchemaOptions.UnknownFormats.
const (
	// FormatsRefuse fails the compile of a schema naming a format the
	// validator does not know (the default).
	FormatsRefuse = "refuse"
	// FormatsIgnore accepts such a schema and leaves those formats
	// unchecked.
	FormatsIgnore = "ignore"
)

// KnownFormats lists the format names toolgate checks, sorted. They are
// asserted in every draft. Any other name (idn-email and idn-hostname
// among them) is unknown.
var KnownFormats = []string{
	"date", "date-time", "duration", "email", "hostname", "ipv4", "ipv6",
	"iri", "iri-reference", "json-pointer", "period", "regex",
	"relative-json-pointer", "semver", "time", "uri", "uri-reference",
	"uri-template", "uuid",
}

// checkFormats refuses a compiled schema that names a format the validator
// does not know, unless opts.UnknownFormats is FormatsIgnore.
func checkFormats(sch *jsonschema.Schema, root any, ld *docLoader, opts SchemaOptions) error {
	switch opts.UnknownFormats {
	case "", FormatsRefuse:
	case FormatsIgnore:
		return nil
	default:
		return &SchemaError{Tool: opts.Tool, Msg: fmt.Sprintf("unknown_formats %q: expected %s or %s", opts.UnknownFormats, FormatsRefuse, FormatsIgnore)}
	}
	docs := map[string]any{ld.rootURL: root}
	for u, d := range ld.docs {
		docs[u] = d
	}
	var bad []string // sorted locations
	walkAll(sch, func(x *jsonschema.Schema) {
		if x.Format != nil || x.Bool != nil {
			return
		}
		u, _, _ := strings.Cut(x.Location, "#")
		if _, held := docs[u]; !held {
			return
		}
		node, err := lookupNode(docs, x.Location)
		if err != nil {
			return
		}
		if obj, ok := node.(map[string]any); ok {
			if _, ok := obj["format"].(string); ok {
				bad = append(bad, x.Location)
			}
		}
	})
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	node, _ := lookupNode(docs, bad[0])
	name := node.(map[string]any)["format"].(string)
	doc, ptr, _ := strings.Cut(bad[0], "#")
	ptr, _ = url.PathUnescape(ptr)
	se := &SchemaError{Tool: opts.Tool, Pointer: ptr + "/format",
		Msg: fmt.Sprintf("unknown format %q: toolgate would not check it; known formats: %s (or accept unknown formats unchecked with unknown_formats: ignore)",
			name, strings.Join(KnownFormats, ", "))}
	if doc != ld.rootURL {
		se.Pointer, se.Msg = "", fmt.Sprintf("%s#%s/format: %s", ld.short(doc), ptr, se.Msg)
	}
	return se
}

// inPlaceCycle returns the location of a schema that reaches itself
// through in-place keywords only ($ref, allOf, not, ...): validating it
// would never end, so the library fails every call. "" when there is none.
func inPlaceCycle(root *jsonschema.Schema) string {
	const (
		visiting = 1
		done     = 2
	)
	state := map[*jsonschema.Schema]int{}
	var found string
	var visit func(x *jsonschema.Schema)
	visit = func(x *jsonschema.Schema) {
		if found != "" {
			return
		}
		switch state[x] {
		case visiting:
			found = x.Location
			return
		case done:
			return
		}
		state[x] = visiting
		for _, m := range appendEdges(nil, x, edgeInPlace) {
			visit(m)
		}
		for _, m := range []*jsonschema.Schema{x.Not, x.If} {
			if m != nil {
				visit(m)
			}
		}
		state[x] = done
	}
	walkAll(root, func(x *jsonschema.Schema) {
		if state[x] == 0 {
			visit(x)
		}
	})
	return found
}

// walkAll calls fn once for every schema reachable from root.
func walkAll(root *jsonschema.Schema, fn func(*jsonschema.Schema)) {
	seen := map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == nil || seen[x] {
			continue
		}
		seen[x] = true
		fn(x)
		stack = appendEdges(stack, x, edgeAll)
	}
}

// edge kinds for appendEdges.
const (
	edgeInPlace  = 1 << iota // applies to the same instance location
	edgeLocation             // applies to a child location (property, item)
	edgeOther                // not, if, contains, propertyNames, contentSchema
	edgeAll      = edgeInPlace | edgeLocation | edgeOther
)

// appendEdges appends the subschemas of x of the given kinds. In-place
// edges exclude not and if (see edgeOther), which change the sense of
// their subschema.
func appendEdges(dst []*jsonschema.Schema, x *jsonschema.Schema, kinds int) []*jsonschema.Schema {
	add := func(ss ...*jsonschema.Schema) {
		for _, s := range ss {
			if s != nil {
				dst = append(dst, s)
			}
		}
	}
	if kinds&edgeInPlace != 0 {
		add(x.Ref, x.RecursiveRef)
		if x.DynamicRef != nil {
			add(x.DynamicRef.Ref)
		}
		add(x.AllOf...)
		add(x.AnyOf...)
		add(x.OneOf...)
		add(x.Then, x.Else)
		for _, d := range x.DependentSchemas {
			add(d)
		}
		for _, d := range x.Dependencies {
			if ds, ok := d.(*jsonschema.Schema); ok {
				add(ds)
			}
		}
	}
	if kinds&edgeLocation != 0 {
		for _, p := range x.Properties {
			add(p)
		}
		for _, p := range x.PatternProperties {
			add(p)
		}
		if ap, ok := x.AdditionalProperties.(*jsonschema.Schema); ok {
			add(ap)
		}
		switch it := x.Items.(type) {
		case *jsonschema.Schema:
			add(it)
		case []*jsonschema.Schema:
			add(it...)
		}
		if ai, ok := x.AdditionalItems.(*jsonschema.Schema); ok {
			add(ai)
		}
		add(x.PrefixItems...)
		add(x.Items2020, x.UnevaluatedProperties, x.UnevaluatedItems)
	}
	if kinds&edgeOther != 0 {
		add(x.Not, x.If, x.Contains, x.PropertyNames, x.ContentSchema)
	}
	return dst
}

// ownNames lists the property names and patterns declared on x itself.
func ownNames(x *jsonschema.Schema) *allowedNames {
	a := &allowedNames{}
	for n := range x.Properties {
		a.names = append(a.names, n)
	}
	for p := range x.PatternProperties {
		a.patterns = append(a.patterns, p.String())
	}
	a.sort()
	return a
}

// groupNames lists the names declared on x and everything applying in place
// with it.
func groupNames(x *jsonschema.Schema) *allowedNames {
	names, patterns := map[string]bool{}, map[string]bool{}
	collectNames(x, names, patterns, map[*jsonschema.Schema]bool{}, true)
	return newAllowed(names, patterns)
}

func newAllowed(names, patterns map[string]bool) *allowedNames {
	a := &allowedNames{}
	for n := range names {
		a.names = append(a.names, n)
	}
	for p := range patterns {
		a.patterns = append(a.patterns, p)
	}
	a.sort()
	return a
}

// declares reports whether name is one of the names, or matches one of
// the patterns.
func (a *allowedNames) declares(name string) bool {
	if _, ok := slices.BinarySearch(a.names, name); ok {
		return true
	}
	for _, p := range a.patterns {
		if ok, err := regexp.MatchString(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

func (a *allowedNames) sort() {
	sortStrings(a.names)
	sortStrings(a.patterns)
}

// collectNames adds the property names and patterns of x and of its
// in-place subschemas (including if, when withIf).
func collectNames(x *jsonschema.Schema, names, patterns map[string]bool, seen map[*jsonschema.Schema]bool, withIf bool) {
	if x == nil || seen[x] {
		return
	}
	seen[x] = true
	for n := range x.Properties {
		names[n] = true
	}
	for p := range x.PatternProperties {
		patterns[p.String()] = true
	}
	for _, m := range appendEdges(nil, x, edgeInPlace) {
		collectNames(m, names, patterns, seen, withIf)
	}
	if withIf && x.If != nil {
		collectNames(x.If, names, patterns, seen, withIf)
	}
}
