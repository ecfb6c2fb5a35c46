package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/mcppin"
)

// Pinned tool definitions (docs/mcp.md, "Pinned tool definitions"): every
// complete tools/list an MCP route sees (an answer passing to a caller,
// toolgate's own fetch, an evaluation's list) is observed against the
// server's pins (proxy/mcppin). A tool whose change the route does not
// follow keeps its pinned schema and annotations for the checks, and
// mcpPinStep refuses its calls (or sends them for approval) as the route's
// mcp.pin says, until an operator accepts the change (Server.AcceptPin).

// maxPinChanges bounds the definition_changes of one event; past it the
// last entry counts the rest.
const maxPinChanges = 64

// maxUnreadable bounds the (route, server) pairs remembered with an
// unreadable tool list.
const maxUnreadable = 256

// mcpPins is a Server's pins: one store for the server's life (a reload
// re-loads the lock files into it, replacing those entries only), and the
// servers whose last tool list could not be read.
type mcpPins struct {
	Store *mcppin.Pins

	mu         sync.Mutex
	unreadable map[[2]string]string // (route, server key) → why
}

// NewMCPPins sizes the store for a configuration: one server's pins are
// bounded by the largest mcp.max_tools of its MCP routes.
func NewMCPPins(cfg *conf.Config) *mcpPins {
	most := mcppin.DefaultMaxTools
	for _, t := range cfg.Compiled {
		if t.MCP != nil {
			most = max(most, t.MCP.Cfg.MaxTools)
		}
	}
	return &mcpPins{Store: mcppin.New(mcppin.Limits{MaxTools: most})}
}

// Load pins the lock file entries of every MCP route of cfg.
func (p *mcpPins) Load(cfg *conf.Config) error {
	for _, t := range cfg.Compiled {
		if t.MCP == nil || t.MCP.Lock == nil {
			continue
		}
		if err := p.Store.Load(t.MCP.Lock); err != nil {
			return fmt.Errorf("tools %s: mcp.pin.lock_file: %w", t.Cfg.Name, err)
		}
	}
	return nil
}

// markUnreadable remembers (or, with why "", forgets) that a server's last
// tool list could not be read.
func (p *mcpPins) markUnreadable(route, server, why string) {
	k := [2]string{route, server}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case why == "":
		delete(p.unreadable, k)
	case p.unreadable == nil:
		p.unreadable = map[[2]string]string{k: why}
	case len(p.unreadable) < maxUnreadable || p.unreadable[k] != "":
		p.unreadable[k] = why
	}
}

// unreadableWhy says why a server's last tool list could not be read; ""
// when it could (or none was seen).
func (p *mcpPins) unreadableWhy(route, server string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unreadable[[2]string{route, server}]
}

// pinDefs are the tool definitions of a tools/list as the pins read them
// (mcppin.ParseTools over the raw result): every member of every tool.
type pinDefs struct {
	tools []map[string]any
	err   error // the list cannot be read alike by every reader
}

// ReadPinDefs reads the definitions of one or more tools/list pages.
func ReadPinDefs(pages ...json.RawMessage) pinDefs {
	var d pinDefs
	for _, raw := range pages {
		if raw == nil {
			d.err = fmt.Errorf("%w: no result object", mcppin.ErrMalformedList)
			return d
		}
		tools, _, err := mcppin.ParseTools(raw)
		if err != nil {
			return pinDefs{err: err}
		}
		d.tools = append(d.tools, tools...)
	}
	return d
}

