// Package argshape records the shape of a call's arguments, never their
// values: member names, JSON types, presence, nesting, and the formats
// recognised from each string (date-time, date, uuid, email, uri, ipv4),
// bounded in depth, members, names and bytes. A tool in observe mode puts
// one call's shape in its event (arg_shape); toolgate schema suggest merges
// the shapes of many calls and proposes a schema from them.
//
// A Shape counts: every count is a number of values, so the shapes of many
// calls merge by adding. A member's presence is the sum of its type counts;
// it was present in every object at its place when that sum equals its
// parent's object count.
//
// The one exception to "never values" is an enum field: for the argument
// paths the operator lists (ObserveConfig.EnumFields), short scalar values
// are recorded, as JSON text, at most MaxEnumValues of them.
package argshape

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policies"
)

// The bounds of one call's shape.
const (
	// MaxDepth is the deepest nesting recorded: an object or array deeper
	// than this is recorded as its type only, its place marked Cut.
	MaxDepth = 8
	// MaxMembers is the most members recorded of one object; the rest are
	// left out, and the object is marked Cut.
	MaxMembers = 64
	// MaxItems is the most items of one array whose shapes are recorded
	// (the first ones); the array's length is not.
	MaxItems = 256
	// MaxNameBytes is the longest member name recorded. A longer name, or
	// one with a control character or invalid UTF-8, is counted in Unnamed,
	// never written: member names are chosen by the caller.
	MaxNameBytes = 64
	// MaxNodes is the most places (members and array items) one shape
	// records before it is cut.
	MaxNodes = 256
	// MaxBytes is the longest encoded shape; a larger one is recorded with
	// fewer places, cut where it was cut short.
	MaxBytes = 4000
	// MaxEnumValues is the most distinct values an enum field records
	// (EnumOver says there were more); MaxEnumBytes the longest (as JSON
	// text) it records at all.
	MaxEnumValues = 16
	MaxEnumBytes  = 64
)

// The JSON types a Shape counts (Shape.Types keys).
const (
	TypeObject  = "object"
	TypeArray   = "array"
	TypeString  = "string"
	TypeInteger = "integer" // a number without a fraction
	TypeNumber  = "number"  // any other number
	TypeBoolean = "boolean"
	TypeNull    = "null"
)

// Formats are the formats recognised from a string value, in the order
// they are tried (a value counts under the first it has). Each is checked
// by toolgate's own schema validator, so a value counted under a format is
// one a schema with that format accepts.
var Formats = []string{"date-time", "date", "uuid", "email", "ipv4", "uri"}

// Shape is the shape of the values seen at one place of the arguments.
type Shape struct {
	// Types counts the values by JSON type (the Type* constants).
	Types map[string]int `json:"t,omitempty"`
	// Formats counts the string values that had each format of Formats.
	Formats map[string]int `json:"f,omitempty"`
	// Lexical counts, among string values that came from a string-only
	// source (the path, the query string, a form body: sources whose
	// values a schema coerces), those that read as an integer, a number or
	// a boolean (keys TypeInteger, TypeNumber, TypeBoolean). Empty for
	// values from a JSON body.
	Lexical map[string]int `json:"l,omitempty"`
	// Strings counts the string values that came from a string-only source.
	Strings int `json:"s,omitempty"`
	// Members are an object's members by name.
	Members map[string]*Shape `json:"m,omitempty"`
	// Items is the shape of an array's items, all of them merged.
	Items *Shape `json:"i,omitempty"`
	// Unnamed counts the members not recorded for their names (too long,
	// a control character, invalid UTF-8).
	Unnamed int `json:"u,omitempty"`
	// Cut is true when some of what lies below this place was not recorded
	// (a bound was reached): a schema built from it must leave it open.
	Cut bool `json:"x,omitempty"`
	// Enum counts the values of an enum field by their JSON text.
	Enum map[string]int `json:"e,omitempty"`
	// EnumOver is true when an enum field had a value not recorded: more
	// than MaxEnumValues distinct values, one longer than MaxEnumBytes, or
	// one that is not a scalar.
	EnumOver bool `json:"eo,omitempty"`
	// Note says why the call's arguments are not all in the shape: a body
	// the tool could not read ("body_unread"). Root only.
	Note string `json:"n,omitempty"`
}

// NoteBodyUnread is the Note of a call whose body the tool does not read
// as arguments (an unreadable media type): it went upstream unread.
const NoteBodyUnread = "body_unread"

// Options say how a call's arguments are read into a shape.
type Options struct {
	// EnumFields are the argument paths whose short scalar values are
	// recorded: member names joined with '.', "[]" for an array's items
	// ("status", "filters.modality", "requests[].kind").
	EnumFields map[string]bool
	// StringSourced reports whether a top-level argument came from a
	// string-only source (the path, the query string, a form body). Nil:
	// none did.
	StringSourced func(name string) bool
}

