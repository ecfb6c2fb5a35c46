package tracing_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/tracing"
)

// FuzzTraceCall feeds callers' traceparents and the event's caller-given
// strings (tool, JSON-RPC method and id, host, trace id) to TraceCall:
// it never panics, whatever they hold.
func FuzzTraceCall(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736", "search", "tools/call", "7", "api.example:443")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "", "", "", "", "")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "zz", "t", "batch", `"a1"`, "[::1]:80")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra", "00000000000000000000000000000000", "x\x00y", "initialize", "", "host:notaport")
	f.Add("00-00000000000000000000000000000000-0000000000000000-01", "4BF92F3577B34DA6A3CE929D0E0E4736", "\xff", "", "", ":")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // no collector: spans are queued, then dropped
	c := tracing.Config{Endpoint: "http://" + addr, QueueSize: 16, Timeout: 100 * time.Millisecond}
	if err := c.Validate(); err != nil {
		f.Fatal(err)
	}
	e, err := tracing.New(c, tracing.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	f.Fuzz(func(t *testing.T, tp, traceID, tool, method, id, host string) {
		ev := &sink.Event{Time: time.Now(), TraceID: traceID, Tool: tool, RPCMethod: method, RPCID: id, Host: host,
			MCPServer: host, Refused: len(tool)%2 == 0, Reason: method, ErrorCode: "validation", ViolationPaths: []string{tool}}
		e.TraceCall(ev, sink.SpanFacts{Traceparent: tp, KnownTool: tool, ToolDescription: method + tool, RPCError: len(id)%2 == 1, RPCErrorCode: int64(len(host))})
	})
}
