package mcpcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/internal/steps"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// An MCP answer held back until hooks have seen its messages. A JSON
// answer is read whole (at most limit bytes) and written again; an event
// stream is held one event at a time: each event is released when it has
// ended and its message went through the hooks, so a notification or a
// progress event passes as soon as it is whole, and the response passes
// only once checked. No byte of a held message reaches the client before
// the hooks saw it. Content-Length is set to what is sent.
//
// A hook is given each JSON-RPC message of the answer (each member of a
// batch) and says what the client gets in its place. The answer checks
// (answer.go) are one hook; a hook that rewrites a tools/list result
// (pinned definitions filtering the list) is another: for a request that
// holds a tools/list (Exchange.ans.ListID set), before dispatch,
//
//	h := m.holdFor(limit, false)
//	h.hooks = append(h.hooks, func(raw []byte, msg *mcp.Message) []byte { ... })
//
// where the hook rewrites the response whose id is ListID (its result's
// tools filtered) and returns raw for every other message. What the
// client gets is what mcp.AnswerReader then learns from.

// holdFor returns the exchange's hold, armed when it is not yet: what it
// holds is bounded by the largest limit asked for, and what cannot be
// read passes unchecked only when every user of the hold lets it. Append
// a hook to the hold it returns.
func (m *Exchange) holdFor(limit int64, pass bool) *mcpHold {
	if m.hold == nil {
		m.hold = &mcpHold{m: m, limit: limit, pass: pass}
		return m.hold
	}
	m.hold.limit = max(m.hold.limit, limit)
	m.hold.pass = m.hold.pass && pass
	return m.hold
}

// mcpHook sees one message of a held answer (raw, and decoded in msg) and
// returns what is sent in its place: raw itself to pass it, other bytes to
// rewrite it, nil to drop it.
type mcpHook func(raw []byte, msg *mcp.Message) []byte

// mcpHold is the held answer of one exchange on an MCP route.
type mcpHold struct {
	m     *Exchange
	hooks []mcpHook
	limit int64 // the most of one message (a JSON answer, an event) held
	pass  bool  // what cannot be read goes on unchecked
	// calls are the batch's tools/call, by id text, with their tools.
	calls map[string]string
	// answered are the calls already answered with a withheld result,
	// by id text ("" for a single call): a later response to them is
	// dropped.
	answered map[string]bool
	// ref is the first refusal the client got in place of a result.
	ref *conf.Refusal
}

// begin holds resp's body: it returns the client's answer when the answer
// is replaced whole, or nil when resp goes on with a held body.
func (h *mcpHold) begin(r *http.Request, resp *http.Response) *http.Response {
	c := h.m.Call
	for _, ce := range resp.Header.Values("Content-Encoding") {
		if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
			return h.whole(r, resp, fmt.Sprintf("an encoded body (Content-Encoding %q)", mcp.BoundedText(ce)))
		}
	}
	ct := resp.Header.Get("Content-Type")
	if mcp.IsEventStream(ct) {
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = &sseHold{h: h, rc: resp.Body}
		return nil
	}
	if mt, _, _ := canonical.ParseMediaType(ct); mt != "application/json" {
		return h.whole(r, resp, fmt.Sprintf("a body that is neither JSON nor an event stream (Content-Type %q)", mcp.BoundedText(mt)))
	}
	buf, failed := c.ReadAnswerBody(r, resp, h.limit)
	if failed != nil {
		return failed
	}
	if int64(len(buf)) > h.limit {
		if h.pass {
			h.m.noteMCPAnswer(sink.AnswerUninspected, nil, 0)
			resp.Body = pipe.MultiReadCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
			return nil
		}
		return h.whole(r, resp, fmt.Sprintf("more than the %d bytes its answer checks read", h.limit))
	}
	resp.Body.Close()
	out := h.rewrite(buf)
	setBody(resp, out)
	return nil
}

// SetBody puts a held body in place, with its length.
func setBody(resp *http.Response, b []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header["Content-Length"] = []string{strconv.Itoa(len(b))}
	pipe.DropBodyHeaders(resp.Header, false)
}

// whole handles an answer the hooks cannot read at all: under unreadable:
// pass it goes on unchecked; otherwise the client gets, in its place, a
// withheld result for each call (answer_unreadable).
func (h *mcpHold) whole(r *http.Request, resp *http.Response, why string) *http.Response {
	if h.pass {
		h.m.noteMCPAnswer(sink.AnswerUninspected, nil, 0)
		return nil
	}
	resp.Body.Close()
	h.m.Call.Cancel()
	out := h.unreadable(nil, why)
	if out == nil {
		out = []byte("[]")
	}
	ans := mcpAnswer(r, http.StatusOK, string(bucketing.CodeUpstream), out)
	if sid := resp.Header.Get(mcp.HeaderSession); sid != "" {
		ans.Header[mcp.HeaderSession] = []string{sid}
	}
	return ans
}

