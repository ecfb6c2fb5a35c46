package mcppin

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/canonjson"
)

// State is what an observation found for one tool.
type State string

// The states of a Verdict.
const (
	// StateNew is a tool seen for the first time: it is pinned now.
	StateNew State = "new"
	// StateSame is a tool listed as its pin says.
	StateSame State = "same"
	// StateChanged is a tool listed other than its pin says; the pin is
	// kept until an operator accepts the change (Accept).
	StateChanged State = "changed"
	// StateRemoved is a pinned tool a complete list no longer names; its
	// pin is kept, so that a tool coming back changed is a change.
	StateRemoved State = "removed"
	// StateUnpinned is a tool seen for the first time past the store's
	// bounds (Limits, or a name over MaxToolName): it is not pinned, and is handled as a change (a pin
	// is never evicted to make room, since a forgotten pin would let a
	// changed tool be pinned afresh).
	StateUnpinned State = "unpinned"
	// StateUnknown is Status's answer for a tool no listing has shown.
	StateUnknown State = "unknown"
)

// Sources of a pin.
const (
	SourceFirstSeen = "first_seen"
	SourceLockFile  = "lock_file"
	SourceAccepted  = "accepted"
)

// Verdict is what an observation (or Status) says about one tool. It is a
// plain value; Fields names fields, never values.
type Verdict struct {
	// Route is the MCP route's name; Server its server key (ServerKey).
	Route  string `json:"route"`
	Server string `json:"server"`
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// State is what was found.
	State State `json:"state"`
	// Fields lists the fields that differ from the pin (StateChanged), in
	// Fields order; nil otherwise.
	Fields []string `json:"fields,omitempty"`
	// Pinned is the pin's digest (zero for a tool without a pin).
	Pinned Definition `json:"pinned"`
	// Listed is the digest of the definition listed now (zero for a
	// removed tool). For StateChanged it is the digest Accept takes.
	Listed Definition `json:"listed"`
	// PinnedAt is when the pin was made; Source how ("first_seen",
	// "lock_file", "accepted").
	PinnedAt time.Time `json:"pinned_at"`
	Source   string    `json:"source"`
	// Fresh is true the first time this state (and, for a change, this
	// listed digest) is seen for the tool: the moment to record an event.
	// For StateUnpinned it is true once per tool (within the bounds: past
	// MaxTools such tools of a server, or MaxServers such servers, never).
	Fresh bool `json:"-"`
}

// Enforced reports whether the verdict is one a Mode acts on: a change,
// or a tool past the bounds.
func (v *Verdict) Enforced() bool { return v.State == StateChanged || v.State == StateUnpinned }

// Defaults of Limits.
const (
	DefaultMaxServers         = 256
	DefaultMaxTools           = 1000
	DefaultMaxDefinitionBytes = 256 << 10
	DefaultMaxServerBytes     = 8 << 20
)

// Limits bounds a Pins store. The zero value takes the defaults.
type Limits struct {
	// MaxServers bounds the (route, server) pairs with pins. A server seen
	// past it gets no pins: its tools are StateUnpinned. Default 256.
	MaxServers int
	// MaxTools bounds the pins of one server. A tool seen past it is
	// StateUnpinned. Default 1000 (the default of mcp.max_tools).
	MaxTools int
	// MaxDefinitionBytes bounds one definition's canonical JSON kept with
	// its pin (what a listing shows in place of a changed tool); a larger
	// one is pinned by digest only. Default 256 KiB.
	MaxDefinitionBytes int
	// MaxServerBytes bounds the definitions kept per server; past it,
	// definitions are pinned by digest only. Default 8 MiB.
	MaxServerBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxServers <= 0 {
		l.MaxServers = DefaultMaxServers
	}
	if l.MaxTools <= 0 {
		l.MaxTools = DefaultMaxTools
	}
	if l.MaxDefinitionBytes <= 0 {
		l.MaxDefinitionBytes = DefaultMaxDefinitionBytes
	}
	if l.MaxServerBytes <= 0 {
		l.MaxServerBytes = DefaultMaxServerBytes
	}
	return l
}

