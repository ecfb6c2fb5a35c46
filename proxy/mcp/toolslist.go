package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotToolsList marks a recorded tools/list (ParseToolsList) that is not
// one whole tools/list answer within the route's mcp.max_message_bytes.
var ErrNotToolsList = errors.New("not a tools/list answer")

// ParseToolsList reads a recorded tools/list answer: its result object,
// or the JSON-RPC response holding it, as a JSON body or a
// text/event-stream body. It reads at most limit bytes and refuses a page
// that is not the last (nextCursor set), whose list would be incomplete.
func ParseToolsList(data []byte, limit int) (*ToolsListResult, error) {
	if len(data) > limit {
		return nil, fmt.Errorf("%w: larger than the route's %d-byte mcp.max_message_bytes", ErrNotToolsList, limit)
	}
	data = bytes.TrimSpace(data)
	var msgs []Message
	if bytes.HasPrefix(data, []byte("event:")) || bytes.HasPrefix(data, []byte("data:")) || bytes.HasPrefix(data, []byte("id:")) || bytes.HasPrefix(data, []byte(":")) {
		sr := NewSSEReader(limit, func(ev []byte) { msgs = append(msgs, DecodeMessages(ev)...) })
		sr.Feed(data)
		sr.Feed([]byte("\n\n"))
	} else {
		msgs = DecodeMessages(data)
	}
	raw := json.RawMessage(nil)
	for i := range msgs {
		switch {
		case msgs[i].Error != nil:
			return nil, fmt.Errorf("%w: the response is JSON-RPC error %d", ErrNotToolsList, msgs[i].Error.Code)
		case msgs[i].IsResponse() && msgs[i].Result != nil:
			raw = msgs[i].Result
		}
	}
	if raw == nil {
		raw = data // the result object itself
	}
	var probe struct {
		Tools json.RawMessage `json:"tools"`
	}
	var res ToolsListResult
	if err := json.Unmarshal(raw, &probe); err != nil || len(probe.Tools) == 0 || probe.Tools[0] != '[' {
		return nil, fmt.Errorf("%w: expected a result with a tools array, or the JSON-RPC response holding one", ErrNotToolsList)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotToolsList, err)
	}
	if res.NextCursor != "" {
		return nil, fmt.Errorf("%w: it is one page of several (nextCursor is set); record the whole list as one result", ErrNotToolsList)
	}
	return &res, nil
}
