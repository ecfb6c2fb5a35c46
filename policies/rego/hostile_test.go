package rego

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// The hostile set: policies and inputs that once took the sidecar down
// (issue 14), each decided through a Set as the pipeline decides, on each
// in-process engine, within a 50 ms deadline.
const hostileDeadline = 50 * time.Millisecond

// Bounds the hostile tests assert: honest headroom for a loaded 2-core
// machine under the race detector (measured overruns are in
// docs/policies.md). A builtin call is not interrupted: the one running
// when the deadline passes finishes first. So the overrun allowed is
// maxOverrun plus, for each evaluation running at once, two units (one
// for the CPUs the evaluations share, one of headroom), a unit being the
// time of one json.marshal(input) of the case's input (converting the
// input and writing it whole, the longest single builtin call of the
// set), measured in the same run. Without the race detector a unit is
// 12 ms for a 1 MiB input; under it, on a loaded machine, up to a second.
const (
	maxOverrun    = time.Second
	maxHeapGrowth = 200 << 20
)

// unitOf measures one json.marshal(input) on p's engine.
func unitOf(t *testing.T, p *Policy, in *policies.Input) time.Duration {
	t.Helper()
	c, err := Compile("unit", map[string][]byte{"u.rego": []byte(`package u
deny contains "x" if count(json.marshal(input)) < 0`)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Engine() == policies.EngineCompiled {
		if c, err = c.Compiled(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := c.Eval(context.Background(), in); err != nil && !strings.Contains(err.Error(), "nested deeper") {
		t.Fatal(err)
	}
	return time.Since(start)
}

// deepArrays is JSON arrays nested depth deep, each level holding pad
// numbers before the next level: 2 bytes a level with pad 0.
func deepArrays(depth, pad int) any {
	var v any = []any{}
	for range depth {
		arr := make([]any, 0, pad+1)
		for i := range pad {
			arr = append(arr, json.Number(fmt.Sprint(i)))
		}
		v = append(arr, v)
	}
	return v
}

// wideAtDepth is an array of width numbers at the bottom of arrays nested
// depth deep: every walk path to a number is depth long.
func wideAtDepth(depth, width int) any {
	bottom := make([]any, width)
	for i := range bottom {
		bottom[i] = json.Number("7")
	}
	var v any = bottom
	for range depth {
		v = []any{v}
	}
	return v
}

// bigInput is an input whose arguments are about n bytes of JSON.
func bigInput(n int) *policies.Input {
	words := make([]any, 0, n/16)
	for i := 0; len(words)*16 < n; i++ {
		words = append(words, fmt.Sprintf("word-%09d", i))
	}
	return &policies.Input{Tool: "t", Arguments: map[string]any{"words": words}}
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return len(b)
}

type hostileCase struct {
	name   string
	policy string
	input  func() *policies.Input
}

func hostileCases() []hostileCase {
	walkAny := `package h
deny contains "forbidden" if {
	walk(input, [_, v])
	is_string(v)
	contains(v, "forbidden")
}`
	walkPaths := `package h
deny contains "deep" if {
	walk(input, [p, v])
	count(p) > 100000
}`
	return []hostileCase{
		{"walk/9000-deep-18KB", walkAny, func() *policies.Input {
			return &policies.Input{Tool: "t", Arguments: map[string]any{"a": deepArrays(9000, 0)}}
		}},
		{"walk/9000-deep-108KB", walkAny, func() *policies.Input {
			return &policies.Input{Tool: "t", Arguments: map[string]any{"a": deepArrays(9000, 5)}}
		}},
		{"walk/990-deep-40000-wide", walkAny, func() *policies.Input {
			return &policies.Input{Tool: "t", Arguments: map[string]any{"a": wideAtDepth(990, 40000)}}
		}},
		{"walk-paths/990-deep-40000-wide", walkPaths, func() *policies.Input {
			return &policies.Input{Tool: "t", Arguments: map[string]any{"a": wideAtDepth(990, 40000)}}
		}},
		{"json.marshal-255x-1MiB", `package h
deny contains "big" if {
	n := sum([count(json.marshal(input)) | some i in numbers.range(1, 255)])
	n < 0
}`, func() *policies.Input { return bigInput(1 << 20) }},
		{"numbers.range-1e9", `package h
deny contains "many" if count(numbers.range(1, 1000000000)) < 0`, func() *policies.Input { return &policies.Input{Tool: "t"} }},
		{"comprehension-of-strings", `package h
deny contains "long" if {
	s := concat(",", [x | some i in numbers.range(1, 100000000); x := sprintf("%d-%s", [i, input.tool])])
	count(s) < 0
}`, func() *policies.Input { return &policies.Input{Tool: "t"} }},
	}
}

// peakHeap samples the live heap every millisecond until stop is closed
// and returns the highest sample.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestHostilePolicies decides each hostile case on each in-process engine,
// alone and three at once, and asserts that each call is refused as
// policy_timeout or policy_error (or allowed, when decided in time), no
// later than the deadline plus maxOverrun, and that the heap grows by less
// than maxHeapGrowth.
func TestHostilePolicies(t *testing.T) {
	ctx := context.Background()
	var worstOverrun = map[string]time.Duration{}
	var worstHeap = map[string]uint64{}
	for _, hc := range hostileCases() {
		interp, err := Compile("h", map[string][]byte{"h.rego": []byte(hc.policy)})
		if err != nil {
			t.Fatalf("%s: %v", hc.name, err)
		}
		compiled, err := interp.Compiled(ctx)
		if err != nil {
			t.Fatalf("%s: %v", hc.name, err)
		}
		in := hc.input()
		for _, p := range []*Policy{compiled, interp} {
			set := policies.NewSet("t", []policies.Bound{{Policy: p, Mode: policies.ModeEnforce}}, hostileDeadline, false)
			unit := unitOf(t, p, in)
			for _, n := range []int{1, 3} {
				name := fmt.Sprintf("%s/%s/x%d", hc.name, p.Engine(), n)
				base := liveHeap()
				stop := make(chan struct{})
				peak := peakHeap(stop)
				var wg sync.WaitGroup
				var slowest atomic.Int64
				decisions := make([]policies.Decision, n)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start := time.Now()
						decisions[i] = set.Check(ctx, in)
						el := int64(time.Since(start))
						for {
							old := slowest.Load()
							if el <= old || slowest.CompareAndSwap(old, el) {
								break
							}
						}
					}()
				}
				wg.Wait()
				close(stop)
				growth := int64(<-peak) - int64(base)
				overrun := time.Duration(slowest.Load()) - hostileDeadline
				t.Logf("%s: %q; overrun %v (unit %v); heap growth %.1f MB", name, decisions[0].Reason, overrun.Round(time.Millisecond), unit.Round(time.Millisecond), float64(growth)/(1<<20))
				for _, d := range decisions {
					// No case's input holds what its policy denies: a
					// decision in time allows the call (the interpreter
					// walks without paths in linear time).
					if !d.Allow && d.Reason != bucketing.ReasonPolicyTimeout && d.Reason != bucketing.ReasonPolicyError {
						t.Errorf("%s: decision %+v, want the call allowed, or refused as policy_timeout or policy_error", name, d)
					}
				}
				if bound := maxOverrun + 2*time.Duration(n)*unit; overrun > bound {
					t.Errorf("%s: took %v past its %v deadline, want at most %v", name, overrun, hostileDeadline, bound)
				}
				if growth > maxHeapGrowth {
					t.Errorf("%s: the heap grew by %d MB, want under %d MB", name, growth>>20, maxHeapGrowth>>20)
				}
				worstOverrun[p.Engine()] = max(worstOverrun[p.Engine()], overrun)
				worstHeap[p.Engine()] = max(worstHeap[p.Engine()], uint64(max(growth, 0)))
			}
		}
	}
	for _, e := range []string{policies.EngineCompiled, policies.EngineInterpreter} {
		t.Logf("%s: worst overrun %v, worst heap growth %.1f MB", e, worstOverrun[e].Round(time.Millisecond), float64(worstHeap[e])/(1<<20))
	}
}

// TestHostileInputSizes checks that the inputs are the sizes the issue
// names.
func TestHostileInputSizes(t *testing.T) {
	for _, c := range []struct {
		v        any
		min, max int
	}{
		{deepArrays(9000, 0), 17_000, 19_000},
		{deepArrays(9000, 5), 100_000, 120_000},
		{bigInput(1 << 20).Arguments, 1 << 20, 1<<20 + 100_000},
	} {
		if n := jsonSize(c.v); n < c.min || n > c.max {
			t.Errorf("%s...: %d bytes, want %d to %d", strings.Repeat("[", 3), n, c.min, c.max)
		}
	}
}
