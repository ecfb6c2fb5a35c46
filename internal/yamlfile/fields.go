package yamlfile

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/suggest"
)

// maxListedFields bounds the known fields an unknown-field error lists
// when none is close enough to suggest.
const maxListedFields = 40

// didYouMean is what an unknown-field error adds after "unknown field":
// the known field name was most likely meant to be ("; did you mean
// path?"), or when none is close, the known fields ("; expected one of:
// host, path, method"); "" when known is empty.
func didYouMean(name string, known []string) string {
	if len(known) == 0 {
		return ""
	}
	if s, ok := suggest.Nearest(name, known); ok {
		return "; did you mean " + s + "?"
	}
	if len(known) > maxListedFields {
		known = append(known[:maxListedFields:maxListedFields], fmt.Sprintf("... (%d more)", len(known)-maxListedFields))
	}
	return "; expected one of: " + strings.Join(known, ", ")
}

// knownFields returns the YAML keys of the struct type that yaml.v3 names
// typeName ("proxy.MatchConfig") in an unknown-field error at the dotted
// field path, found among the types t (the type decoded into) reaches
// through the fields YAML decodes: the one so named, or where two share the name, the one the path
// leads to. It returns nil when it finds none.
func knownFields(t reflect.Type, typeName, field string) []string {
	var named []reflect.Type
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		if t.String() == typeName {
			named = append(named, t)
		}
		eachKey(t, func(_ string, ft reflect.Type) bool {
			walk(ft)
			return true
		})
	}
	if t == nil {
		return nil
	}
	walk(t)
	switch len(named) {
	case 0:
		return nil
	case 1:
		return yamlKeys(named[0])
	}
	parts := splitField(field)
	if at := typeAt(t, parts[:len(parts)-1]); at != nil && at.String() == typeName {
		return yamlKeys(at)
	}
	return nil
}

// typeAt follows a field path (split by splitField) from t through
// structs' YAML keys, lists' items and maps' values, and returns the
// struct type it ends at, or nil.
func typeAt(t reflect.Type, parts []string) reflect.Type {
	for _, p := range parts {
		t = deref(t)
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByKey(t, p)
			if !ok {
				return nil
			}
			t = f
		case reflect.Slice, reflect.Array:
			if _, err := strconv.Atoi(p); err != nil {
				return nil
			}
			t = t.Elem()
		case reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
	}
	if t = deref(t); t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// yamlKeys lists the keys yaml.v3 decodes into struct type t, in the order
// of its fields, those of inlined structs in place.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	eachKey(t, func(k string, _ reflect.Type) bool {
		keys = append(keys, k)
		return true
	})
	return keys
}

// fieldByKey returns the type of the field of struct type t that YAML key
// decodes into.
func fieldByKey(t reflect.Type, key string) (reflect.Type, bool) {
	var found reflect.Type
	eachKey(t, func(k string, ft reflect.Type) bool {
		if k == key {
			found = ft
			return false
		}
		return true
	})
	return found, found != nil
}

// eachKey calls fn with each YAML key of struct type t and its field's
// type, as yaml.v3 reads struct tags: `yaml:"name"`, a lower-cased field
// name without one, "-" skipped, ",inline" structs' keys in place. It
// stops when fn returns false, and reports whether it went through.
func eachKey(t reflect.Type, fn func(key string, ft reflect.Type) bool) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			if it := deref(f.Type); it.Kind() == reflect.Struct && !eachKey(it, fn) {
				return false
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if !fn(name, f.Type) {
			return false
		}
	}
	return true
}
