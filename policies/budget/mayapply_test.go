package budget

import (
	"context"
	"testing"
	"time"
)

// TestMayApply checks the compile-time answer the pipeline asks before it
// gives a tool a budget step: true for every tool a budget, the loop rule
// or an upstream's rate could count, and for a tool with no host when any
// upstream is configured; false only where Admit could never count.
func TestMayApply(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		tool string
		host string
		want bool
	}{
		{"budget over every tool", Config{Limits: []Limit{{Name: "all", Calls: 5, Window: time.Minute}}}, "other", "api.example.org", true},
		{"budget naming the tool", Config{Limits: []Limit{{Name: "s", Tools: []string{"search"}, Calls: 5, Window: time.Minute}}}, "search", "api.example.org", true},
		{"budget naming another tool", Config{Limits: []Limit{{Name: "s", Tools: []string{"search"}, Calls: 5, Window: time.Minute}}}, "other", "api.example.org", false},
		{"loops over every tool", Config{Loops: LoopConfig{MaxRepeats: 3, Window: time.Minute}}, "other", "", true},
		{"loops naming another tool", Config{Loops: LoopConfig{MaxRepeats: 3, Window: time.Minute, Tools: []string{"search"}}}, "other", "", false},
		{"upstream of the tool's host", Config{Upstreams: []Upstream{{Host: "api.example.org", Rate: 5}}}, "other", "api.example.org", true},
		{"upstream of another host", Config{Upstreams: []Upstream{{Host: "api.example.org", Rate: 5}}}, "other", "files.example.org", false},
		{"upstream, tool without a host", Config{Upstreams: []Upstream{{Host: "api.example.org", Rate: 5}}}, "other", "", true},
		{"backoff only", Config{Upstreams: []Upstream{{Host: "api.example.org"}}}, "other", "api.example.org", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, tt.cfg, "search", "other")
			if got := e.MayApply(tt.tool, tt.host); got != tt.want {
				t.Fatalf("MayApply(%q, %q) = %v, want %v", tt.tool, tt.host, got, tt.want)
			}
			if tt.want {
				return
			}
			// Where MayApply says never, Admit must agree: a call of the
			// tool, however often, is never refused nor counted.
			for range 20 {
				v := e.Admit(context.Background(), &Call{Tool: tt.tool, Session: "s", Agent: "a", Upstream: tt.host, UpstreamPort: "443", UpstreamDefaultPort: true})
				if v.Refused || v.Scope != "" {
					t.Fatalf("MayApply said never, but Admit gave %+v", v)
				}
			}
		})
	}
}
