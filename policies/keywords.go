package policies

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/suggest"
)

// Values of SchemaOptions.UnknownKeywords.
const (
	// KeywordsRefuse fails the compile of a schema holding a keyword its
	// draft does not define (the default).
	KeywordsRefuse = "refuse"
	// KeywordsIgnore accepts such a schema; the keywords do nothing, as
	// JSON Schema says of unknown keywords, and the compiled schema lists
	// them (Schema.UnknownKeywords).
	KeywordsIgnore = "ignore"
)

// UnknownKeyword is a keyword of a schema document that the vocabularies
// of the schema's draft do not define: a typo such as "maxium", or a
// keyword of another draft or dialect. The validator ignores it, so
// whatever check it was meant to be is off.
type UnknownKeyword struct {
	// Pointer is the JSON pointer of the keyword in its document, such as
	// "/properties/n/maxium".
	Pointer string `json:"pointer"`
	// Keyword is the keyword as written.
	Keyword string `json:"keyword"`
	// Suggest is the known keyword it most likely means ("maximum"); ""
	// when none is close.
	Suggest string `json:"suggest,omitempty"`
	// Hint says more where it helps: the drafts that do define the
	// keyword, or what to write instead (for OpenAPI's "nullable"). ""
	// when there is nothing to add.
	Hint string `json:"hint,omitempty"`
	// Document is the file the keyword is in, relative to the schema
	// directory, when it is not the schema's own document; "" for the
	// schema itself.
	Document string `json:"document,omitempty"`
}

// Bounds on what Message and String show of a keyword and of its place:
// a listed schema is outside input, and its names may be long.
const (
	maxKeywordShown = 64
	maxPlaceShown   = 256
)

// Message returns the keyword's problem as one phrase, without its
// pointer: `unknown keyword "maxium" (did you mean "maximum"?)`. A keyword
// longer than 64 bytes is cut, marked with an ellipsis.
func (k UnknownKeyword) Message() string {
	m := fmt.Sprintf("unknown keyword %q", cut(k.Keyword, maxKeywordShown))
	if k.Suggest != "" {
		m += fmt.Sprintf(" (did you mean %q?)", k.Suggest)
	}
	if k.Hint != "" {
		m += " (" + k.Hint + ")"
	}
	return m
}

// String returns the keyword's message with its place: "/properties/n/maxium:
// unknown keyword ..." (with "file.json#" before the pointer for another
// document). A place longer than 256 bytes is cut.
func (k UnknownKeyword) String() string {
	at := k.Pointer
	if k.Document != "" {
		at = k.Document + "#" + k.Pointer
	}
	return cut(at, maxPlaceShown) + ": " + k.Message()
}

// UnknownKeywords lists the keywords of the schema's documents that their
// drafts do not define, sorted by document and pointer. It is empty unless
// the schema was compiled with SchemaOptions.UnknownKeywords set to
// KeywordsIgnore (else such a schema does not compile). The slice is
// shared: do not modify it.
func (s *Schema) UnknownKeywords() []UnknownKeyword { return s.unknownKw }

// keywordSet is the keywords one draft defines.
type keywordSet map[string]bool

func newKeywordSet(lists ...[]string) keywordSet {
	s := keywordSet{}
	for _, l := range lists {
		for _, k := range l {
			s[k] = true
		}
	}
	return s
}

