package section_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/section"
)

func TestUnder(t *testing.T) {
	tests := []struct {
		name, prefix string
		err          error
		want         string // the error's text
		wantPath     string
	}{
		{"field error", "policies", section.Errorf("engine", "unknown engine %q", "x"), `policies.engine: unknown engine "x"`, "policies.engine"},
		{"index", "tools[2]", section.Errorf("policies[0]", "no policy named %q", "p"), `tools[2].policies[0]: no policy named "p"`, "tools[2].policies[0]"},
		{"list index at the root", "tools", section.Errorf("[1].name", "required"), "tools[1].name: required", "tools[1].name"},
		{"plain error", "events", errors.New("no spool"), "events: no spool", "events"},
		{"wrapped field error", "a", fmtWrap(section.Errorf("b", "bad")), "a.b: bad", "a.b"},
		{"no prefix", "", section.Errorf("b", "bad"), "b: bad", "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := section.Under(tc.prefix, tc.err)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Under(%q, %v) = %v, want %s", tc.prefix, tc.err, err, tc.want)
			}
			var fp interface{ FieldPath() string }
			if !errors.As(err, &fp) || fp.FieldPath() != tc.wantPath {
				t.Errorf("field path of %v is not %q", err, tc.wantPath)
			}
		})
	}
	if section.Under("x", nil) != nil {
		t.Error("Under(x, nil) is not nil")
	}
	// The cause survives for errors.Is.
	if err := section.Under("a", section.At("b", fs.ErrNotExist)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Under lost the cause: %v", err)
	}
}

func fmtWrap(err error) error { return errors.Join(err) }

func TestResolve(t *testing.T) {
	abs := filepath.Join(string(filepath.Separator), "etc", "p.rego")
	tests := []struct{ dir, p, want string }{
		{"conf", "schemas/a.json", filepath.Join("conf", "schemas", "a.json")},
		{"conf", abs, abs},
		{"conf", "", ""},
		{"conf", "../x", "x"},
	}
	for _, tc := range tests {
		if got := section.Resolve(tc.dir, tc.p); got != tc.want {
			t.Errorf("Resolve(%q, %q) = %q, want %q", tc.dir, tc.p, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	// The SHA-256 of "abc" begins ba7816bf8f01.
	if got := section.Version([]byte("abc")); got != "ba7816bf8f01" {
		t.Errorf("Version(abc) = %q, want ba7816bf8f01", got)
	}
}