// Pins holds the pinned definitions of every (route, server, tool). It is
// safe for concurrent use; create it with New.
type Pins struct {
	lim Limits
	now func() time.Time

	mu      sync.Mutex
	servers map[serverKey]*serverPins
	// overflow remembers servers seen past MaxServers (at most MaxServers
	// of them), so their tools are reported Fresh once, not at every
	// listing.
	overflow map[serverKey]bool
}

type serverKey struct{ route, server string }

type serverPins struct {
	tools map[string]*pin
	bytes int // definition text held
	// unpinned remembers tools seen past the bounds (at most MaxTools),
	// so each is reported Fresh once.
	unpinned map[string]bool
}

// pin is one tool's pin and what was last seen of it.
type pin struct {
	def    Definition
	doc    json.RawMessage // canonical JSON of the pinned definition; nil when not kept
	at     time.Time
	source string
	// pending is the changed definition last listed; nil when the tool is
	// listed as pinned.
	pending *Definition
	removed bool
	// unkept is true when the text was over the bounds: it is not made
	// again at each listing.
	unkept bool
	// reported is the state and digest last reported, for Verdict.Fresh.
	reported string
}

// New returns an empty store with the given limits (zero fields take the
// defaults).
func New(lim Limits) *Pins {
	return &Pins{lim: lim.withDefaults(), now: time.Now, servers: map[serverKey]*serverPins{}}
}

// ServerKey is the key a server's pins are filed under: scheme and host in
// lower case, the scheme's default port left out, and the path as
// escaped, with no query ("http://127.0.0.1:8080/mcp"). The proxy and
// `toolgate mcp pin` key by it, so a lock file matches what the proxy sees.
func ServerKey(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" && !(scheme == "http" && p == "80") && !(scheme == "https" && p == "443") {
		host = net.JoinHostPort(strings.Trim(host, "[]"), p)
	}
	return scheme + "://" + host + u.EscapedPath()
}

// listed is one tool of a listing, digested.
type listed struct {
	def  Definition
	tool map[string]any
}

