package mcp

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/policies"
)

// Why a listed schema cannot check a tool's calls (UnusableSchema.Reason,
// the event's policy_error "schema: REASON").
const (
	unusableTooLarge   = "schema_too_large"   // over mcp.max_schema_bytes
	unusableTooComplex = "schema_too_complex" // past policies.DefaultSchemaLimits
	unusableInvalid    = "schema_invalid"     // does not compile
)

// UnusableReason is the word for why a listed schema cannot be used:
// schema_too_large, schema_too_complex or schema_invalid.
func UnusableReason(why error) string {
	switch {
	case errors.Is(why, ErrSchemaTooLarge):
		return unusableTooLarge
	case errors.Is(why, policies.ErrSchemaTooComplex):
		return unusableTooComplex
	}
	return unusableInvalid
}

// UnusableSchema is a tool whose listed inputSchema could not check its
// calls, as /status shows it.
type UnusableSchema struct {
	// Server is the MCP server (host and path) and Tool the tool's name.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Reason is schema_too_large, schema_too_complex or schema_invalid.
	Reason string `json:"reason"`
	// Error is the compile or bound error (it names a bound or a JSON
	// pointer of the schema, never an argument value).
	Error string `json:"error"`
	// Seen is when a call last met it.
	Seen time.Time `json:"seen"`
}

// maxUnusable bounds the unusable schemas remembered; past it, the one
// seen least recently is forgotten.
const maxUnusable = 100

// UnusableSchemas remembers the tools whose listed schemas could not be
// used. The zero value is ready; it is safe for concurrent use.
type UnusableSchemas struct {
	mu sync.Mutex
	m  map[[2]string]UnusableSchema
}

// Note remembers that a call met a tool whose listed schema cannot be
// used, and why.
func (u *UnusableSchemas) Note(server, tool, reason string, why error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[[2]string]UnusableSchema{}
	}
	k := [2]string{server, tool}
	makeRoom(u.m, k, maxUnusable, func(v UnusableSchema) time.Time { return v.Seen })
	u.m[k] = UnusableSchema{Server: server, Tool: tool, Reason: reason, Error: why.Error(), Seen: time.Now()}
}

// List lists the tools whose listed schemas could not check their calls
// (too large, too complex, not compilable), by server and tool, at most
// 100 (the most recently met).
func (u *UnusableSchemas) List() []UnusableSchema {
	u.mu.Lock()
	defer u.mu.Unlock()
	keys := serverToolKeys(u.m)
	out := make([]UnusableSchema, 0, len(keys))
	for _, k := range keys {
		out = append(out, u.m[k])
	}
	return out
}

// makeRoom keeps a map of per-(server, tool) records under max entries
// before k is put in: when k is new and the map is full, the record seen
// least recently goes.
func makeRoom[V any](m map[[2]string]V, k [2]string, max int, seen func(V) time.Time) {
	if _, ok := m[k]; ok || len(m) < max {
		return
	}
	var oldest [2]string
	var at time.Time
	for k, v := range m {
		if t := seen(v); at.IsZero() || t.Before(at) {
			oldest, at = k, t
		}
	}
	delete(m, oldest)
}

// serverToolKeys is the keys of a per-(server, tool) map, by server, then
// tool.
func serverToolKeys[V any](m map[[2]string]V) [][2]string {
	return slices.SortedFunc(maps.Keys(m), func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
}
