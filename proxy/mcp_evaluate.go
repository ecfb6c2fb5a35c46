package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// MCPTools says where EvaluateMCP finds the schemas of an MCP route's
// tools: a recorded tools/list answer, or the server itself.
type MCPTools struct {
	// Route is the MCP route's name in the configuration (a tool whose
	// protocol is mcp). Default: the configuration's only MCP route.
	Route string
	// List is a recorded tools/list answer: its result object
	// ({"tools": [...]}), or the whole JSON-RPC response as a JSON body or
	// as a text/event-stream body holding it. It must be the whole list
	// (no nextCursor) and at most the route's mcp.max_message_bytes. Used
	// when Live is empty.
	List []byte
	// Live, when not empty, is the URL of the MCP server, which the route
	// must match: its tools are listed with the route's own tools/list
	// (every page, within the route's timeout, max_message_bytes and
	// inject_headers, with the given headers), as the sidecar lists them
	// for a tool it has not seen.
	Live string
}

// discardRecorder drops the events of an evaluation (its own tools/list).
type discardRecorder struct{}

func (discardRecorder) Record(sink.Event) bool { return true }

// EvaluateMCP runs the checks the sidecar runs for a tools/call of the MCP
// tool toolName on an MCP route, without sending the call: the route's
// schema for the tool (a configured override, else the one listed in
// src), the unknown-tool rule, then the route's policies. A refusal's
// Answer is the JSON-RPC response the caller would get (an isError result,
// HTTP 200). headers are the request headers the caller would send.
func EvaluateMCP(ctx context.Context, snap pipe.Snapshot, src MCPTools, toolName string, args map[string]any, headers http.Header) (Verdict, error) {
	if snap.Config == nil {
		return Verdict{}, errors.New("no configuration")
	}
	t, err := mcpRouteNamed(snap.Config, src.Route)
	if err != nil {
		return Verdict{}, err
	}
	if toolName == "" || len(toolName) > 128 {
		return Verdict{}, errors.New("an MCP tool name has 1 to 128 characters")
	}
	target, _ := evalURL(t, nil)
	if src.Live != "" {
		u, err := url.Parse(src.Live)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Verdict{}, fmt.Errorf("%q is not an http or https URL", src.Live)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if rt, _ := conf.Route(snap.Config.Compiled, http.MethodPost, strings.ToLower(u.Hostname()), port, u.EscapedPath()); rt != t {
			return Verdict{}, fmt.Errorf("route %q does not match %s: give the URL its calls go to", t.Cfg.Name, u.Redacted())
		}
		target = u
		ctx = snap.Config.Guarded(ctx, strings.ToLower(u.Hostname()), port)
	}
	s, err := New(snap, Options{Recorder: discardRecorder{}})
	if err != nil {
		return Verdict{}, err
	}
	defer s.Transport.CloseIdleConnections()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), http.NoBody)
	if err != nil {
		return Verdict{}, err
	}
	for k, vs := range headers {
		r.Header[k] = vs
	}
	c := &pipe.Call{Host: &s.Host, State: s.state.Load(), Tool: t, Start: time.Now(), Client: ctx, In: r, Target: target}
	c.Chain = c.State.Chains[t]
	evalCaller(c, r)
	m := mcpcall.NewCall(c, &s.MCPHost, r, target)
	m.Stateless = mcp.IsStateless(r.Header.Get(mcp.HeaderProtocol))
	if src.Live != "" {
		err := mcpcall.FetchTools(c, r, target, nil)
		if err != nil && !m.Stateless && r.Header.Get(mcp.HeaderSession) == "" {
			// A server of the session era lists tools only in a session.
			sid, serr := openSession(c, ctx, r, target)
			if serr != nil {
				return Verdict{}, fmt.Errorf("listing the tools of MCP server %s: %w; opening a session: %w", m.Server, err, serr)
			}
			defer closeSession(c, r, target)
			r.Header.Set(mcp.HeaderSession, sid)
			err = mcpcall.FetchTools(c, r, target, nil)
		}
		if err != nil {
			return Verdict{}, fmt.Errorf("listing the tools of MCP server %s: %w", m.Server, err)
		}
	} else {
		res, err := mcp.ParseToolsList(src.List, t.MCP.Cfg.MaxMessageBytes)
		if err != nil {
			return Verdict{}, err
		}
		m.LearnList(res, mcpcall.ReadPinDefs(res.Raw), true)
	}
	m.ListedOnly = true
	params, err := json.Marshal(map[string]any{"name": toolName, "arguments": args})
	if err != nil {
		return Verdict{}, fmt.Errorf("arguments: %w", err)
	}
	msg := &mcp.Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: mcp.MethodToolsCall, Params: params}
	c.Event.Inspected = true
	v := Verdict{Allowed: true}
	if ref := mcpcall.CheckToolCall(c, ctx, msg); ref != nil {
		v = refusedVerdict(ref)
		v.Status = http.StatusOK
		v.Answer = mcp.ToolError(msg.ID, mcpcall.RefusalText(ref), v.Envelope, m.Stateless, m.Tools.PlainResult(toolName))
	} else {
		v.Inject = injected(c)
	}
	if !c.Event.Inspected {
		v.Unchecked = true
	}
	v.DryRun = c.Event.DryRunViolations
	v.PolicyError = c.Event.PolicyError
	return v, nil
}