// Observe compares the tools of one tools/list answer (ParseTools, or any
// decoded objects) with the pins of (route, server) and returns a verdict
// per tool, in the order listed (a name listed twice is judged once, by
// the definition that differs from its pin, if any). A tool seen for the
// first time is pinned; a changed tool keeps its pin. complete is true
// when tools is the server's whole list (one page without a next cursor,
// or every page): pinned tools it lacks are then reported as removed,
// after the listed ones, sorted by name. Tools without a string name are
// skipped.
func (p *Pins) Observe(route, server string, tools []map[string]any, complete bool) []Verdict {
	// Digests are taken outside the lock; the canonical text a pin keeps
	// is made under it, for new pins only (rare).
	byName := make(map[string]listed, len(tools))
	order := make([]string, 0, len(tools))
	for _, t := range tools {
		d := Digest(t)
		if d.Name == "" {
			continue
		}
		if _, seen := byName[d.Name]; seen {
			if _, differs := p.compareLocked(route, server, d); differs {
				byName[d.Name] = listed{def: d, tool: t}
			}
			continue
		}
		order = append(order, d.Name)
		byName[d.Name] = listed{def: d, tool: t}
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	k := serverKey{route, server}
	sp := p.servers[k]
	if sp == nil && len(p.servers) < p.lim.MaxServers {
		sp = &serverPins{tools: map[string]*pin{}}
		p.servers[k] = sp
	}
	out := make([]Verdict, 0, len(order))
	for _, name := range order {
		l := byName[name]
		v := Verdict{Route: route, Server: server, Tool: name, Listed: l.def}
		pn := (*pin)(nil)
		if sp != nil {
			pn = sp.tools[name]
		}
		switch {
		case pn == nil && (sp == nil || len(sp.tools) >= p.lim.MaxTools || len(name) > MaxToolName):
			v.State, v.Fresh = StateUnpinned, p.firstUnpinned(k, sp, name)
			out = append(out, v)
			continue
		case pn == nil:
			pn = &pin{def: l.def, at: now, source: SourceFirstSeen}
			sp.keep(pn, p.canonical(l.tool), p.lim)
			sp.tools[name] = pn
			v.State = StateNew
		case pn.def.Digest == l.def.Digest:
			pn.pending, pn.removed = nil, false
			if pn.doc == nil && !pn.unkept {
				// A pin from a lock file without its text, or an
				// accepted change: the text is learned when listed.
				sp.keep(pn, p.canonical(l.tool), p.lim)
			}
			v.State = StateSame
		default:
			d := l.def
			pn.pending, pn.removed = &d, false
			v.State, v.Fields = StateChanged, Diff(pn.def, l.def)
		}
		pn.verdict(&v)
		out = append(out, v)
	}
	if sp == nil && len(p.overflow) < p.lim.MaxServers {
		if p.overflow == nil {
			p.overflow = map[serverKey]bool{}
		}
		p.overflow[k] = true
	}
	if complete && sp != nil {
		for _, name := range slices.Sorted(maps.Keys(sp.tools)) {
			if _, ok := byName[name]; ok {
				continue
			}
			pn := sp.tools[name]
			pn.pending, pn.removed = nil, true
			v := Verdict{Route: route, Server: server, Tool: name, State: StateRemoved}
			pn.verdict(&v)
			out = append(out, v)
		}
	}
	return out
}

// firstUnpinned reports whether a tool past the bounds is reported for
// the first time, and remembers it within the bounds (a long name by its
// hash); the caller holds p.mu. Past MaxTools remembered, or for a server
// already seen past MaxServers, nothing is fresh any more.
func (p *Pins) firstUnpinned(k serverKey, sp *serverPins, name string) bool {
	if sp == nil {
		// Every tool of the server's first listing is fresh; Observe
		// remembers the server once the listing is done.
		return !p.overflow[k] && len(p.overflow) < p.lim.MaxServers
	}
	if len(name) > MaxToolName {
		name = sum([]byte(name))
	}
	if sp.unpinned[name] || len(sp.unpinned) >= p.lim.MaxTools {
		return false
	}
	if sp.unpinned == nil {
		sp.unpinned = map[string]bool{}
	}
	sp.unpinned[name] = true
	return true
}

// compareLocked reports whether d differs from the pin of its tool.
func (p *Pins) compareLocked(route, server string, d Definition) (Definition, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp := p.servers[serverKey{route, server}]; sp != nil {
		if pn := sp.tools[d.Name]; pn != nil {
			return pn.def, pn.def.Digest != d.Digest
		}
	}
	return Definition{}, false
}

// canonical is a definition's canonical JSON.
func (p *Pins) canonical(t map[string]any) json.RawMessage {
	return canonjson.Append(nil, t)
}

// keep stores a pin's definition text when the server's bound allows.
func (sp *serverPins) keep(pn *pin, doc json.RawMessage, lim Limits) {
	sp.bytes -= len(pn.doc)
	pn.doc, pn.unkept = nil, false
	switch {
	case doc == nil:
	case len(doc) <= lim.MaxDefinitionBytes && sp.bytes+len(doc) <= lim.MaxServerBytes:
		pn.doc = doc
		sp.bytes += len(doc)
	default:
		pn.unkept = true
	}
}

// verdict completes v with the pin's fields and works out Fresh.
func (pn *pin) verdict(v *Verdict) {
	v.Pinned, v.PinnedAt, v.Source = pn.def, pn.at, pn.source
	key := string(v.State)
	if v.State == StateChanged {
		key += ":" + v.Listed.Digest
	}
	v.Fresh = key != pn.reported
	pn.reported = key
}

// Status returns what the last observation found for one tool, for the
// check of a tools/call: StateUnpinned for a tool listed past the bounds
// (as far as they remember it), StateUnknown when the tool has no pin and
// was not seen past them. Fresh is false.
func (p *Pins) Status(route, server, tool string) Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := Verdict{Route: route, Server: server, Tool: tool, State: StateUnknown}
	k := serverKey{route, server}
	sp := p.servers[k]
	if sp == nil || sp.tools[tool] == nil {
		// A tool listed past the bounds is not pinned, and stays
		// unreviewed: a later call must not find it merely unknown.
		name := tool
		if len(name) > MaxToolName {
			name = sum([]byte(name))
		}
		if (sp == nil && p.overflow[k]) || (sp != nil && sp.unpinned[name]) {
			v.State = StateUnpinned
		}
		return v
	}
	pn := sp.tools[tool]
	v.Pinned, v.PinnedAt, v.Source, v.Listed = pn.def, pn.at, pn.source, pn.def
	switch {
	case pn.pending != nil:
		v.State, v.Listed, v.Fields = StateChanged, *pn.pending, Diff(pn.def, *pn.pending)
	case pn.removed:
		v.State, v.Listed = StateRemoved, Definition{}
	default:
		v.State = StateSame
	}
	return v
}

