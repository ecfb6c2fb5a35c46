package policies

import (
	"errors"
	"testing"
)

// deepArgs is an arguments object depth levels deep (itself 1; depth at
// least 2): {"a": [[...[{}]...]]}.
func deepArgs(depth int) map[string]any {
	var v any = map[string]any{}
	for range depth - 2 {
		v = []any{v}
	}
	return map[string]any{"a": v}
}

// TestCheckInputDepth: a measured depth is trusted either way, and
// without one the arguments are walked as before.
func TestCheckInputDepth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Input
		tooDeep bool
	}{
		{"measured within", Input{Arguments: map[string]any{}, ArgsDepth: MaxInputDepth}, false},
		{"measured past", Input{Arguments: map[string]any{}, ArgsDepth: MaxInputDepth + 1}, true},
		{"walked within", Input{Arguments: deepArgs(MaxInputDepth)}, false},
		{"walked past", Input{Arguments: deepArgs(MaxInputDepth + 1)}, true},
	} {
		err := CheckInputDepth(&tc.in)
		if got := errors.Is(err, errTooDeep); got != tc.tooDeep {
			t.Errorf("%s: error %v, want too deep %v", tc.name, err, tc.tooDeep)
		}
	}
}