// pinList observes a tools/list against the route's pins and returns the
// tools to learn: a tool whose listing the route does not follow (refused,
// hidden or sent for approval) is learned as pinned, its pinned
// inputSchema and annotations, or not at all when the pinned text is not
// kept; with on_change: record the list is learned as listed. changes are
// the event's definition_changes. ok is false when the list cannot be read
// alike by every reader (a member named twice, nested too deep): nothing of
// it is learned, and the server's calls are refused until it lists its
// tools readably.
func (m *Exchange) pinList(tools []mcp.ListedTool, defs pinDefs, complete bool) (learn []mcp.ListedTool, changes []string, ok bool) {
	p := m.h.Pins
	route := m.Call.Tool.Cfg.Name
	mode := &m.Route.Cfg.Pin
	if defs.err != nil {
		why := "it names a member twice in one object"
		if !errors.Is(defs.err, mcppin.ErrDuplicateName) {
			why = "it is not one readable JSON object with a tools array of objects"
		}
		p.markUnreadable(route, m.PinKey, why)
		m.Call.Host.Log.Warn("mcp: a tools/list answer cannot be read alike by every reader; nothing of it is learned, and the server's calls are refused until it lists its tools readably",
			"route", route, "server", m.Server, "err", defs.err)
		return nil, []string{"*: unreadable"}, false
	}
	if complete {
		p.markUnreadable(route, m.PinKey, "")
	}
	verdicts := p.Store.Observe(route, m.PinKey, defs.tools, complete)
	m.pinVerdicts = verdicts
	var held map[string]bool
	for i := range verdicts {
		v := &verdicts[i]
		if v.Fresh && reportable(v, mode) {
			m.Call.Host.Log.Warn("mcp: a tool definition differs from its pin", "route", route, "server", m.Server,
				"tool", v.Tool, "state", string(v.State), "fields", strings.Join(v.Fields, ","), "on_change", mode.OnChange)
			if len(changes) < maxPinChanges {
				changes = append(changes, changeText(v))
			} else if len(changes) == maxPinChanges {
				changes = append(changes, "*: more")
			}
		}
		if mode.Treat(v).Call != mcppin.CallForward {
			if held == nil {
				held = map[string]bool{}
			}
			held[v.Tool] = true
		}
	}
	if held == nil {
		return tools, changes, true
	}
	learn = make([]mcp.ListedTool, 0, len(tools))
	for _, lt := range tools {
		if !held[lt.Name] {
			learn = append(learn, lt)
			continue
		}
		var pinned mcp.ListedTool
		if doc := p.Store.PinnedDefinition(route, m.PinKey, lt.Name); doc != nil && json.Unmarshal(doc, &pinned) == nil && pinned.Name == lt.Name {
			learn = append(learn, pinned)
		}
	}
	return learn, changes, true
}

// armListFilter holds the answer to a request that holds a tools/list, on
// a route whose pins change what a listing shows (mcp.pin.on_change other
// than record, or an allow-list): the list is observed against the pins
// and learned as the server sent it, and the client gets it as mcp.pin
// says: a changed tool listed as it was pinned (refuse, approve) or not
// at all (hide), a tool the allow-list lacks not at all. A list larger
// than mcp.max_message_bytes passes as it comes, unlearned, as before
// pinning: its tools keep their last pins and schemas.
func (m *Exchange) armListFilter() {
	mode := &m.Route.Cfg.Pin
	if m.ans.ListID == nil || (mode.OnChange == mcppin.OnChangeRecord && len(mode.Allow) == 0) {
		return
	}
	h := m.holdFor(int64(m.Route.Cfg.MaxMessageBytes), true)
	h.hooks = append(h.hooks, m.filterList)
}

// filterList is the hold's hook for a tools/list response: it learns the
// list (observing it against the pins) and returns it filtered.
func (m *Exchange) filterList(raw []byte, msg *mcp.Message) []byte {
	if !msg.IsResponse() || !bytes.Equal(msg.ID, m.ans.ListID) || msg.Result == nil {
		return raw
	}
	var res mcp.ToolsListResult
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		return raw // not a tools/list result: nothing to learn or filter
	}
	defs := ReadPinDefs(res.Raw)
	m.Call.Event.DefinitionChanges = append(m.Call.Event.DefinitionChanges, m.LearnList(&res, defs, !m.ans.ListCursor && res.NextCursor == "")...)
	m.listFiltered = true
	var out []byte
	err := defs.err
	if err == nil {
		out, err = mcppin.Filter(msg.Result, m.Route.Cfg.Pin.Lister(m.h.Pins.Store, m.pinVerdicts))
	}
	if err != nil {
		// A list clients would read differently never reaches one: its
		// server's calls are refused until it lists its tools readably.
		return listErrorResponse(msg.ID, m.Server)
	}
	if bytes.Equal(out, msg.Result) {
		return raw
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return listErrorResponse(msg.ID, m.Server)
	}
	obj["result"] = out
	b, _ := json.Marshal(obj)
	return b
}

// listErrorResponse is the JSON-RPC error a client gets in place of a
// tools/list result toolgate cannot read alike for every client.
func listErrorResponse(id json.RawMessage, server string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code":    -32603,
		"message": "toolgate: MCP server " + server + " listed its tools in a form clients read differently (a member named twice, or nested too deep); its tools are refused until it lists them readably",
	}})
	return b
}

