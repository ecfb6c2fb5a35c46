package mcpcall

import (
	"bytes"
	"io"
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// sseEvents is what a client's event-stream reader dispatches of a stream:
// each event's data.
func sseEvents(stream []byte) []string {
	var out []string
	r := mcp.NewSSEReader(1<<20, func(d []byte) { out = append(out, string(d)) })
	r.Feed(stream)
	return out
}

// chunked is a reader that hands out its bytes in chunks of the sizes
// given, cycling.
type chunked struct {
	b     []byte
	sizes []byte
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)]) + 1
		c.i++
	}
	n = min(n, len(c.b), len(p))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// FuzzSSEHold checks the event-stream hold against the event-stream
// reader clients use: with hooks that change nothing, however the stream
// is cut into chunks, with events past the bound passed as they come, what the client gets is a prefix of the stream
// (an unfinished last event is dropped), and it dispatches the same events
// the stream does.
func FuzzSSEHold(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"data: a\r\n\r\ndata: b\r\rdata: c\n\n: comment\n\n",
		"data:x\ndata:y\n\nid: 3\ndata: z",
		"\r\n\r\n\n\ndata: {}\r",
	} {
		f.Add([]byte(s), []byte{0, 3, 7})
		f.Add([]byte(s), []byte{1, 2})
	}
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		st := &pipe.State{Cfg: &conf.Config{}}
		c := &pipe.Call{State: st}
		m := &Exchange{Call: c, Route: &conf.MCPRoute{Answer: &conf.MCPAnswerRule{Schema: conf.OutputSchemaOff, Pass: true, Limit: 1 << 20}}, Tools: &mcp.ServerTools{}}
		m.ans.CallID = []byte("1")
		c.MCP = m
		limit := int64(1 << 20)
		if len(sizes) > 0 && sizes[0]%2 == 1 {
			limit = 16 // events past it pass as they come (unreadable: pass)
		}
		m.hold = &mcpHold{m: m, limit: limit, pass: true, hooks: []mcpHook{func(raw []byte, _ *mcp.Message) []byte { return raw }}}
		got, err := io.ReadAll(&sseHold{h: m.hold, rc: io.NopCloser(&chunked{b: bytes.Clone(stream), sizes: sizes})})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(stream, got) {
			t.Fatalf("the client got %q, not a prefix of the stream %q", got, stream)
		}
		want, have := sseEvents(stream), sseEvents(got)
		if len(want) != len(have) {
			t.Fatalf("the stream dispatches %q, what the client got %q", want, have)
		}
		for i := range want {
			if want[i] != have[i] {
				t.Fatalf("event %d: the stream dispatches %q, what the client got %q", i, want[i], have[i])
			}
		}
	})
}