// unreadable handles a message (raw; nil for the whole answer) the hooks
// cannot read: under unreadable: pass it goes on unchecked; otherwise it
// is replaced by a withheld result for each call not answered yet.
func (h *mcpHold) unreadable(raw []byte, why string) []byte {
	if h.pass {
		h.m.noteMCPAnswer(sink.AnswerUninspected, nil, 0)
		return raw
	}
	h.m.noteMCPAnswer(sink.AnswerWithheld, []string{pipe.ReasonAnswerUnreadable}, 0)
	tool, _ := h.m.resultTool(h.m.ans.CallID)
	ref := conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable,
		fmt.Sprintf("Tool '%s' answered with %s, and its answers are checked", tool, why), nil)
	if !h.m.batch {
		if h.m.ans.CallID == nil {
			return nil // no tools/call to answer (a hold for a tools/list): dropped
		}
		return h.withhold(h.m.ans.CallID, tool, ref)
	}
	var out []json.RawMessage
	for id, name := range h.calls {
		if !h.answered[id] {
			out = append(out, h.withhold(json.RawMessage(id), name, ref))
		}
	}
	if len(out) == 0 {
		return nil
	}
	b, _ := json.Marshal(out)
	return b
}

// withhold is the isError result a call gets in place of the result the
// checks refused; nil when the call was answered so already.
func (h *mcpHold) withhold(id json.RawMessage, tool string, ref *conf.Refusal) []byte {
	key := h.key(id)
	if h.answered[key] {
		return nil
	}
	if h.answered == nil {
		h.answered = map[string]bool{}
	}
	h.answered[key] = true
	if h.ref == nil {
		h.ref = ref
	}
	if !h.m.batch {
		id = h.m.ans.CallID
	}
	return mcp.ToolError(id, RefusalText(ref), ref.Envelope(), h.m.Stateless, h.m.Tools.PlainResult(tool))
}

// Withheld reports whether a call was answered with a withheld result.
func (h *mcpHold) Withheld(id json.RawMessage) bool { return h.answered[h.key(id)] }

func (h *mcpHold) key(id json.RawMessage) string {
	if !h.m.batch {
		return ""
	}
	return mcp.IDText(id)
}

// rewrite runs the hooks on one JSON text of the answer (a message or a
// batch): it returns data when nothing changed, nil when every message
// was dropped.
func (h *mcpHold) rewrite(data []byte) []byte {
	d := mcp.TrimJSONSpace(data)
	if !utf8.Valid(d) {
		return h.unreadable(data, "text that is not UTF-8")
	}
	if ref := steps.CheckJSONNames("the answer", d, h.m.Call.State.Cfg.Limits.MaxJSONDepth); ref != nil {
		return h.unreadable(data, "JSON that parsers read differently")
	}
	if len(d) > 0 && d[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(d, &raws) != nil {
			return h.unreadable(data, "a body that is not JSON-RPC")
		}
		out := make([]json.RawMessage, 0, len(raws))
		changed := false
		for _, raw := range raws {
			o := h.one(raw)
			changed = changed || !bytes.Equal(o, raw)
			if o != nil {
				out = append(out, o)
			}
		}
		switch {
		case !changed:
			return data
		case len(out) == 0:
			return nil
		}
		b, _ := json.Marshal(out)
		return b
	}
	if o := h.one(d); !bytes.Equal(o, d) || o == nil {
		return o
	}
	return data
}

// one runs the hooks on one message.
func (h *mcpHold) one(raw []byte) []byte {
	if err := mcp.CheckResponseReading(raw); err != nil {
		return h.unreadable(raw, "a message clients read differently")
	}
	msg, ok := mcp.DecodeResponse(raw)
	if !ok {
		return h.unreadable(raw, "a body that is not JSON-RPC")
	}
	for _, hook := range h.hooks {
		out := hook(raw, &msg)
		if out == nil {
			return nil
		}
		if !bytes.Equal(out, raw) {
			raw = out
			if msg, ok = mcp.DecodeResponse(raw); !ok {
				return nil
			}
		}
	}
	return raw
}

// sseHold is an event stream held one event at a time: the bytes of an
// event are released when it has ended (a blank line) and its data went
// through the hooks; an event the hooks rewrote is sent as one event of
// type message with the new data, its id kept. An event that grows past
// the bound is handled as unreadable: passed on as it arrives (unreadable:
// pass), or dropped and, in place of the call's response, a withheld
// result sent. An event the stream leaves unfinished at its end is never
// dispatched by a client, and is dropped.
type sseHold struct {
	h   *mcpHold
	rc  io.ReadCloser
	ev  []byte // the current event's bytes, held
	out []byte // bytes released, not yet read
	// scan is where the next line of ev starts; lineStart the start of
	// the current line.
	scan     int
	passing  bool // the current event is past the bound and passes as it comes
	dropping bool // the current event is past the bound and is dropped
	err      error
	buf      []byte // what upstream's bytes are read into
	eof      bool   // upstream's body ended
}

