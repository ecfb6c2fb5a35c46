package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/proxy/argshape"
)

// MaxEnumFields is the most paths ObserveConfig.EnumFields may list.
const MaxEnumFields = 32

// ObserveConfig is a tool's observe mode: each call's event carries the
// shape of its arguments (arg_shape: names, JSON types, presence, nesting,
// recognised formats; never values), for toolgate schema suggest. It
// changes nothing else: a call is forwarded, or refused, exactly as
// without it. In YAML it is either a boolean (observe: true) or a mapping
// of its options, which turns it on (observe: {enum_fields: [status]}).
type ObserveConfig struct {
	// On records the shapes. Default false.
	On bool `yaml:"-"`
	// EnumFields are argument paths whose short scalar values are recorded
	// too, as enum candidates: member names joined with '.', "[]" for an
	// array's items ("status", "filters.modality"). These values are
	// stored in events: list only fields whose values are not secret. At
	// most MaxEnumFields. Default none.
	EnumFields []string `yaml:"enum_fields"`
}

// UnmarshalYAML reads observe: true|false, or a mapping of the options
// (which means on).
func (o *ObserveConfig) UnmarshalYAML(unmarshal func(any) error) error {
	var on bool
	if err := unmarshal(&on); err == nil {
		*o = ObserveConfig{On: on}
		return nil
	}
	type plain ObserveConfig
	var p plain
	if err := unmarshal(&p); err != nil {
		return err
	}
	*o = ObserveConfig(p)
	o.On = true
	return nil
}

// IsZero reports whether the tool does not observe.
func (o ObserveConfig) IsZero() bool { return !o.On && len(o.EnumFields) == 0 }

// validateObserve checks a tool's observe section; p is the tool's field
// path.
func (t *tool) validateObserve(p string) error {
	o := t.cfg.Observe
	if o.IsZero() {
		return nil
	}
	if t.cfg.Protocol == ProtocolMCP {
		return fieldErr(p+".observe", "an mcp route's calls are checked against the schemas its server lists; observe is for plain HTTP tools")
	}
	if len(o.EnumFields) > MaxEnumFields {
		return fieldErr(p+".observe.enum_fields", "%d paths; at most %d", len(o.EnumFields), MaxEnumFields)
	}
	t.enumFields = make(map[string]bool, len(o.EnumFields))
	for i, f := range o.EnumFields {
		if f == "" || !argshape.NameOK(f) || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") || strings.Contains(f, "..") {
			return fieldErr(fmt.Sprintf("%s.observe.enum_fields[%d]", p, i), "%q is not an argument path (member names joined with '.', \"[]\" for an array's items, at most %d bytes)", f, argshape.MaxNameBytes)
		}
		t.enumFields[f] = true
	}
	return nil
}

// observeStep records the shape of the call's arguments in its event
// (step 2a, right after extraction, so that a call refused later has its
// shape too). It never refuses: a body the tool did not read as its
// arguments is noted (argshape.NoteBodyUnread) and goes on as it would.
type observeStep struct{ t *tool }

func buildObserve(e *chainEnv) requestStep {
	if !e.t.cfg.Observe.On {
		return nil
	}
	return observeStep{t: e.t}
}

func (s observeStep) check(_ context.Context, c *call) *refusal {
	t, r := s.t, c.in
	src := t.sources
	if src == 0 {
		src = bitPath | bitQuery
	}
	bodySrc, _ := bodySource(t, r)
	var query url.Values
	if src&bitQuery != 0 && r.URL.RawQuery != "" {
		query, _ = url.ParseQuery(r.URL.RawQuery) // extraction refused a query it cannot decode
	}
	o := argshape.Options{EnumFields: t.enumFields, StringSourced: func(name string) bool {
		if _, ok := c.vars[name]; ok && src&bitPath != 0 {
			return true
		}
		if _, ok := query[name]; ok {
			return true
		}
		return bodySrc == bitForm
	}}
	shape := argshape.Of(c.args, o)
	if bodySrc == 0 && (r.ContentLength > 0 || r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody) {
		shape = withNote(shape, argshape.NoteBodyUnread)
	}
	c.ev.ArgShape = shape
	return nil
}

// withNote adds a note to an encoded shape (a JSON object).
func withNote(shape, note string) string {
	if shape == "{}" {
		return `{"n":"` + note + `"}`
	}
	return shape[:len(shape)-1] + `,"n":"` + note + `"}`
}
