package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/textcut"
	"github.com/toolgate/toolgate/policies"
)

// maxMCPServers bounds the servers whose tool lists are remembered; past
// it, the server seen least recently is forgotten (its next unknown call
// is fetched again).
const maxMCPServers = 64

// maxServerSchemaBytes bounds the schema text remembered per server; a
// schema past it is kept as too large (its calls pass unchecked).
const maxServerSchemaBytes = 8 << 20

// ErrSchemaTooLarge marks a learned schema past its bounds (the route's
// mcp.max_schema_bytes, or maxServerSchemaBytes per server): the tool's
// calls pass unchecked, recorded as inspected=false.
var ErrSchemaTooLarge = errors.New("the listed schema is larger than the limit")

// minListTTL is the shortest time a list with a ttlMs is used before it is
// fetched again: a ttlMs of 0 (immediately stale, the TypeScript SDK's
// default) would otherwise cost a tools/list per call.
const minListTTL = time.Second

// Schemas remembers, per upstream MCP server, each tool's inputSchema
// from the tools/list answers that passed through (or that toolgate asked
// for). Schemas are compiled on first use with the same strict closing as
// plain routes (policies.CompileSchema), once per strictness, and kept
// until the server lists a different schema for the tool. The zero value
// is ready to use; it is safe for concurrent use.
type Schemas struct {
	mu      sync.Mutex
	servers map[string]*ServerTools
}

// ServerTools are one server's learned tools. It is safe for concurrent
// use.
type ServerTools struct {
	mu       sync.Mutex
	tools    map[string]*learnedTool
	bytes    int  // schema text held
	listed   bool // a complete list was learned
	dropped  bool // tools past max_tools were not kept: absence proves nothing
	seen     time.Time
	expires  time.Time     // when the list's ttlMs runs out; zero: never (no ttlMs)
	fetching chan struct{} // closed when a fetch under way ends; nil when none
}

// maxDescription bounds the description kept of a listed tool, in bytes:
// it names the tool in a trace span (gen_ai.tool.description), nothing
// more.
const maxDescription = 256

// learnedTool is one tool's schema as the server listed it.
type learnedTool struct {
	desc  string     // the listed description, at most maxDescription bytes
	hints *ToolHints // the listed annotations; nil when none
	// output is true when the tool lists an outputSchema (not JSON null):
	// clients check a result's structuredContent against it.
	output bool
	// outDoc is the listed outputSchema (nil when none, or larger than
	// the bound); outSch and outErr its compiled form (OutputSchema).
	outDoc   []byte
	outSch   *policies.Schema
	outErr   error
	sum      [32]byte
	doc      []byte // nil when too large or too complex
	unusable error  // why doc is nil: ErrSchemaTooLarge, or the shape bound crossed
	compiled [2]*policies.Schema
	errs     [2]error
}

// Server returns the entry for a server, creating it.
func (m *Schemas) Server(key string) *ServerTools {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers == nil {
		m.servers = make(map[string]*ServerTools)
	}
	s := m.servers[key]
	if s == nil {
		if len(m.servers) >= maxMCPServers {
			var oldest string
			var at time.Time
			for k, v := range m.servers {
				if oldest == "" || v.seen.Before(at) {
					oldest, at = k, v.seen
				}
			}
			delete(m.servers, oldest)
		}
		s = &ServerTools{tools: map[string]*learnedTool{}}
		m.servers[key] = s
	}
	s.seen = time.Now()
	return s
}

// Resolve returns the entry a call to a server uses: the list learned
// for its authorization context (privKey) when the server marked its list
// private, else the server's own (created when missing).
func (m *Schemas) Resolve(key, privKey string) *ServerTools {
	m.mu.Lock()
	s := m.servers[privKey]
	if s != nil {
		s.seen = time.Now()
	}
	m.mu.Unlock()
	if s != nil {
		return s
	}
	return m.Server(key)
}

// Forget drops a server's tools (its list changed), the lists of every
// authorization context included.
func (m *Schemas) Forget(key string) {
	m.mu.Lock()
	delete(m.servers, key)
	for k := range m.servers {
		if strings.HasPrefix(k, key+"|auth:") {
			delete(m.servers, k)
		}
	}
	m.mu.Unlock()
}

