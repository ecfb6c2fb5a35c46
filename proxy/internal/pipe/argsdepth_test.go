package pipe

import "testing"

// TestArgsDepthFollowsTheMap: the measured depth holds only for the map
// SetArgs was given; arguments set otherwise afterwards have none.
func TestArgsDepthFollowsTheMap(t *testing.T) {
	var c Call
	if d := c.ArgsDepth(); d != 0 {
		t.Fatalf("no arguments: depth %d, want 0", d)
	}
	args := map[string]any{"a": []any{1}}
	c.SetArgs(args, 2)
	if d := c.ArgsDepth(); d != 2 {
		t.Fatalf("after SetArgs: depth %d, want 2", d)
	}
	c.Args = map[string]any{"a": []any{[]any{[]any{1}}}}
	if d := c.ArgsDepth(); d != 0 {
		t.Fatalf("Args replaced: depth %d, want 0 (not known)", d)
	}
	c.Args = args
	if d := c.ArgsDepth(); d != 2 {
		t.Fatalf("the measured map again: depth %d, want 2", d)
	}
}