// The keywords of each draft, as its metaschemas (the vocabularies of
// 2019-09 and 2020-12 together with the keywords their dialect
// metaschemas keep) define them. Annotations that never assert anything
// (annotationKeywords) are known in every draft, and so is $defs, which
// toolgate reads in the older drafts too (translateLegacy).
var (
	annotationKeywords = []string{"$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
	draft4Keywords     = []string{
		"id", "$schema", "$ref", "$defs",
		"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern",
		"additionalItems", "items", "maxItems", "minItems", "uniqueItems",
		"maxProperties", "minProperties", "required", "additionalProperties",
		"definitions", "properties", "patternProperties", "dependencies",
		"enum", "type", "format", "allOf", "anyOf", "oneOf", "not",
	}
	draft6Keywords = slices.Concat(slices.DeleteFunc(slices.Clone(draft4Keywords), func(k string) bool { return k == "id" }),
		[]string{"$id", "const", "contains", "propertyNames"})
	draft7Keywords    = slices.Concat(draft6Keywords, []string{"if", "then", "else", "contentMediaType", "contentEncoding"})
	draft2019Keywords = []string{
		// core
		"$schema", "$id", "$ref", "$anchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary", "$defs",
		// applicator
		"additionalItems", "unevaluatedItems", "items", "contains", "additionalProperties",
		"unevaluatedProperties", "properties", "patternProperties", "dependentSchemas",
		"propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
		// validation
		"type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
		"exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
		"uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
		"required", "dependentRequired",
		// format, content
		"format", "contentEncoding", "contentMediaType", "contentSchema",
		// kept by the dialect metaschema
		"definitions", "dependencies",
	}
	draft2020Keywords = slices.Concat(slices.DeleteFunc(slices.Clone(draft2019Keywords), func(k string) bool {
		return k == "additionalItems"
	}), []string{"$dynamicRef", "$dynamicAnchor", "prefixItems"})

	keywordsByDraft = map[int]keywordSet{
		4:    newKeywordSet(annotationKeywords, draft4Keywords),
		6:    newKeywordSet(annotationKeywords, draft6Keywords),
		7:    newKeywordSet(annotationKeywords, draft7Keywords),
		2019: newKeywordSet(annotationKeywords, draft2019Keywords),
		2020: newKeywordSet(annotationKeywords, draft2020Keywords),
	}
	// knownKeywordsSorted lists each draft's keywords sorted, for
	// suggestions in a stable order.
	knownKeywordsSorted = func() map[int][]string {
		m := map[int][]string{}
		for d, s := range keywordsByDraft {
			l := make([]string, 0, len(s))
			for k := range s {
				l = append(l, k)
			}
			slices.Sort(l)
			m[d] = l
		}
		return m
	}()
	draftOrder = []int{4, 6, 7, 2019, 2020}
)

// KnownKeywords returns the keywords toolgate knows in draft (4, 6, 7,
// 2019 or 2020; any other value is read as 2020), sorted.
func KnownKeywords(draft int) []string {
	l, ok := knownKeywordsSorted[draft]
	if !ok {
		l = knownKeywordsSorted[2020]
	}
	return slices.Clone(l)
}

// draftName names a draft as people write it.
func draftName(d int) string {
	switch d {
	case 2019:
		return "2019-09"
	case 2020:
		return "2020-12"
	}
	return fmt.Sprintf("draft-%02d", d)
}

// Where a keyword holds subschemas.
const (
	holdsSchema    = iota + 1 // the value is a schema
	holdsSchemas              // an array of schemas
	holdsSchemaMap            // an object whose values are schemas
	holdsItems                // a schema, or an array of schemas (items before 2020-12)
	holdsDeps                 // an object whose values are schemas or arrays of names
)

// subschemaKeywords says, per keyword, where its value holds subschemas.
// Every other keyword's value is data (enum, const, default, examples,
// required, ...) and is not read for keywords.
var subschemaKeywords = map[string]int{
	"additionalProperties": holdsSchema, "additionalItems": holdsSchema,
	"unevaluatedProperties": holdsSchema, "unevaluatedItems": holdsSchema,
	"contains": holdsSchema, "propertyNames": holdsSchema, "not": holdsSchema,
	"if": holdsSchema, "then": holdsSchema, "else": holdsSchema, "contentSchema": holdsSchema,
	"items": holdsItems,
	"allOf": holdsSchemas, "anyOf": holdsSchemas, "oneOf": holdsSchemas, "prefixItems": holdsSchemas,
	"properties": holdsSchemaMap, "patternProperties": holdsSchemaMap, "$defs": holdsSchemaMap,
	"definitions": holdsSchemaMap, "dependentSchemas": holdsSchemaMap,
	"dependencies": holdsDeps,
}

// foreignHints explain keywords of other specifications that people put
// in JSON Schemas.
var foreignHints = map[string]string{
	"nullable": `an OpenAPI keyword; in JSON Schema add "null" to type`,
}

// maxKeywordDepth bounds the walk's recursion. Schemas reach it already
// bounded by SchemaLimits.MaxDepth (64); this keeps the walk bounded for
// any caller.
const maxKeywordDepth = 256

// findUnknownKeywords walks a decoded schema document and returns its
// unknown keywords in pointer order. draft is the draft of the document's
// root when it names none with $schema; a subschema that names one with
// $schema is read in that draft. Keywords starting with "x-" are
// extensions and allowed; their values are not read.
func findUnknownKeywords(doc any, draft int) []UnknownKeyword {
	w := &keywordWalker{}
	w.schema(doc, draft, "", 0)
	slices.SortFunc(w.found, func(a, b UnknownKeyword) int { return comparePointers(a.Pointer, b.Pointer) })
	return w.found
}

type keywordWalker struct {
	found []UnknownKeyword
}

// schema reads one schema at ptr.
func (w *keywordWalker) schema(v any, draft int, ptr string, depth int) {
	obj, ok := v.(map[string]any)
	if !ok || depth > maxKeywordDepth {
		return // a boolean schema, or not a schema (the metaschema says so)
	}
	if s, ok := obj["$schema"].(string); ok {
		if d := schemaDraft(s); d != 0 {
			draft = d
		}
	}
	known, ok := keywordsByDraft[draft]
	if !ok {
		draft, known = 2020, keywordsByDraft[2020]
	}
	for _, k := range sortedKeysAny(obj) {
		kp := ptr + "/" + escapeToken(k)
		if strings.HasPrefix(k, "x-") {
			continue
		}
		if !known[k] {
			w.found = append(w.found, unknownKeyword(k, kp, draft))
			continue
		}
		val := obj[k]
		switch subschemaKeywords[k] {
		case holdsSchema:
			w.schema(val, draft, kp, depth+1)
		case holdsItems:
			if a, ok := val.([]any); ok {
				w.list(a, draft, kp, depth)
			} else {
				w.schema(val, draft, kp, depth+1)
			}
		case holdsSchemas:
			if a, ok := val.([]any); ok {
				w.list(a, draft, kp, depth)
			}
		case holdsSchemaMap, holdsDeps:
			m, ok := val.(map[string]any)
			if !ok {
				continue
			}
			for _, name := range sortedKeysAny(m) {
				if _, names := m[name].([]any); names {
					continue // dependencies: a list of names is data
				}
				w.schema(m[name], draft, kp+"/"+escapeToken(name), depth+1)
			}
		}
	}
}

func (w *keywordWalker) list(a []any, draft int, ptr string, depth int) {
	for i, e := range a {
		w.schema(e, draft, fmt.Sprintf("%s/%d", ptr, i), depth+1)
	}
}

// unknownKeyword describes keyword k, unknown in draft, at ptr.
func unknownKeyword(k, ptr string, draft int) UnknownKeyword {
	u := UnknownKeyword{Pointer: ptr, Keyword: k, Suggest: nearestKeyword(k, knownKeywordsSorted[draft])}
	if h, ok := foreignHints[k]; ok {
		u.Hint = h
		return u
	}
	var in []string
	for _, d := range draftOrder {
		if keywordsByDraft[d][k] {
			in = append(in, draftName(d))
		}
	}
	if len(in) > 0 {
		u.Suggest = ""
		u.Hint = fmt.Sprintf("a keyword of %s, not of %s; $schema names the draft, %s when it names none",
			strings.Join(in, ", "), draftName(draft), draftName(2020))
	}
	return u
}

// nearestKeyword returns the known keyword that k most likely misspells,
// or "" when none is close (suggest.Nearest: the same word in another case
// or with '_' or '-' between its parts, else the nearest by edit distance,
// within a distance that grows with the word's length).
func nearestKeyword(k string, known []string) string {
	best, _ := suggest.Nearest(k, known)
	return best
}

// maxKeywordsInError bounds the unknown keywords one compile error lists.
const maxKeywordsInError = 5

// checkKeywords finds the unknown keywords of every document the compile
// holds (the schema and the files its $refs load), each read in the draft
// the compiled schema gives its root. With opts.UnknownKeywords
// KeywordsIgnore it returns them; else a schema holding any is refused
// with an error naming the first few.
func checkKeywords(sch *jsonschema.Schema, root any, ld *docLoader, opts SchemaOptions) ([]UnknownKeyword, error) {
	switch opts.UnknownKeywords {
	case "", KeywordsRefuse, KeywordsIgnore:
	default:
		return nil, &SchemaError{Tool: opts.Tool, Msg: fmt.Sprintf("unknown_keywords %q: expected %s or %s", opts.UnknownKeywords, KeywordsRefuse, KeywordsIgnore)}
	}
	docs := map[string]any{ld.rootURL: root}
	for u, d := range ld.docs {
		docs[u] = d
	}
	// The draft of each document: that of its shallowest compiled schema
	// (a document without $schema takes the compiler's default, 2020-12;
	// one whose $schema names a metaschema file takes that file's draft).
	drafts, depth := map[string]int{}, map[string]int{}
	walkAll(sch, func(x *jsonschema.Schema) {
		u, ptr, _ := strings.Cut(x.Location, "#")
		n := strings.Count(ptr, "/")
		if d, ok := depth[u]; !ok || n < d {
			drafts[u], depth[u] = x.DraftVersion, n
		}
	})
	var found []UnknownKeyword
	for _, u := range slices.Sorted(maps.Keys(docs)) {
		d, ok := drafts[u]
		if !ok {
			d = 2020
		}
		doc := ""
		if u != ld.rootURL {
			doc = ld.short(u)
		}
		for _, k := range findUnknownKeywords(docs[u], d) {
			k.Document = doc
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(found, func(a, b UnknownKeyword) int {
		switch {
		case a.Document == b.Document:
			return 0
		case a.Document == "":
			return -1
		case b.Document == "":
			return 1
		}
		return strings.Compare(a.Document, b.Document)
	})
	if opts.UnknownKeywords == KeywordsIgnore {
		return found, nil
	}
	return nil, keywordsError(opts.Tool, found)
}

// keywordsError is the compile error for a schema holding unknown
// keywords.
func keywordsError(tool string, found []UnknownKeyword) *SchemaError {
	first := found[0]
	se := &SchemaError{Tool: tool, Pointer: first.Pointer, Msg: first.Message()}
	if first.Document != "" {
		se.Pointer, se.Msg = "", first.String()
	}
	se.Msg += ": toolgate would not check it"
	for i, k := range found[1:] {
		if i == maxKeywordsInError-1 {
			se.Msg += fmt.Sprintf("; and %d more", len(found)-maxKeywordsInError)
			break
		}
		se.Msg += "; also at " + k.String()
	}
	se.Msg += " (write x-NAME for an extension of your own, or load unknown keywords unchecked with unknown_keywords: ignore)"
	return se
}
