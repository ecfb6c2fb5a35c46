package mcp

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
)

// SSEReader parses a text/event-stream (the WHATWG server-sent events
// format) incrementally, from the chunks of bytes as they pass to the
// caller, and hands each event's data to onEvent. It keeps at most max
// bytes of one event: a larger event is skipped whole and counted in
// Skipped. It never changes or holds back the bytes themselves.
type SSEReader struct {
	max     int
	onEvent func(data []byte)

	line    []byte // the current line, without its end
	lineLen int    // the current line's length, counting bytes not kept
	data    []byte // the current event's data lines, joined by "\n"
	hasData bool
	over    bool // the current line or event passed max: skip to the event's end
	lastCR  bool // the previous chunk ended in CR: a leading LF ends nothing
	skipped int  // events skipped as too large
}

// NewSSEReader returns a reader that keeps at most max bytes of one event
// and hands each event's data to onEvent.
func NewSSEReader(max int, onEvent func([]byte)) *SSEReader {
	return &SSEReader{max: max, onEvent: onEvent}
}

// Feed parses the next chunk of the stream.
func (s *SSEReader) Feed(p []byte) {
	for len(p) > 0 {
		if s.lastCR {
			s.lastCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.appendLine(p)
			return
		}
		s.appendLine(p[:i])
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					i++
				}
			} else {
				s.lastCR = true
			}
		}
		p = p[i+1:]
		s.endLine()
	}
}

func (s *SSEReader) appendLine(b []byte) {
	s.lineLen += len(b)
	if s.over {
		return
	}
	if s.lineLen > s.max {
		s.over, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, b...)
}

// endLine handles one complete line.
func (s *SSEReader) endLine() {
	line, blank := s.line, s.lineLen == 0
	s.line, s.lineLen = s.line[:0], 0
	if s.over {
		if blank {
			s.skipped++
			s.over, s.hasData, s.data = false, false, s.data[:0]
		}
		return
	}
	if blank {
		s.dispatch()
		return
	}
	if line[0] == ':' {
		return // a comment
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	if string(field) != "data" {
		return // event, id, retry and unknown fields do not change the data
	}
	if len(s.data)+len(value)+1 > s.max {
		s.over, s.hasData, s.data = true, false, s.data[:0]
		return
	}
	if s.hasData {
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, value...)
	s.hasData = true
}

// Skipped is how many events were skipped as larger than the bound.
func (s *SSEReader) Skipped() int { return s.skipped }

// dispatch ends an event at a blank line.
func (s *SSEReader) dispatch() {
	if !s.hasData {
		return
	}
	data := s.data
	s.data, s.hasData = s.data[:0], false
	if len(data) > 0 {
		s.onEvent(data)
	}
}

// AcceptsOnlySSE reports whether the caller's Accept names
// text/event-stream and no JSON.
func AcceptsOnlySSE(r *http.Request) bool {
	sse, js := false, false
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			switch mt {
			case "text/event-stream":
				sse = true
			case "application/json", "*/*", "application/*":
				js = true
			}
		}
	}
	return sse && !js
}

// EventMessage frames one JSON-RPC message as one server-sent event of
// type message, as a server answers a POST on a stream.
func EventMessage(body []byte) []byte {
	sse := make([]byte, 0, len(body)+24)
	sse = append(sse, "event: message\ndata: "...)
	sse = append(sse, body...)
	sse = append(sse, "\n\n"...)
	return sse
}
