package proxy

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// Names of MCP tools that the configuration gives (a route's mcp.tools,
// and the names rules outside this section give: Snapshot.ServerToolNames)
// can only be checked when a server lists its tools. Each complete
// tools/list answer a route sees is checked against them: a name no server
// lists is logged (a warning, once, and again when it is listed), counted
// in toolgate_proxy_mcp_unlisted_names, and shown by UnlistedNames (the
// sidecar's /status). It is not refused: a server may list a tool later,
// and its calls stay checked either way.

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

// mcpNameWatch checks configured MCP tool names against the lists servers
// answer. One belongs to one snapshot; it is safe for concurrent use.
type mcpNameWatch struct {
	shared []string            // Snapshot.ServerToolNames: any MCP route may list them
	own    map[string][]string // an MCP route's name -> its mcp.tools names
	field  map[string]string   // an MCP route's name -> "tools[i].mcp.tools"

	mu       sync.Mutex
	listed   map[string]map[string]bool // route -> watched name -> in its last complete list
	unlisted []UnlistedName
}

// newNameWatch returns the watch of a snapshot; nil when it watches
// nothing.
func newNameWatch(cfg *Config, shared []string) *mcpNameWatch {
	w := &mcpNameWatch{shared: shared, own: map[string][]string{}, field: map[string]string{}, listed: map[string]map[string]bool{}}
	routes := 0
	for i, t := range cfg.tools {
		if t.mcp == nil {
			continue
		}
		routes++
		w.field[t.cfg.Name] = "tools[" + strconv.Itoa(i) + "].mcp.tools"
		w.own[t.cfg.Name] = slices.Sorted(maps.Keys(t.mcp.tools))
	}
	if routes == 0 {
		return nil
	}
	return w
}

// observe checks a route's complete tools/list answer.
func (w *mcpNameWatch) observe(route string, tools []mcp.ListedTool, log *slog.Logger) {
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

// names returns the unlisted names, in a new slice.
func (w *mcpNameWatch) names() []UnlistedName {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.unlisted)
}

// UnlistedNames are the configured MCP tool names that the servers which
// listed their tools since the configuration took effect do not list.
func (s *Server) UnlistedNames() []UnlistedName {
	if st := s.state.Load(); st != nil {
		return st.names.names()
	}
	return nil
}

// unlistedDesc describes toolgate_proxy_mcp_unlisted_names.
var unlistedDesc = prometheus.NewDesc("toolgate_proxy_mcp_unlisted_names",
	"Configured MCP tool names (a route's mcp.tools, approvals.tools) that no server listing its tools lists.", nil, nil)