func (s *sseHold) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.buf == nil {
			s.buf = make([]byte, 32<<10)
		}
		n, err := s.rc.Read(s.buf)
		s.feed(s.buf[:n])
		if err != nil {
			s.err = err
			if !s.passing && !s.dropping {
				// A CR the stream ends with ends its line: there is no LF
				// to wait for.
				s.eof = true
				s.events()
			}
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

func (s *sseHold) Close() error { return s.rc.Close() }

// feed takes the next bytes of the stream.
func (s *sseHold) feed(b []byte) {
	for len(b) > 0 {
		if s.passing || s.dropping {
			// Past the bound: up to the event's end, bytes pass or are
			// dropped as they come. The end is a blank line: two line
			// ends in a row.
			i := eventEnd(s.ev, b)
			chunk := b
			if i >= 0 {
				chunk = b[:i]
			}
			if s.passing {
				s.out = append(s.out, chunk...)
			}
			s.ev = append(s.ev[:0], tail(append(s.ev, chunk...))...)
			if i < 0 {
				return
			}
			b = b[i:]
			s.passing, s.dropping, s.ev, s.scan = false, false, s.ev[:0], 0
			continue
		}
		s.ev = append(s.ev, b...)
		b = nil
		s.events()
		if int64(len(s.ev)) > s.h.limit {
			s.out = append(s.out, s.over(s.ev)...)
			s.passing, s.dropping = s.h.pass, !s.h.pass
			s.ev, s.scan = tail(s.ev), 0
		}
	}
}

// over is what the client gets of an event (or its start) larger than
// the bound: the event as it is under unreadable: pass, otherwise a
// withheld result in place of the call's response.
func (s *sseHold) over(event []byte) []byte {
	if s.h.pass {
		s.h.m.noteMCPAnswer(sink.AnswerUninspected, nil, 0)
		return event
	}
	if w := s.h.unreadable(nil, fmt.Sprintf("an event larger than the %d bytes its answer checks read", s.h.limit)); w != nil {
		return mcp.EventMessage(w)
	}
	return nil
}

// tail keeps the last two bytes of an event past the bound: enough to
// find its end across chunks.
func tail(b []byte) []byte {
	if len(b) > 2 {
		return append([]byte(nil), b[len(b)-2:]...)
	}
	return b
}

// eventEnd returns the index in b just past the blank line that ends an
// event, given prev (the last bytes before b), or -1.
func eventEnd(prev, b []byte) int {
	all := append(append([]byte(nil), prev...), b...)
	off := len(prev)
	for i := 0; i < len(all); i++ {
		if all[i] != '\n' && all[i] != '\r' {
			continue
		}
		j := i + 1
		if all[i] == '\r' && j < len(all) && all[j] == '\n' {
			j++
		}
		if j < len(all) && (all[j] == '\n' || all[j] == '\r') {
			k := j + 1
			if all[j] == '\r' && k < len(all) && all[k] == '\n' {
				k++
			}
			if k-off > 0 {
				return k - off
			}
		}
	}
	return -1
}

// events releases each whole event held.
func (s *sseHold) events() {
	for {
		i := s.scan
		j := bytes.IndexAny(s.ev[i:], "\r\n")
		if j < 0 {
			return
		}
		end := i + j + 1
		if s.ev[i+j] == '\r' {
			if end == len(s.ev) && !s.eof {
				return // a CR at the end: wait to see whether LF follows
			}
			if end < len(s.ev) && s.ev[end] == '\n' {
				end++
			}
		}
		blank := j == 0
		s.scan = end
		if !blank {
			continue
		}
		event := s.ev[:end]
		s.out = append(s.out, s.release(event)...)
		s.ev = append(s.ev[:0:0], s.ev[end:]...)
		s.scan = 0
	}
}

// release is what the client gets of one whole event.
func (s *sseHold) release(event []byte) []byte {
	if int64(len(event)) > s.h.limit {
		return s.over(event)
	}
	data, id, ok := eventData(event)
	if !ok || len(mcp.TrimJSONSpace(data)) == 0 {
		return event // no data: nothing a client dispatches, or reads as a message
	}
	out := s.h.rewrite(data)
	switch {
	case out == nil:
		return nil
	case bytes.Equal(out, data):
		return event
	}
	b := make([]byte, 0, len(out)+64)
	if id != nil {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	return append(b, mcp.EventMessage(out)...)
}

// eventData reads one event as a client does: its data lines joined by
// LF, and its last id; ok is false when it has no data line.
func eventData(event []byte) (data, id []byte, ok bool) {
	for len(event) > 0 {
		i := bytes.IndexAny(event, "\r\n")
		line := event
		if i >= 0 {
			line = event[:i]
			if event[i] == '\r' && i+1 < len(event) && event[i+1] == '\n' {
				i++
			}
			event = event[i+1:]
		} else {
			event = nil
		}
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if k := bytes.IndexByte(line, ':'); k >= 0 {
			field, value = line[:k], line[k+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if ok {
				data = append(data, '\n')
			}
			data, ok = append(data, value...), true
		case "id":
			id = append([]byte(nil), value...)
		}
	}
	return data, id, ok
}