// Of returns the shape of one call's arguments, encoded as compact JSON
// of at most MaxBytes bytes.
func Of(args map[string]any, o Options) string {
	if args == nil {
		args = map[string]any{}
	}
	for budget := MaxNodes; ; budget /= 2 {
		b := &builder{o: o, budget: budget}
		s := &Shape{}
		b.add(s, args, "", 0, false)
		enc, err := json.Marshal(s)
		if err == nil && (len(enc) <= MaxBytes || budget <= 1) {
			if len(enc) > MaxBytes {
				enc, _ = json.Marshal(&Shape{Types: s.Types, Cut: true})
			}
			return string(enc)
		}
	}
}

// builder adds one call's values to a shape, within its place budget.
type builder struct {
	o      Options
	budget int
}

func (b *builder) add(s *Shape, v any, path string, depth int, strSrc bool) {
	switch x := v.(type) {
	case nil:
		s.count(TypeNull)
	case bool:
		s.count(TypeBoolean)
	case json.Number:
		s.count(numberType(string(x)))
	case float64:
		if x == math.Trunc(x) && !math.IsInf(x, 0) {
			s.count(TypeInteger)
		} else {
			s.count(TypeNumber)
		}
	case string:
		s.count(TypeString)
		if f := FormatOf(x); f != "" {
			s.Formats = inc(s.Formats, f)
		}
		if strSrc {
			s.Strings++
			if l := lexical(x); l != "" {
				s.Lexical = inc(s.Lexical, l)
			}
		}
	case map[string]any:
		s.count(TypeObject)
		if depth >= MaxDepth {
			s.Cut = true
			return
		}
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		recorded := 0
		for _, k := range names {
			if !NameOK(k) {
				s.Unnamed++
				continue
			}
			m := s.Members[k]
			if m == nil {
				if recorded >= MaxMembers || b.budget <= 0 {
					s.Cut = true
					continue
				}
				b.budget--
				if s.Members == nil {
					s.Members = map[string]*Shape{}
				}
				m = &Shape{}
				s.Members[k] = m
			}
			recorded++
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			b.add(m, x[k], sub, depth+1, depth == 0 && b.o.StringSourced != nil && b.o.StringSourced(k))
		}
	case []any:
		s.count(TypeArray)
		if depth >= MaxDepth {
			s.Cut = true
			return
		}
		if s.Items == nil && len(x) > 0 {
			if b.budget <= 0 {
				s.Cut = true
				return
			}
			b.budget--
			s.Items = &Shape{}
		}
		for i, it := range x {
			if i == MaxItems {
				break
			}
			b.add(s.Items, it, path+"[]", depth+1, strSrc)
		}
	default:
		s.count(TypeString) // not produced by toolgate's readers
	}
	if b.o.EnumFields[path] {
		s.addEnum(v)
	}
}

func (s *Shape) count(t string) { s.Types = inc(s.Types, t) }

func inc(m map[string]int, k string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k]++
	return m
}

// addEnum records v as an enum value: a short scalar.
func (s *Shape) addEnum(v any) {
	var text string
	switch x := v.(type) {
	case string, bool, json.Number, float64, nil:
		b, err := json.Marshal(x)
		if err != nil {
			s.EnumOver = true
			return
		}
		text = string(b)
	default:
		s.EnumOver = true
		return
	}
	if len(text) > MaxEnumBytes {
		s.EnumOver = true
		return
	}
	if _, seen := s.Enum[text]; !seen && len(s.Enum) >= MaxEnumValues {
		s.EnumOver = true
		return
	}
	s.Enum = inc(s.Enum, text)
}

// NameOK reports whether a member name is recorded: at most MaxNameBytes
// of valid UTF-8 with no control character.
func NameOK(k string) bool {
	if len(k) > MaxNameBytes || !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// numberType is TypeInteger for a JSON number without a fraction (1, -3,
// 2e3, 1.0), else TypeNumber, as JSON Schema reads "integer".
func numberType(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		return TypeInteger
	}
	f, err := strconv.ParseFloat(n, 64)
	if err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) {
		return TypeInteger
	}
	return TypeNumber
}

// lexical is what a string from a string-only source reads as: an
// integer, a number or a boolean as toolgate's coercion reads them, or "".
func lexical(s string) string {
	switch {
	case s == "true" || s == "false":
		return TypeBoolean
	case s == "" || len(s) > 32:
		return ""
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return TypeInteger
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) &&
		strings.Trim(s, "0123456789.-+eE") == "" {
		return TypeNumber
	}
	return ""
}

// formatCheckers are toolgate's own schema validator, one per format of
// Formats: a value is counted under a format only if the validator that
// would enforce it accepts it.
var formatCheckers = func() map[string]*policies.Schema {
	m := make(map[string]*policies.Schema, len(Formats))
	for _, f := range Formats {
		doc := fmt.Sprintf(`{"type":"object","properties":{"v":{"type":"string","format":%q}}}`, f)
		s, err := policies.CompileSchema([]byte(doc), policies.SchemaOptions{Tool: "argshape"})
		if err != nil {
			panic(fmt.Sprintf("argshape: format %s: %v", f, err))
		}
		m[f] = s
	}
	return m
}()

