package mcp

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
)

// Names of MCP tools that the configuration gives can only be checked
// when a server lists its tools: a NameWatch checks each complete
// tools/list answer a route sees against them, and logs a name no server
// lists (a warning, once, and again when it is listed).

// UnlistedName is a configured MCP tool name that the servers which listed
// their tools do not list.
type UnlistedName struct {
	// Field is where the configuration gives the name
	// ("tools[2].mcp.tools" or "approvals.tools").
	Field string `json:"field"`
	// Name is the MCP tool name.
	Name string `json:"name"`
	// Routes are the MCP routes whose servers' last complete lists lack
	// it.
	Routes []string `json:"routes"`
}

// NameWatch checks configured MCP tool names against the lists servers
// answer. One belongs to one snapshot; it is safe for concurrent use.
type NameWatch struct {
	shared []string            // Snapshot.ServerToolNames: any MCP route may list them
	own    map[string][]string // an MCP route's name -> its mcp.tools names
	field  map[string]string   // an MCP route's name -> "tools[i].mcp.tools"

	mu       sync.Mutex
	listed   map[string]map[string]bool // route -> watched name -> in its last complete list
	unlisted []UnlistedName
}

// NewNameWatch returns a watch of the names shared (any MCP route may
// list them: the names rules outside the routes give) and own (an MCP
// route's name to its mcp.tools names), field naming where each route's
// names are configured ("tools[2].mcp.tools").
func NewNameWatch(shared []string, own map[string][]string, field map[string]string) *NameWatch {
	return &NameWatch{shared: shared, own: own, field: field, listed: map[string]map[string]bool{}}
}

// Observe checks a route's complete tools/list answer. A nil watch
// watches nothing.
func (w *NameWatch) Observe(route string, tools []ListedTool, log *slog.Logger) {
	if w == nil || len(w.shared)+len(w.own[route]) == 0 {
		return
	}
	got := make(map[string]bool, len(w.shared)+len(w.own[route]))
	for _, n := range append(slices.Clip(w.shared), w.own[route]...) {
		got[n] = false
	}
	for _, lt := range tools {
		if _, watched := got[lt.Name]; watched {
			got[lt.Name] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listed[route] = got
	var now []UnlistedName
	for _, r := range slices.Sorted(maps.Keys(w.own)) {
		l, seen := w.listed[r]
		for _, n := range w.own[r] {
			if seen && !l[n] {
				now = append(now, UnlistedName{Field: w.field[r], Name: n, Routes: []string{r}})
			}
		}
	}
	for _, n := range w.shared {
		var lacking []string
		for _, r := range slices.Sorted(maps.Keys(w.listed)) {
			if w.listed[r][n] {
				lacking = nil
				break
			}
			lacking = append(lacking, r)
		}
		if len(lacking) > 0 {
			now = append(now, UnlistedName{Field: "approvals.tools", Name: n, Routes: lacking})
		}
	}
	was := map[string]bool{}
	for _, u := range w.unlisted {
		was[u.Field+"\x00"+u.Name] = true
	}
	is := map[string]bool{}
	for _, u := range now {
		is[u.Field+"\x00"+u.Name] = true
		if !was[u.Field+"\x00"+u.Name] {
			log.Warn("a configured MCP tool name is not in the tools its servers list: the rule naming it applies to no call until a server lists it", "field", u.Field, "name", u.Name, "routes", u.Routes)
		}
	}
	for _, u := range w.unlisted {
		if !is[u.Field+"\x00"+u.Name] {
			log.Info("a configured MCP tool name is listed now", "field", u.Field, "name", u.Name)
		}
	}
	w.unlisted = now
}

// Names returns the unlisted names, in a new slice.
func (w *NameWatch) Names() []UnlistedName {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.unlisted)
}