// PinnedDefinition returns the canonical JSON of a tool's pinned
// definition, to list in place of a changed one; nil when the tool has no
// pin or its text was not kept (over the bounds, or a pin from a lock file
// written without definitions).
func (p *Pins) PinnedDefinition(route, server, tool string) json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp := p.servers[serverKey{route, server}]; sp != nil {
		if pn := sp.tools[tool]; pn != nil {
			return pn.doc
		}
	}
	return nil
}

// Accept makes an operator's decision on a changed tool: the definition
// last listed becomes the pin (Source "accepted"). digest is the listed
// digest the operator reviewed (Verdict.Listed.Digest): if the server has
// changed the tool again since, nothing is accepted (ErrStaleAccept). For
// a removed tool, Accept with an empty digest drops the pin. It returns the
// tool's status after the decision. The text of an accepted definition is
// kept from its next listing.
func (p *Pins) Accept(route, server, tool, digest string) (Verdict, error) {
	p.mu.Lock()
	sp := p.servers[serverKey{route, server}]
	var pn *pin
	if sp != nil {
		pn = sp.tools[tool]
	}
	switch {
	case pn == nil:
		p.mu.Unlock()
		return Verdict{}, fmt.Errorf("accept %s on %s (route %s): %w", tool, server, route, ErrNoPin)
	case pn.removed && digest == "":
		sp.bytes -= len(pn.doc)
		delete(sp.tools, tool)
		p.mu.Unlock()
		return p.Status(route, server, tool), nil
	case pn.pending == nil && pn.source == SourceFirstSeen && digest == pn.def.Digest:
		// A tool pinned at first sight, reviewed (new_tools: change).
		pn.source, pn.at = SourceAccepted, p.now()
		p.mu.Unlock()
		return p.Status(route, server, tool), nil
	case pn.pending == nil:
		p.mu.Unlock()
		return Verdict{}, fmt.Errorf("accept %s on %s (route %s): %w", tool, server, route, ErrNoChange)
	case pn.pending.Digest != digest:
		p.mu.Unlock()
		return Verdict{}, fmt.Errorf("accept %s on %s (route %s): %w", tool, server, route, ErrStaleAccept)
	}
	sp.keep(pn, nil, p.lim)
	pn.def, pn.pending, pn.at, pn.source, pn.reported = *pn.pending, nil, p.now(), SourceAccepted, string(StateSame)
	p.mu.Unlock()
	return p.Status(route, server, tool), nil
}

// Changes lists the tools whose last listing differs from their pin, or
// that a complete list no longer names (and, with firstSeen, the tools
// pinned at first sight and not yet accepted, for routes with new_tools:
// change), sorted by route, server and tool: what an operator has to
// decide (the admin API's list).
func (p *Pins) Changes(firstSeen bool) []Verdict {
	p.mu.Lock()
	type ref struct{ route, server, tool string }
	var refs []ref
	for k, sp := range p.servers {
		for name, pn := range sp.tools {
			if pn.pending != nil || pn.removed || (firstSeen && pn.source == SourceFirstSeen) {
				refs = append(refs, ref{k.route, k.server, name})
			}
		}
	}
	p.mu.Unlock()
	slices.SortFunc(refs, func(a, b ref) int {
		return strings.Compare(a.route+"\x00"+a.server+"\x00"+a.tool, b.route+"\x00"+b.server+"\x00"+b.tool)
	})
	out := make([]Verdict, 0, len(refs))
	for _, r := range refs {
		if v := p.Status(r.route, r.server, r.tool); v.State != StateUnknown {
			out = append(out, v)
		}
	}
	return out
}