// FormatOf returns the first format of Formats that s has, or "". A cheap
// test of the value's form comes first, stricter than the format's own
// (a uri needs "://"), so that a format is suggested only for values that
// plainly have it; the validator then confirms it.
func FormatOf(s string) string {
	if len(s) < 7 || len(s) > 512 {
		return ""
	}
	for _, f := range Formats {
		if looksLike(f, s) && len(formatCheckers[f].Validate(map[string]any{"v": s})) == 0 {
			return f
		}
	}
	return ""
}

func looksLike(f, s string) bool {
	switch f {
	case "date-time":
		return len(s) >= 20 && digits(s[:4]) && s[4] == '-' && (s[10] == 'T' || s[10] == 't')
	case "date":
		return len(s) == 10 && digits(s[:4]) && s[4] == '-' && s[7] == '-'
	case "uuid":
		return len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-'
	case "email":
		at := strings.IndexByte(s, '@')
		return at > 0 && strings.Count(s, "@") == 1 && strings.Contains(s[at:], ".") && !strings.ContainsAny(s, " \t\r\n\"<>")
	case "ipv4":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is4()
	case "uri":
		i := strings.Index(s, "://")
		return i > 0 && !strings.ContainsAny(s, " \t\r\n\"<>\\")
	}
	return false
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// ErrShape is what Parse returns for text that is not a shape.
var ErrShape = errors.New("not an argument shape")

// Parse decodes an encoded shape (an event's arg_shape). Text longer than
// 4*MaxBytes, nested deeper than the bounds allow, or not a shape is
// refused.
func Parse(text string) (*Shape, error) {
	if len(text) > 4*MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrShape, len(text))
	}
	var s Shape
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrShape, err)
	}
	if d := s.depth(); d > 2*MaxDepth+2 {
		return nil, fmt.Errorf("%w: nested %d deep", ErrShape, d)
	}
	if !s.valid() {
		return nil, fmt.Errorf("%w: a negative count, or a type or format toolgate does not record", ErrShape)
	}
	return &s, nil
}

func (s *Shape) depth() int {
	d := 0
	for _, m := range s.Members {
		if m != nil {
			d = max(d, m.depth())
		}
	}
	if s.Items != nil {
		d = max(d, s.Items.depth())
	}
	return d + 1
}

// known are the keys a shape's counts may have, by map.
var (
	knownTypes   = map[string]bool{TypeObject: true, TypeArray: true, TypeString: true, TypeInteger: true, TypeNumber: true, TypeBoolean: true, TypeNull: true}
	knownLexical = map[string]bool{TypeInteger: true, TypeNumber: true, TypeBoolean: true}
	knownFormats = func() map[string]bool {
		m := map[string]bool{}
		for _, f := range Formats {
			m[f] = true
		}
		return m
	}()
)

// valid reports whether every count is non-negative and every type,
// format and lexical kind one toolgate records, at every place.
func (s *Shape) valid() bool {
	for _, c := range []struct {
		m     map[string]int
		known map[string]bool
	}{{s.Types, knownTypes}, {s.Formats, knownFormats}, {s.Lexical, knownLexical}, {s.Enum, nil}} {
		for k, n := range c.m {
			if n < 0 || c.known != nil && !c.known[k] {
				return false
			}
		}
	}
	if s.Strings < 0 || s.Unnamed < 0 {
		return false
	}
	for _, m := range s.Members {
		if m != nil && !m.valid() {
			return false
		}
	}
	return s.Items == nil || s.Items.valid()
}

// Count is how many values the shape counts: at a member, how many
// objects at its parent's place held it.
func (s *Shape) Count() int {
	n := 0
	for _, c := range s.Types {
		n += c
	}
	return n
}

// Merge adds src's counts to s.
func (s *Shape) Merge(src *Shape) {
	if src == nil {
		return
	}
	s.Types = addCounts(s.Types, src.Types)
	s.Formats = addCounts(s.Formats, src.Formats)
	s.Lexical = addCounts(s.Lexical, src.Lexical)
	s.Strings += src.Strings
	s.Unnamed += src.Unnamed
	s.Cut = s.Cut || src.Cut
	s.EnumOver = s.EnumOver || src.EnumOver
	for k, n := range src.Enum {
		if _, seen := s.Enum[k]; !seen && len(s.Enum) >= MaxEnumValues {
			s.EnumOver = true
			continue
		}
		if s.Enum == nil {
			s.Enum = map[string]int{}
		}
		s.Enum[k] += n
	}
	for k, m := range src.Members {
		if m == nil {
			continue
		}
		if s.Members == nil {
			s.Members = map[string]*Shape{}
		}
		if s.Members[k] == nil {
			s.Members[k] = &Shape{}
		}
		s.Members[k].Merge(m)
	}
	if src.Items != nil {
		if s.Items == nil {
			s.Items = &Shape{}
		}
		s.Items.Merge(src.Items)
	}
}

func addCounts(dst, src map[string]int) map[string]int {
	for k, n := range src {
		if dst == nil {
			dst = map[string]int{}
		}
		dst[k] += n
	}
	return dst
}