// Learn stores a tools/list page. complete is true for an answer that is
// the whole list (a first page with no next cursor): tools it does not
// name are forgotten. A tool whose schema is unchanged keeps its compiled
// forms. At most maxTools are kept; schemas over maxSchemaBytes are kept
// as too large. A complete list with a ttlMs is fresh for that long (at
// least minListTTL); one without (earlier servers) until the server says
// its list changed.
func (s *ServerTools) Learn(tools []ListedTool, complete bool, maxTools, maxSchemaBytes int, ttlMs *int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var named map[string]bool
	if complete {
		named = make(map[string]bool, len(tools))
		s.listed, s.dropped = true, false
		s.expires = time.Time{}
		if ttlMs != nil {
			ttl := time.Duration(max(*ttlMs, 0)) * time.Millisecond
			if *ttlMs > int64(24*time.Hour/time.Millisecond) {
				ttl = 24 * time.Hour
			}
			s.expires = time.Now().Add(max(ttl, minListTTL))
		}
	}
	for _, lt := range tools {
		if lt.Name == "" {
			continue
		}
		if named != nil {
			named[lt.Name] = true
		}
		doc := bytes.TrimSpace(lt.InputSchema)
		sum := sha256.Sum256(doc)
		output := hasOutputSchema(lt.OutputSchema)
		var desc string
		if json.Unmarshal(lt.Description, &desc) == nil {
			desc = textcut.Cut(desc, maxDescription)
		}
		if old := s.tools[lt.Name]; old != nil && old.sum == sum {
			old.hints, old.output, old.desc = lt.Annotations, output, desc
			old.setOutput(lt.Name, lt.OutputSchema, maxSchemaBytes)
			continue
		}
		if _, known := s.tools[lt.Name]; !known && len(s.tools) >= maxTools {
			s.dropped = true
			continue
		}
		if old := s.tools[lt.Name]; old != nil {
			s.bytes -= len(old.doc)
		}
		lt2 := &learnedTool{sum: sum, desc: desc, hints: lt.Annotations, output: output, unusable: ErrSchemaTooLarge}
		if len(doc) <= maxSchemaBytes && len(doc) > 0 && s.bytes+len(doc) <= maxServerSchemaBytes {
			// The shape is checked as the schema is learned, so a schema
			// too deep or too costly to compile is refused now, and never
			// handed to the compiler.
			if err := policies.CheckSchemaShape(lt.Name, doc, policies.DefaultSchemaLimits); err != nil {
				lt2.unusable = err
			} else {
				lt2.doc, lt2.unusable = append([]byte(nil), doc...), nil
				s.bytes += len(doc)
			}
		}
		lt2.setOutput(lt.Name, lt.OutputSchema, maxSchemaBytes)
		s.tools[lt.Name] = lt2
	}
	for name, lt := range s.tools {
		if named != nil && !named[name] {
			s.bytes -= len(lt.doc)
			delete(s.tools, name)
		}
	}
}

// Lookup returns a tool's compiled schema. known is false when the server
// has not listed the tool; a listed tool whose schema is too large or does
// not compile returns known true and a nil schema with the reason.
func (s *ServerTools) Lookup(name string, strict bool) (sch *policies.Schema, known bool, why error) {
	s.mu.Lock()
	lt := s.tools[name]
	s.mu.Unlock()
	if lt == nil {
		return nil, false, nil
	}
	if lt.doc == nil {
		return nil, true, lt.unusable
	}
	i := 0
	if strict {
		i = 1
	}
	s.mu.Lock()
	sch, err := lt.compiled[i], lt.errs[i]
	s.mu.Unlock()
	if sch != nil || err != nil {
		return sch, true, err
	}
	// Compiling outside the lock: two calls may compile the same schema
	// once each; the result is the same.
	// A server's own schema is not the operator's to fix: a format toolgate
	// does not check is left unchecked there, as the library leaves it.
	sch, err = policies.CompileSchema(lt.doc, policies.SchemaOptions{Tool: name, Strict: strict, UnknownFormats: policies.FormatsIgnore, UnknownKeywords: policies.KeywordsIgnore})
	s.mu.Lock()
	lt.compiled[i], lt.errs[i] = sch, err
	s.mu.Unlock()
	return sch, true, err
}

// Names lists the tools the server listed, sorted.
func (s *ServerTools) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.tools))
}

// IsListed reports whether a complete list was learned and kept whole, so
// a tool it does not name is unknown to the server.
func (s *ServerTools) IsListed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listed && !s.dropped
}

