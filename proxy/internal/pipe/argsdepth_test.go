package pipe

import "testing"

// TestArgsDepthFollowsTheMap: the measured depth and numbers hold only
// for the map SetArgs was given; arguments set otherwise afterwards have
// neither.
func TestArgsDepthFollowsTheMap(t *testing.T) {
	var c Call
	if d := c.ArgsDepth(); d != 0 {
		t.Fatalf("no arguments: depth %d, want 0", d)
	}
	args := map[string]any{"a": []any{1}}
	if c.NumbersInRange() {
		t.Fatal("no arguments: numbers said in range")
	}
	c.SetArgs(args, 2, true)
	if d := c.ArgsDepth(); d != 2 || !c.NumbersInRange() {
		t.Fatalf("after SetArgs: depth %d, in range %v; want 2, true", d, c.NumbersInRange())
	}
	c.Args = map[string]any{"a": []any{[]any{[]any{1}}}}
	if d := c.ArgsDepth(); d != 0 || c.NumbersInRange() {
		t.Fatalf("Args replaced: depth %d, in range %v; want 0, false (not known)", d, c.NumbersInRange())
	}
	c.Args = args
	if d := c.ArgsDepth(); d != 2 || !c.NumbersInRange() {
		t.Fatalf("the measured map again: depth %d, in range %v; want 2, true", d, c.NumbersInRange())
	}
	c.SetArgs(args, 2, false)
	if c.NumbersInRange() {
		t.Fatal("SetArgs said not in range: numbers said in range")
	}
}
