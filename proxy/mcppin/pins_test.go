package mcppin

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

const (
	route  = "payments"
	server = "http://127.0.0.1:8080/mcp"
)

func list(t testing.TB, raws ...string) []map[string]any {
	t.Helper()
	tools, _, err := ParseTools([]byte(`{"tools":[` + strings.Join(raws, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// states is "tool:state[fields]" per verdict, for compact comparisons.
func states(vs []Verdict) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Tool + ":" + string(v.State)
		if v.Fields != nil {
			out[i] += fmt.Sprint(v.Fields)
		}
		if v.Fresh {
			out[i] += "!"
		}
	}
	return out
}

const refund = `{"name":"refund","description":"Refund a payment","inputSchema":{"type":"object"}}`

// TestObserve walks one server through first sight, a repeat, the rug
// pull, a new and a removed tool, the server going back, and an accepted
// change; "!" marks a Fresh verdict (the moment to record an event).
func TestObserve(t *testing.T) {
	p := New(Limits{})
	rug := strings.Replace(pay, `,"maximum":100`, ``, 1)
	steps := []struct {
		name     string
		tools    []string
		complete bool
		want     []string
	}{
		{"first sight", []string{pay, refund}, true, []string{"pay:new!", "refund:new!"}},
		{"listed again, spelled otherwise", []string{refund, strings.ReplaceAll(pay, ":", ": ")}, true, []string{"refund:same!", "pay:same!"}},
		{"again", []string{pay, refund}, true, []string{"pay:same", "refund:same"}},
		{"the rug pull", []string{rug, refund}, true, []string{"pay:changed[inputSchema]!", "refund:same"}},
		{"still changed", []string{rug, refund}, true, []string{"pay:changed[inputSchema]"}},
		{"a new tool, refund removed", []string{rug, `{"name":"drain","inputSchema":{"type":"object"}}`}, true,
			[]string{"pay:changed[inputSchema]", "drain:new!", "refund:removed!"}},
		{"a page without refund removes nothing", []string{rug}, false, []string{"pay:changed[inputSchema]"}},
		{"back as pinned", []string{pay, refund}, true, []string{"pay:same!", "refund:same!", "drain:removed!"}},
	}
	for _, s := range steps {
		got := states(p.Observe(route, server, list(t, s.tools...), s.complete))
		got = slices.DeleteFunc(got, func(v string) bool { return strings.HasSuffix(v, ":same") && !slices.Contains(s.want, v) })
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: verdicts %v, want %v", s.name, got, s.want)
		}
	}

	// The server changes pay again; the operator accepts what was listed.
	vs := p.Observe(route, server, list(t, rug, refund), true)
	if st := p.Status(route, server, "pay"); st.State != StateChanged || !slices.Equal(st.Fields, []string{FieldInputSchema}) {
		t.Fatalf("Status(pay) = %+v", st)
	}
	if _, err := p.Accept(route, server, "pay", "00"); !errors.Is(err, ErrStaleAccept) {
		t.Errorf("Accept with another digest: %v, want ErrStaleAccept", err)
	}
	// refund was pinned at first sight: accepting it marks it reviewed
	// (new_tools: change), and only once.
	if st, err := p.Accept(route, server, "refund", vs[1].Listed.Digest); err != nil || st.Source != SourceAccepted {
		t.Errorf("Accept of a tool pinned at first sight: %+v, %v", st, err)
	}
	if _, err := p.Accept(route, server, "refund", vs[1].Listed.Digest); !errors.Is(err, ErrNoChange) {
		t.Errorf("Accept of an unchanged tool: %v, want ErrNoChange", err)
	}
	if _, err := p.Accept(route, server, "nothing", ""); !errors.Is(err, ErrNoPin) {
		t.Errorf("Accept of an unknown tool: %v, want ErrNoPin", err)
	}
	if ch := p.Changes(false); len(ch) != 2 || ch[0].Tool != "drain" || ch[1].Tool != "pay" {
		t.Errorf("Changes = %v, want drain (removed) and pay", states(ch))
	}
	st, err := p.Accept(route, server, "pay", vs[0].Listed.Digest)
	if err != nil || st.State != StateSame || st.Source != SourceAccepted || st.Pinned.Digest != vs[0].Listed.Digest {
		t.Fatalf("Accept = %+v, %v", st, err)
	}
	if got := states(p.Observe(route, server, list(t, rug, refund), true)); !slices.Equal(got, []string{"pay:same", "refund:same", "drain:removed"}) {
		t.Errorf("after Accept: %v", got)
	}
	if st, err := p.Accept(route, server, "drain", ""); err != nil || st.State != StateUnknown {
		t.Errorf("Accept of a removal = %+v, %v; want the pin dropped", st, err)
	}
	if p.PinnedDefinition(route, server, "pay") == nil {
		t.Error("the accepted definition's text was not kept from its next listing")
	}
	if st := p.Status(route, "http://127.0.0.1:8080/other", "pay"); st.State != StateUnknown {
		t.Errorf("another server's pay: %v, want unknown", st.State)
	}
}

// TestObserveBounds checks that a tool or server past the bounds is not
// pinned and is handled as a change, and that no pin is evicted for it.
func TestObserveBounds(t *testing.T) {
	p := New(Limits{MaxServers: 1, MaxTools: 1})
	if got := states(p.Observe(route, server, list(t, pay, refund), true)); !slices.Equal(got, []string{"pay:new!", "refund:unpinned!"}) {
		t.Errorf("past max tools: %v", got)
	}
	if got := states(p.Observe(route, "http://127.0.0.1:9/mcp", list(t, pay), true)); !slices.Equal(got, []string{"pay:unpinned!"}) {
		t.Errorf("past max servers: %v", got)
	}
	if got := states(p.Observe(route, server, list(t, pay, refund), true)); !slices.Equal(got, []string{"pay:same!", "refund:unpinned"}) {
		t.Errorf("past max tools, again: %v; want refund unpinned, not fresh", got)
	}
	if got := states(p.Observe(route, "http://127.0.0.1:9/mcp", list(t, pay), true)); !slices.Equal(got, []string{"pay:unpinned"}) {
		t.Errorf("past max servers, again: %v; want not fresh", got)
	}
	// A later call finds the tools past the bounds unpinned, not unknown
	// (an unknown tool passes where new tools are pinned at first sight).
	if v := p.Status(route, server, "refund"); v.State != StateUnpinned {
		t.Errorf("Status of a tool past max tools: %s, want unpinned", v.State)
	}
	if v := p.Status(route, "http://127.0.0.1:9/mcp", "pay"); v.State != StateUnpinned {
		t.Errorf("Status of a tool of a server past max servers: %s, want unpinned", v.State)
	}
	if v := p.Status(route, server, "never_listed"); v.State != StateUnknown {
		t.Errorf("Status of a tool never listed: %s, want unknown", v.State)
	}
	rug := strings.Replace(pay, `,"maximum":100`, ``, 1)
	if got := states(p.Observe(route, server, list(t, rug), true)); !slices.Equal(got, []string{"pay:changed[inputSchema]!"}) {
		t.Errorf("the pin was not kept: %v", got)
	}
	var m Mode
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	v := Verdict{Tool: "refund", State: StateUnpinned}
	if tr := m.Treat(&v); tr.Call != CallRefuse {
		t.Errorf("an unpinned tool's calls: %v, want refused", tr.Call)
	}
	long := `{"name":"` + strings.Repeat("n", MaxToolName+1) + `"}`
	if vs := New(Limits{}).Observe(route, server, list(t, long), true); len(vs) != 1 || vs[0].State != StateUnpinned {
		t.Errorf("a name over MaxToolName: %v, want unpinned", states(vs))
	}
	var l Lock
	if u := l.Merge(route, server, list(t, long, pay), at); u.Skipped != 1 || len(l.Pins) != 1 {
		t.Errorf("Merge of a name over MaxToolName: %+v, %d pins; want it skipped", u, len(l.Pins))
	}
	big := New(Limits{MaxDefinitionBytes: 10})
	big.Observe(route, server, list(t, pay), true)
	if big.PinnedDefinition(route, server, "pay") != nil {
		t.Error("a definition over max_definition_bytes was kept")
	}
}

// TestPinsConcurrent hammers one store from many goroutines (run with
// -race): every verdict is new, same or the one change.
func TestPinsConcurrent(t *testing.T) {
	p := New(Limits{})
	rug := list(t, strings.Replace(pay, `,"maximum":100`, ``, 1))
	orig := list(t, pay)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				tools := orig
				if (g+i)%3 == 0 {
					tools = rug
				}
				for _, v := range p.Observe(route, server, tools, true) {
					if v.State != StateNew && v.State != StateSame && (v.State != StateChanged || !slices.Equal(v.Fields, []string{FieldInputSchema})) {
						t.Errorf("verdict %+v", v)
					}
				}
				p.Status(route, server, "pay")
				p.Changes(true)
			}
		})
	}
	wg.Wait()
}

func TestServerKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080/mcp":     "http://127.0.0.1:8080/mcp",
		"HTTP://Example.COM:80/mcp?x=1": "http://example.com/mcp",
		"https://example.com:443/a%2Fb": "https://example.com/a%2Fb",
		"http://[::1]:9000/mcp":         "http://[::1]:9000/mcp",
		"http://[::1]/mcp":              "http://[::1]/mcp",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := ServerKey(u); got != want {
			t.Errorf("ServerKey(%s) = %s, want %s", in, got, want)
		}
	}
}