// reportable reports whether a fresh verdict is a change to record: a
// changed definition (in fields the route does not ignore), a removed tool,
// one past the bounds, or (new_tools: change) a new one.
func reportable(v *mcppin.Verdict, mode *mcppin.Mode) bool {
	switch v.State {
	case mcppin.StateChanged:
		return !mode.Ignored(v.Fields)
	case mcppin.StateRemoved, mcppin.StateUnpinned:
		return true
	case mcppin.StateNew:
		return mode.NewTools == mcppin.NewToolsChange
	}
	return false
}

// changeText is one definition_changes entry: "tool: field,field" for a
// changed tool, "tool: removed", "tool: unpinned" or "tool: new" for the
// others. It names fields and states, never values.
func changeText(v *mcppin.Verdict) string {
	if v.State == mcppin.StateChanged {
		return v.Tool + ": " + strings.Join(v.Fields, ",")
	}
	if v.State == mcppin.StateUnknown || (v.State == mcppin.StateSame && v.Source == mcppin.SourceFirstSeen) {
		return v.Tool + ": " + string(mcppin.StateNew)
	}
	return v.Tool + ": " + string(v.State)
}

// mcpPinStep decides a tools/call by its tool's pin, after the lookup (which
// may list the server's tools, and so observe them) and before the schema
// check (an unreviewed definition is never checked against its new
// schema): a tool the route's mcp.pin.allow lacks is refused
// (policy/not_allowlisted); one whose definition changed, that has no
// reviewed definition, or whose server's list could not be read is refused
// (policy/definition_changed), or under on_change: approve sent to the
// approval step; every other call goes on.
type mcpPinStep struct {
	mode *mcppin.Mode
	// approver is true when the sidecar has an approval step.
	approver bool
}

func (s mcpPinStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	m := ExchangeOf(c)
	name := m.tc.Name
	route := c.Tool.Cfg.Name
	if why := m.h.Pins.unreadableWhy(route, m.PinKey); why != "" && s.mode.OnChange != mcppin.OnChangeRecord {
		c.Event.DefinitionChanges = append(c.Event.DefinitionChanges, "*: unreadable")
		return pinRefusal(fmt.Sprintf("Tool '%s' of MCP server %s cannot be checked against its pin: the server's last tools/list cannot be read alike by every reader (%s); its calls are refused until the server lists its tools readably", name, m.Server, why), "unreadable tools/list")
	}
	v := m.h.Pins.Store.Status(route, m.PinKey, name)
	t := s.mode.Treat(&v)
	switch {
	case t.NotAllowed:
		return conf.Refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
			fmt.Sprintf("Tool '%s' of MCP server %s is not in the route's mcp.pin.allow list", name, m.Server),
			[]policies.Violation{{Path: "", Reason: bucketing.ReasonNotAllowlist, Message: "not in mcp.pin.allow", Code: bucketing.CodePolicy}})
	case t.Call == mcppin.CallForward:
		return nil
	}
	change := changeText(&v)
	c.Event.DefinitionChanges = append(c.Event.DefinitionChanges, change)
	what := pinWhat(&v)
	if t.Call == mcppin.CallApprove && s.approver {
		m.pinAsk = &policies.Approval{Effect: fmt.Sprintf("calls MCP tool '%s' of %s, which %s", name, m.Server, what),
			Summary: map[string]string{"definition": change}}
		return nil
	}
	detail := fmt.Sprintf("Tool '%s' of MCP server %s %s; its calls are refused until an operator accepts the change", name, m.Server, what)
	if t.Call == mcppin.CallApprove {
		detail = fmt.Sprintf("Tool '%s' of MCP server %s %s; the route's mcp.pin.on_change is approve, but no approval gate is configured, so its calls are refused", name, m.Server, what)
	}
	return pinRefusal(detail, what)
}

// pinWhat says, in words, why a tool's pin holds its calls.
func pinWhat(v *mcppin.Verdict) string {
	switch v.State {
	case mcppin.StateChanged:
		return "changed since it was pinned (" + strings.Join(v.Fields, ", ") + ")"
	case mcppin.StateRemoved:
		return "is no longer listed by the server"
	case mcppin.StateUnpinned:
		return "could not be pinned (past the pins' bounds: " + strconv.Itoa(mcppin.DefaultMaxServers) + " servers, mcp.max_tools tools)"
	}
	return "has no reviewed definition (new since the lock file was written)"
}

// pinRefusal is the policy/definition_changed refusal.
func pinRefusal(detail, msg string) *conf.Refusal {
	return conf.Refuse(bucketing.CodePolicy, bucketing.ReasonDefinitionChanged, detail,
		[]policies.Violation{{Path: "", Reason: bucketing.ReasonDefinitionChanged, Message: msg, Code: bucketing.CodePolicy}})
}