// mcpRouteNamed returns the MCP route called name, or the only one.
func mcpRouteNamed(cfg *conf.Config, name string) (*conf.Tool, error) {
	var found []*conf.Tool
	var names []string
	for _, t := range cfg.Compiled {
		if t.MCP == nil {
			continue
		}
		names = append(names, t.Cfg.Name)
		if name == "" || t.Cfg.Name == name {
			found = append(found, t)
		}
	}
	sort.Strings(names)
	switch {
	case len(names) == 0:
		return nil, errors.New("the configuration has no MCP route (a tool with protocol: mcp)")
	case len(found) == 1:
		return found[0], nil
	case name == "":
		return nil, fmt.Errorf("the configuration has %d MCP routes; name one: %s", len(names), strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("no MCP route named %q; the configuration's MCP routes: %s", name, strings.Join(names, ", "))
}

// evalProtocolVersion is the protocol version a live evaluation asks for
// when it opens a session.
const evalProtocolVersion = "2025-11-25"

// mcpRequest sends one message of a live evaluation to the server, with
// r's headers and the route's inject_headers, and returns the answer's
// status, headers and body (at most the route's max_message_bytes).
func mcpRequest(c *pipe.Call, ctx context.Context, r *http.Request, target *url.URL, method string, body []byte) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Tool.Cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	pipe.CleanRequestHeaders(req.Header, true)
	resp, err := mcpcall.SendOwn(c, req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	limit := mcpcall.ExchangeOf(c).Route.Cfg.MaxMessageBytes
	b, err := conf.ReadUpTo(resp.Body, resp.ContentLength, int64(limit))
	if err != nil && !mcp.IsEventStream(resp.Header.Get("Content-Type")) {
		return nil, nil, err
	}
	if len(b) > limit {
		return nil, nil, fmt.Errorf("answer larger than %d bytes", limit)
	}
	return resp, b, nil
}

// openSession opens a session with a server of the session era for a
// live evaluation (initialize, then notifications/initialized) and
// returns its id. It sets r's MCP-Protocol-Version to the version the
// server chose.
func openSession(c *pipe.Call, ctx context.Context, r *http.Request, target *url.URL) (string, error) {
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "toolgate-init", "method": "initialize", "params": map[string]any{
		"protocolVersion": evalProtocolVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "toolgate-policy-eval", "version": "1"}}})
	resp, body, err := mcpRequest(c, ctx, r, target, http.MethodPost, init)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("initialize answered %s", resp.Status)
	}
	sid := resp.Header.Get(mcp.HeaderSession)
	if sid == "" {
		return "", errors.New("initialize answered without a session")
	}
	version := evalProtocolVersion
	take := func(data []byte) {
		for _, msg := range mcp.DecodeMessages(data) {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if msg.IsResponse() && json.Unmarshal(msg.Result, &res) == nil && res.ProtocolVersion != "" && len(res.ProtocolVersion) <= 32 {
				version = res.ProtocolVersion
			}
		}
	}
	if mcp.IsEventStream(resp.Header.Get("Content-Type")) {
		sr := mcp.NewSSEReader(mcpcall.ExchangeOf(c).Route.Cfg.MaxMessageBytes, take)
		sr.Feed(body)
		sr.Feed([]byte("\n\n"))
	} else {
		take(body)
	}
	r.Header.Set(mcp.HeaderSession, sid)
	r.Header.Set(mcp.HeaderProtocol, version)
	note, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	resp, _, err = mcpRequest(c, ctx, r, target, http.MethodPost, note)
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("notifications/initialized answered %s", resp.Status)
	}
	return sid, nil
}

// closeSession ends a live evaluation's session (DELETE, as the transport
// asks of a client that is done); its answer does not matter.
func closeSession(c *pipe.Call, r *http.Request, target *url.URL) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Tool.Cfg.Timeout)
	defer cancel()
	_, _, _ = mcpRequest(c, ctx, r, target, http.MethodDelete, nil)
}
