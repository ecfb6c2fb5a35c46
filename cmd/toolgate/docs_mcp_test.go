package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docMCPPort is the port of the MCP server docs/mcp.md's "Pinned tool
// definitions" pins (`toolgate mcp pin --url http://127.0.0.1:18310/mcp`).
const docMCPPort = "18310"

// startDocMCPServer serves the official Go SDK's MCP server with the docs'
// pay tool on 127.0.0.1:port for the test's life.
func startDocMCPServer(t *testing.T, port string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "pay", Description: "Pays an amount.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","maximum":100}},"required":["amount"]}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}
