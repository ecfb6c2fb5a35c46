package mcppin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/proxytest"
	"github.com/toolgate/toolgate/proxy"
)

// TestPinsLockMatchesProxy pins a live SDK server with Run (toolgate mcp
// pin), then puts a sidecar in front of it whose route loads the lock:
// the proxy files the server's pins under the key the command wrote
// (mcppin.ServerKey), so the pinned tools are reviewed and pass, nothing
// waits for a decision, and a tool the server adds afterwards is refused
// (new_tools: change, the default with a lock file).
func TestPinsLockMatchesProxy(t *testing.T) {
	srv := newSDKServer(t, nil)
	srv.add("pay", "Pay an invoice", paySchema)
	srv.add("refund", "Refund a payment", refundSchema)
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "payments.pins")
	if _, err := run(t, Options{URL: srv.url, Route: "payments", LockFile: lockPath}); err != nil {
		t.Fatal(err)
	}

	origin := strings.TrimSuffix(srv.url, "/mcp")
	cfgYAML := fmt.Sprintf(`
listen:
  forward: "off"
  reverse:
    - {listen: "127.0.0.1:0", upstream: %q}
tools:
  - name: payments
    protocol: mcp
    match: {host: 127.0.0.1, path: /mcp}
    mcp:
      pin: {lock_file: payments.pins}
`, origin)
	ps := proxytest.Start(t, cfgYAML, dir, proxy.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + ps.Addr("reverse", 0) + "/mcp",
		HTTPClient: &http.Client{Timeout: 30 * time.Second}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listAll := func() {
		t.Helper()
		for _, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	call := func(name string) (refused bool, text string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"amount": 50}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Content)
		return res.IsError, string(b)
	}
	listAll()
	if refused, text := call("pay"); refused {
		t.Fatalf("pay, pinned by toolgate mcp pin, was refused through the proxy: %s (the command's server key and the proxy's must agree)", text)
	}
	if pending := ps.PinChanges(); len(pending) != 0 {
		t.Errorf("PinChanges = %+v after listing the pinned server; want none", pending)
	}
	srv.add("drain", "Move the balance", refundSchema)
	listAll()
	if refused, text := call("drain"); !refused || !strings.Contains(text, "no reviewed definition") {
		t.Errorf("drain, added after the lock was written: refused %v, %s; want refused as unreviewed", refused, text)
	}
}

// TestParseHeaders reads --header values, and refuses one that is not
// "Name: value" without echoing its value (it may be a token).
func TestParseHeaders(t *testing.T) {
	h, err := ParseHeaders([]string{"authorization: Bearer s3cret", "X-Team:  a "})
	if err != nil || h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Team") != "a" {
		t.Errorf("ParseHeaders = %v, %v", h, err)
	}
	for _, bad := range []string{"Bearer s3cret", ": s3cret", "Bad Name: s3cret", "X: a\r\nY: s3cret"} {
		_, err := ParseHeaders([]string{bad})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseHeaders(%q) = %v; want an error without the value", bad, err)
		}
	}
}
