package conf

import (
	"fmt"
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

// IsZero reports whether the tool does not observe.
func (o ObserveConfig) IsZero() bool { return !o.On && len(o.EnumFields) == 0 }

// validateObserve checks a tool's observe section; p is the tool's field
// path.
func (t *Tool) validateObserve(p string) error {
	o := t.Cfg.Observe
	if o.IsZero() {
		return nil
	}
	if t.Cfg.Protocol == ProtocolMCP {
		return fieldErr(p+".observe", "an mcp route's calls are checked against the schemas its server lists; observe is for plain HTTP tools")
	}
	if len(o.EnumFields) > MaxEnumFields {
		return fieldErr(p+".observe.enum_fields", "%d paths; at most %d", len(o.EnumFields), MaxEnumFields)
	}
	t.EnumFields = make(map[string]bool, len(o.EnumFields))
	for i, f := range o.EnumFields {
		if f == "" || !argshape.NameOK(f) || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") || strings.Contains(f, "..") {
			return fieldErr(fmt.Sprintf("%s.observe.enum_fields[%d]", p, i), "%q is not an argument path (member names joined with '.', \"[]\" for an array's items, at most %d bytes)", f, argshape.MaxNameBytes)
		}
		t.EnumFields[f] = true
	}
	return nil
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
