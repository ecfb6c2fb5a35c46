package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// FetchTools lists the server's tools with toolgate's own tools/list (every
// page), with the caller's session or (2026-07-28) its per-request _meta
// and headers, and learns them. One fetch per server runs at a time; calls
// arriving meanwhile wait for it. The fetch is recorded as an event of its
// own (rpc_method tools/list, no tool).
func FetchTools(c *pipe.Call, r *http.Request, target *url.URL, meta json.RawMessage) (err error) {
	ctx := r.Context()
	running, end := ExchangeOf(c).Tools.BeginFetch()
	if running != nil {
		select {
		case <-running:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer end()
	ctx, cancel := context.WithTimeout(ctx, c.Tool.Cfg.Timeout)
	defer cancel()
	start := time.Now()
	var status, pages int
	var changes []string
	defer func() { recordFetch(c, start, status, pages, changes, err) }()
	// The caller's trace context goes on as it came (its _meta, else its
	// header, in both places), never a parent of toolgate's making: the
	// server's span is a child of the caller's span, and a trace the
	// caller did not sample stays unsampled. A caller without one sends
	// none.
	meta = mcp.WithoutProgressToken(meta)
	tp := r.Header.Get("Traceparent")
	var mm map[string]json.RawMessage
	var inMeta string
	if json.Unmarshal(meta, &mm) == nil && json.Unmarshal(mm[mcp.MetaTraceparent], &inMeta) == nil && inMeta != "" {
		tp = inMeta
	}
	if _, ok := traceIDOf(tp); ok {
		meta = mcp.WithTraceparent(meta, tp)
	} else {
		tp = ""
	}
	var all mcp.ToolsListResult
	var raws []json.RawMessage
	cursor := ""
	for page := 0; ; page++ {
		if page == maxFetchPages {
			return fmt.Errorf("more than %d pages of tools", maxFetchPages)
		}
		var res *mcp.ToolsListResult
		res, status, err = listPage(c, ctx, r, target, page, cursor, meta, tp)
		if err != nil {
			return err
		}
		pages++
		all.Tools = append(all.Tools, res.Tools...)
		raws = append(raws, res.Raw)
		if page == 0 {
			all.CacheScope = res.CacheScope
		}
		if res.TTLMs != nil && (all.TTLMs == nil || *res.TTLMs < *all.TTLMs) {
			all.TTLMs = res.TTLMs
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	changes = ExchangeOf(c).LearnList(&all, ReadPinDefs(raws...), true)
	return nil
}

// recordFetch records toolgate's own tools/list as an event: the caller's
// identity and trace, no tool, rpc_method tools/list, and the definitions
// that differed from their pins.
func recordFetch(c *pipe.Call, start time.Time, status, pages int, changes []string, err error) {
	ev := c.Event
	ev.EventID = uuid.NewString()
	ev.Time = start.UTC()
	ev.Tool, ev.RPCMethod, ev.RPCID, ev.Outcome = "", mcp.MethodToolsList, `"toolgate-list-0"`, ""
	ev.Refused, ev.Inspected, ev.Envelope = false, true, false
	ev.ViolationPaths, ev.DryRunDenied, ev.DryRunViolations, ev.PolicyError = nil, false, nil, ""
	ev.RequestBytes, ev.ResponseBytes, ev.RetryAfterMS = 0, 0, 0
	ev.DefinitionChanges = changes
	ev.UpstreamStatus = status
	now := time.Now()
	ev.TotalUS = now.Sub(start).Microseconds()
	ev.UpstreamUS = ev.TotalUS
	ev.OK, ev.ErrorCode, ev.ErrorClass, ev.Reason, ev.Detail = true, "", "", "", ""
	if err != nil {
		res := bucketing.Result{Code: bucketing.CodeUpstream, Class: bucketing.ClassTransient, Reason: reasonListFailed}
		if errors.Is(err, context.DeadlineExceeded) {
			res.Reason = bucketing.ReasonTimeout
		}
		ev.OK, ev.ErrorCode, ev.ErrorClass, ev.Reason = false, string(res.Code), string(res.Class), res.Reason
		ev.Detail = fmt.Sprintf("toolgate's own tools/list to MCP server %s failed after %d pages", ExchangeOf(c).Server, pages)
	}
	c.Host.Rec.Record(ev)
}

// SendOwn sends a JSON-RPC request of toolgate's own (a tools/list, and
// policy eval's session set-up) to the MCP server: JSON in, JSON or an
// event stream out, with the tool's injected headers when the origin is
// the tool's.
func SendOwn(c *pipe.Call, req *http.Request) (*http.Response, error) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if pipe.OriginOK(c.Tool, req.URL) {
		for k, v := range c.Tool.Inject {
			req.Header[k] = []string{v}
		}
	}
	return c.Host.Transport.RoundTrip(req)
}

// reasonListFailed is the reason of a failed tools/list of toolgate's own.
const reasonListFailed = "tools_list_failed"

// listPage sends one tools/list and reads its result.
func listPage(c *pipe.Call, ctx context.Context, r *http.Request, target *url.URL, page int, cursor string, meta json.RawMessage, traceparent string) (_ *mcp.ToolsListResult, status int, _ error) {
	params := map[string]any{}
	if cursor != "" {
		params["cursor"] = cursor
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	id := "toolgate-list-" + strconv.Itoa(page)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": mcp.MethodToolsList, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, status, err
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			continue
		}
		req.Header[k] = vs
	}
	pipe.CleanRequestHeaders(req.Header, true)
	for _, k := range []string{"Content-Length", "Content-Encoding", mcp.HeaderName} {
		delete(req.Header, k)
	}
	if req.Header.Get(mcp.HeaderMethod) != "" {
		req.Header.Set(mcp.HeaderMethod, mcp.MethodToolsList)
	}
	if traceparent != "" && req.Header.Get("Traceparent") == "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := SendOwn(c, req)
	if err != nil {
		return nil, status, err
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		return nil, status, fmt.Errorf("tools/list answered %s", resp.Status)
	}
	limit := ExchangeOf(c).Route.Cfg.MaxMessageBytes
	want := json.RawMessage(strconv.Quote(id))
	var found *mcp.Message
	take := func(data []byte) {
		for _, msg := range mcp.DecodeMessages(data) {
			if msg.IsResponse() && bytes.Equal(msg.ID, want) {
				found = &msg
			}
		}
	}
	if mcp.IsEventStream(resp.Header.Get("Content-Type")) {
		sr := mcp.NewSSEReader(limit, take)
		buf := make([]byte, 32<<10)
		for found == nil {
			n, err := resp.Body.Read(buf)
			sr.Feed(buf[:n])
			if err != nil {
				break
			}
		}
	} else {
		b, err := conf.ReadUpTo(resp.Body, resp.ContentLength, int64(limit))
		if err != nil {
			return nil, status, err
		}
		if len(b) > limit {
			return nil, status, fmt.Errorf("tools/list answer larger than %d bytes", limit)
		}
		take(b)
	}
	switch {
	case found == nil:
		return nil, status, errors.New("tools/list got no answer")
	case found.Error != nil:
		return nil, status, fmt.Errorf("tools/list answered error %d", found.Error.Code)
	}
	var res mcp.ToolsListResult
	if err := json.Unmarshal(found.Result, &res); err != nil {
		return nil, status, fmt.Errorf("tools/list result: %w", err)
	}
	return &res, status, nil
}
