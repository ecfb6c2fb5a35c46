package mcppin

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkObserve is the cost of observing one tools/list answer of 100
// tools that match their pins (the common case on the answer path).
func BenchmarkObserve(b *testing.B) {
	raws := make([]string, 100)
	for i := range raws {
		raws[i] = strings.Replace(pay, `"name":"pay"`, fmt.Sprintf(`"name":"pay%d"`, i), 1)
	}
	tools := list(b, raws...)
	p := New(Limits{})
	p.Observe(route, server, tools, true)
	b.ReportAllocs()
	for b.Loop() {
		p.Observe(route, server, tools, true)
	}
}

// BenchmarkStatus is the cost a tools/call pays: one Status.
func BenchmarkStatus(b *testing.B) {
	p := New(Limits{})
	p.Observe(route, server, list(b, pay), true)
	b.ReportAllocs()
	for b.Loop() {
		p.Status(route, server, "pay")
	}
}