// IsCut reports whether the last complete list was cut at max_tools: a
// tool it lacks may be one it dropped, and fetching again would not help.
func (s *ServerTools) IsCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listed && s.dropped
}

// Size is how many tools the server listed.
func (s *ServerTools) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tools)
}

// Stale reports whether the list's ttlMs has run out.
func (s *ServerTools) Stale() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.expires.IsZero() && time.Now().After(s.expires)
}

// Described reports whether the server listed a tool of that name, and
// its description as listed (at most maxDescription bytes, cut at a
// character's end; "" when none).
func (s *ServerTools) Described(name string) (desc string, listed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lt := s.tools[name]; lt != nil {
		return lt.desc, true
	}
	return "", false
}

// Hints returns a listed tool's annotations, or nil.
func (s *ServerTools) Hints(name string) *ToolHints {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lt := s.tools[name]; lt != nil {
		return lt.hints
	}
	return nil
}

// BeginFetch claims the server's one fetch of its tool list: when a fetch
// is under way, it returns a channel closed when that fetch ends, and a
// nil end; else a nil channel and end, which the caller calls once its own
// fetch ends, whether it learned a list or not.
func (s *ServerTools) BeginFetch() (running <-chan struct{}, end func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetching != nil {
		return s.fetching, nil
	}
	ch := make(chan struct{})
	s.fetching = ch
	return nil, func() {
		s.mu.Lock()
		s.fetching = nil
		s.mu.Unlock()
		close(ch)
	}
}

// hasOutputSchema reports whether a listed outputSchema is there: present
// and not JSON null.
func hasOutputSchema(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// PlainResult reports whether a tools/call result for the tool may carry
// toolgate's envelope as structuredContent: only when the server listed the
// tool without an outputSchema. A client checks the structuredContent of a
// tool with one against it, even in an isError result (the TypeScript SDK
// v1 and the Inspector CLI do, raising -32602 instead of returning the
// result), and a tool toolgate has not seen listed may have one.
func (s *ServerTools) PlainResult(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := s.tools[name]
	return lt != nil && !lt.output
}

// setOutput keeps a listed outputSchema's text for OutputSchema, unless it
// is the one already kept.
func (lt *learnedTool) setOutput(name string, raw json.RawMessage, maxSchemaBytes int) {
	raw = bytes.TrimSpace(raw)
	if !hasOutputSchema(raw) {
		lt.outDoc, lt.outSch, lt.outErr = nil, nil, nil
		return
	}
	if bytes.Equal(raw, lt.outDoc) {
		return
	}
	lt.outSch, lt.outErr = nil, nil
	if len(raw) > maxSchemaBytes {
		lt.outDoc, lt.outErr = nil, ErrSchemaTooLarge
		return
	}
	lt.outDoc = append([]byte(nil), raw...)
	if err := policies.CheckSchemaShape(name, lt.outDoc, policies.DefaultSchemaLimits); err != nil {
		lt.outDoc, lt.outErr = nil, err
	}
}

// OutputSchema returns the compiled outputSchema a tool lists, as written
// (not made strict: a result may hold members the schema does not name
// unless it says otherwise). listed is false when the server has not
// listed the tool, or listed it without an outputSchema; a listed schema
// that is too large or does not compile returns listed true, a nil schema
// and the reason.
func (s *ServerTools) OutputSchema(name string) (sch *policies.Schema, listed bool, why error) {
	s.mu.Lock()
	lt := s.tools[name]
	if lt == nil || !lt.output {
		s.mu.Unlock()
		return nil, false, nil
	}
	doc, sch, why := lt.outDoc, lt.outSch, lt.outErr
	s.mu.Unlock()
	if sch != nil || why != nil {
		return sch, true, why
	}
	if doc == nil {
		return nil, true, ErrSchemaTooLarge
	}
	// Compiled outside the lock, as Lookup compiles; formats toolgate does
	// not check are left unchecked, as the server's own library leaves them.
	sch, why = policies.CompileSchema(doc, policies.SchemaOptions{Tool: name, Strict: false, UnknownFormats: policies.FormatsIgnore, UnknownKeywords: policies.KeywordsIgnore})
	s.mu.Lock()
	if bytes.Equal(lt.outDoc, doc) {
		lt.outSch, lt.outErr = sch, why
	}
	s.mu.Unlock()
	return sch, true, why
}
