package mcp

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// learned records what an AnswerReader told its Learner.
type learned struct {
	changed int
	lists   []string // each list's tool names, and "(complete)" when whole
}

func (l *learned) ListChanged() { l.changed++ }

func (l *learned) Listed(res *ToolsListResult, complete bool) {
	s := ""
	for _, t := range res.Tools {
		s += t.Name + ","
	}
	if complete {
		s += "(complete)"
	}
	l.lists = append(l.lists, s)
}

// readAnswer feeds an answer to a reader in chunks of n bytes and returns
// what it found.
func readAnswer(contentType string, body []byte, declared bool, n, max int, callID, listID string) (resp *Message, unread, answered bool, l *learned) {
	a := &AnswerReader{}
	if callID != "" {
		a.CallID = json.RawMessage(callID)
	}
	if listID != "" {
		a.ListID = json.RawMessage(listID)
	}
	length := int64(-1)
	if declared {
		length = int64(len(body))
	}
	l = &learned{}
	a.Begin(http.Header{"Content-Type": {contentType}}, length, max, l)
	for b := body; len(b) > 0; {
		k := min(n, len(b))
		a.Observe(b[:k])
		b = b[k:]
	}
	answered = a.Answered()
	resp, unread = a.Response()
	return resp, unread, answered, l
}

func TestAnswerReader(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":false}}`
	const list = `{"jsonrpc":"2.0","id":"l","result":{"tools":[{"name":"a"},{"name":"b"}]}}`
	const changed = `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`
	for _, tc := range []struct {
		name, ct, body string
		declared       bool
		max            int
		callID, listID string
		found, unread  bool
		answered       bool
		changed        int
		lists          []string
	}{
		{"JSON response", "application/json", call, true, 1 << 10, "7", "", true, false, true, 0, nil},
		{"JSON of unknown length", "application/json", call, false, 1 << 10, "7", "", true, false, false, 0, nil},
		{"JSON past the bound", "application/json", call, true, 16, "7", "", false, true, false, 0, nil},
		{"JSON without the response", "application/json", `{"jsonrpc":"2.0","id":8,"result":{}}`, true, 1 << 10, "7", "", false, true, false, 0, nil},
		{"stream: notice, list, response", "text/event-stream",
			"data: " + changed + "\n\ndata: " + list + "\n\nevent: message\ndata: " + call + "\n\n", false, 1 << 10, "7", `"l"`, true, false, true, 1, []string{"a,b,(complete)"}},
		{"stream without the response", "text/event-stream", "data: " + changed + "\n\n", false, 1 << 10, "7", "", false, false, false, 1, nil},
		{"stream event past the bound", "text/event-stream", "data: " + call + "\n\n", false, 16, "7", "", false, true, false, 0, nil},
		{"list only", "application/json", list, true, 1 << 10, "", `"l"`, false, false, true, 0, []string{"a,b,(complete)"}},
	} {
		for _, n := range []int{1, 5, 1 << 20} {
			resp, unread, answered, l := readAnswer(tc.ct, []byte(tc.body), tc.declared, n, tc.max, tc.callID, tc.listID)
			if (resp != nil) != tc.found || unread != tc.unread || answered != tc.answered || l.changed != tc.changed || !reflect.DeepEqual(l.lists, tc.lists) {
				t.Errorf("%s (chunks of %d): found %v unread %v answered %v changed %d lists %q; want %v %v %v %d %q",
					tc.name, n, resp != nil, unread, answered, l.changed, l.lists, tc.found, tc.unread, tc.answered, tc.changed, tc.lists)
			}
		}
	}
}

// FuzzAnswerReader feeds answers from a server to the reader: it never
// panics, finds the same response and lists whatever the chunking, and a
// response it finds is the one asked for.
func FuzzAnswerReader(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"), true, uint8(3))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":"l","result":{"tools":[{"name":"x"}],"nextCursor":"c"}},{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"m"}}]`), false, uint8(7))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\r\n\r\n"), true, uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, stream bool, chunk uint8) {
		ct := "application/json"
		if stream {
			ct = "text/event-stream"
		}
		n := int(chunk)%64 + 1
		wr, wu, wa, wl := readAnswer(ct, body, !stream, len(body)+1, 512, "1", `"l"`)
		pr, pu, pa, pl := readAnswer(ct, body, !stream, n, 512, "1", `"l"`)
		if (wr != nil) != (pr != nil) || wu != pu || wa != pa || !reflect.DeepEqual(wl, pl) {
			t.Fatalf("chunks of %d read %v %v %v %+v, whole %v %v %v %+v", n, pr != nil, pu, pa, pl, wr != nil, wu, wa, wl)
		}
		if wr != nil && string(wr.ID) != "1" {
			t.Fatalf("found the response of id %s, asked for 1", wr.ID)
		}
	})
}
