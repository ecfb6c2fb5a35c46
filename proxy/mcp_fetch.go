package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// fetchTools lists the server's tools with toolgate's own tools/list (every
// page), on the caller's session, and learns them. One fetch per server
// runs at a time; calls arriving meanwhile wait for it.
func (c *call) fetchTools(r *http.Request, target *url.URL, meta json.RawMessage) error {
	srv := c.mcp.srv
	ctx := r.Context()
	srv.mu.Lock()
	if ch := srv.fetching; ch != nil {
		srv.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	srv.fetching = ch
	srv.mu.Unlock()
	defer func() {
		srv.mu.Lock()
		srv.fetching = nil
		srv.mu.Unlock()
		close(ch)
	}()
	ctx, cancel := context.WithTimeout(ctx, c.t.cfg.Timeout)
	defer cancel()
	meta = withoutProgressToken(meta)
	var all []listedTool
	cursor := ""
	for page := 0; ; page++ {
		if page == maxFetchPages {
			return fmt.Errorf("more than %d pages of tools", maxFetchPages)
		}
		res, err := c.listPage(ctx, r, target, page, cursor, meta)
		if err != nil {
			return err
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	srv.learn(all, true, c.mcp.route.cfg.MaxTools, c.mcp.route.cfg.MaxSchemaBytes)
	return nil
}

// listPage sends one tools/list and reads its result.
func (c *call) listPage(ctx context.Context, r *http.Request, target *url.URL, page int, cursor string, meta json.RawMessage) (*toolsListResult, error) {
	params := map[string]any{}
	if cursor != "" {
		params["cursor"] = cursor
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	id := "toolgate-list-" + strconv.Itoa(page)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": methodToolsList, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, "Mcp-Param-") {
			continue
		}
		req.Header[k] = vs
	}
	cleanRequestHeaders(req.Header, true)
	for _, k := range []string{"Content-Length", "Content-Encoding", headerMCPName} {
		delete(req.Header, k)
	}
	if req.Header.Get(headerMCPMethod) != "" {
		req.Header.Set(headerMCPMethod, methodToolsList)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.t.originOK(req.URL) {
		for k, v := range c.t.inject {
			req.Header[k] = []string{v}
		}
	}
	resp, err := c.s.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tools/list answered %s", resp.Status)
	}
	limit := c.mcp.route.cfg.MaxMessageBytes
	want := json.RawMessage(strconv.Quote(id))
	var found *rpcMessage
	take := func(data []byte) {
		for _, msg := range decodeMessages(data) {
			if msg.isResponse() && bytes.Equal(msg.ID, want) {
				found = &msg
			}
		}
	}
	if isEventStream(resp.Header.Get("Content-Type")) {
		sr := newSSEReader(limit, take)
		buf := make([]byte, 32<<10)
		for found == nil {
			n, err := resp.Body.Read(buf)
			sr.feed(buf[:n])
			if err != nil {
				break
			}
		}
	} else {
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
		if err != nil {
			return nil, err
		}
		if len(b) > limit {
			return nil, fmt.Errorf("tools/list answer larger than %d bytes", limit)
		}
		take(b)
	}
	switch {
	case found == nil:
		return nil, errors.New("tools/list got no answer")
	case found.Error != nil:
		return nil, fmt.Errorf("tools/list answered error %d", found.Error.Code)
	}
	var res toolsListResult
	if err := json.Unmarshal(found.Result, &res); err != nil {
		return nil, fmt.Errorf("tools/list result: %w", err)
	}
	return &res, nil
}

// withoutProgressToken drops progressToken from a request's _meta, so
// toolgate's own request asks for no progress.
func withoutProgressToken(meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 {
		return nil
	}
	var mm map[string]json.RawMessage
	if json.Unmarshal(meta, &mm) != nil {
		return nil
	}
	delete(mm, "progressToken")
	b, _ := json.Marshal(mm)
	return b
}
