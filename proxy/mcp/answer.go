package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Learner is told what an answer says about the server's tools: that
// they changed, or the tools/list result the request asked for. Package
// proxy's MCP call is one.
type Learner interface {
	// ListChanged is called for each notifications/tools/list_changed.
	ListChanged()
	// Listed is called with the tools/list result; complete is true when
	// it is the whole list (a first page without a next cursor).
	Listed(res *ToolsListResult, complete bool)
}

// AnswerReader reads a server's answer to one POST as it passes to the
// caller: the response to the tools/call whose outcome is recorded, the
// result of a tools/list to learn, and notices that the server's tools
// changed. It keeps at most one message of the answer (a JSON body, or
// one server-sent event) of at most the bound Begin is given, and never
// changes or holds back the bytes. Set CallID, ListID, ListCursor and ReqID
// before Begin; the zero value reads nothing but notices.
type AnswerReader struct {
	// CallID is the id of the tools/call whose response is looked for;
	// nil when none.
	CallID json.RawMessage
	// ListID is the id of a tools/list whose result is learned; nil when
	// none.
	ListID json.RawMessage
	// ListCursor is true when that tools/list asked for a later page.
	ListCursor bool
	// ReqID is the id of a request whose JSON-RPC error is noted
	// (RPCError), whatever its method; nil when none. It costs reading a
	// JSON answer whole (within the bound), so it is set only when a span
	// will say it.
	ReqID json.RawMessage

	learn    Learner
	max      int
	sse      *SSEReader
	capture  bool // a JSON answer is captured to be read at its end
	buf      []byte
	want     int64 // the JSON answer's declared length, or -1
	over     bool  // the JSON answer was larger than the limit
	read     bool  // the JSON answer was read
	found    bool  // the call's response was seen
	listed   bool  // the tools/list response was seen
	response Message
	reqErr   *RPCError // the JSON-RPC error answering ReqID, nil when none
}

// Begin is told the answer's headers and declared length (-1: none)
// before its body passes; max bounds one message, and learn is told what
// the answer says of the server's tools.
func (a *AnswerReader) Begin(h http.Header, length int64, max int, learn Learner) {
	a.learn, a.max = learn, max
	if IsEventStream(h.Get("Content-Type")) {
		a.sse = NewSSEReader(max, a.onMessage)
		return
	}
	if a.CallID != nil || a.ListID != nil || a.ReqID != nil {
		a.capture, a.want = true, length
	}
}

// Streaming reports whether the answer is an event stream.
func (a *AnswerReader) Streaming() bool { return a.sse != nil }

// Observe sees each chunk of the answer before the caller does.
func (a *AnswerReader) Observe(p []byte) {
	switch {
	case a.sse != nil:
		a.sse.Feed(p)
	case a.capture && !a.over && !a.read:
		if len(a.buf)+len(p) > a.max {
			a.over, a.buf = true, nil
			return
		}
		a.buf = append(a.buf, p...)
		if a.want >= 0 && int64(len(a.buf)) == a.want {
			a.readJSON()
		}
	}
}

func (a *AnswerReader) readJSON() {
	a.read = true
	a.onMessage(a.buf)
	a.buf = nil
}

// onMessage reads one JSON-RPC message (or batch) from the answer: the
// call's response, a tools/list result to learn, or a notice that the
// server's tools changed.
func (a *AnswerReader) onMessage(data []byte) {
	if a.CallID == nil && a.ListID == nil && a.ReqID == nil && !bytes.Contains(data, []byte(MethodToolsListChanged)) {
		return
	}
	for _, msg := range DecodeMessages(data) {
		switch {
		case msg.Method == MethodToolsListChanged:
			a.learn.ListChanged()
		case !msg.IsResponse():
		case a.CallID != nil && bytes.Equal(msg.ID, a.CallID):
			a.found, a.response = true, msg
		case a.ListID != nil && bytes.Equal(msg.ID, a.ListID) && msg.Result != nil:
			a.listed = true
			var res ToolsListResult
			if json.Unmarshal(msg.Result, &res) == nil {
				a.learn.Listed(&res, !a.ListCursor && res.NextCursor == "")
			}
		case a.ReqID != nil && bytes.Equal(msg.ID, a.ReqID) && msg.Error != nil:
			e := *msg.Error
			a.reqErr = &e
		}
	}
}

// Answered reports whether the answer held the response the request
// waited for, so the caller closing the stream afterwards is not a caller
// that went away.
func (a *AnswerReader) Answered() bool {
	return (a.CallID != nil && a.found) || (a.CallID == nil && a.ListID != nil && a.listed)
}

// Response reads what is left of a captured JSON answer and returns the
// tools/call's response, or nil when the answer did not hold it (or no
// CallID was set); unread is then true when the answer was not read whole
// (a message past the bound) or was a JSON answer that held no response
// to the call.
func (a *AnswerReader) Response() (resp *Message, unread bool) {
	if a.capture && !a.read && !a.over {
		a.readJSON()
	}
	switch {
	case a.CallID == nil:
		return nil, false
	case a.found:
		return &a.response, false
	}
	return nil, a.over || (a.sse != nil && a.sse.Skipped() > 0) || a.capture
}

// RPCError returns the code of the JSON-RPC error that answered ReqID (the
// answer read to its end first, as Response does); ok is false when no
// such error was seen.
func (a *AnswerReader) RPCError() (code int64, ok bool) {
	if a.capture && !a.read && !a.over {
		a.readJSON()
	}
	if a.reqErr == nil {
		return 0, false
	}
	return a.reqErr.Code, true
}
