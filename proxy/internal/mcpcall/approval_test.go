package mcpcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// TestTokenPrefix keeps proxy's copy of the in-band token prefix equal to
// the gate's.
func TestTokenPrefix(t *testing.T) {
	if tokenPrefix != approval.TokenPrefix {
		t.Fatalf("proxy reads %q as toolgate's state, the gate issues %q", tokenPrefix, approval.TokenPrefix)
	}
}

// FuzzInBandParams feeds a tools/call's params, as a client sends them, to
// what the in-band approval reads of them (toolgate's own requestState,
// the declared elicitation modes, a declined answer) and to the rewrite
// that strips toolgate's state: nothing panics, and the rewritten params
// hold every other member unchanged and no member that folds to
// requestState or inputResponses.
func FuzzInBandParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"charge","arguments":{"amount":1}}`,
		`{"name":"charge","arguments":{},"requestState":"toolgate-approval.v1.e30.AAAA","inputResponses":{"toolgate.approval":{"action":"accept"}}}`,
		`{"name":"c","RequestState":"x","INPUTRESPONSES":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}`,
		`{"name":"c","requestState":7,"inputResponses":{"toolgate.approval":{"action":"decline"}}}`,
		`{"name":"c","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":null}}}}`,
		`{"name":"c","_meta":[]}`,
		`{"name":"c","requestState":"toolgate-approval.v1.\u0000"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		tc, ref := mcp.ParseToolCall(json.RawMessage(params))
		if ref != nil {
			return
		}
		st, own := ownState(tc.State)
		if own != strings.HasPrefix(st, tokenPrefix) {
			t.Fatalf("ownState %q %v", st, own)
		}
		_ = declaresURLElicitation(tc.Meta)
		_ = declined(tc.Responses)
		out, err := stripOwnState(mcp.Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: mcp.MethodToolsCall, Params: json.RawMessage(params)})
		if err != nil {
			return
		}
		var msg struct {
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(out, &msg); err != nil {
			t.Fatalf("rewritten message %s: %v", out, err)
		}
		var in map[string]json.RawMessage
		if err := json.Unmarshal([]byte(params), &in); err != nil {
			t.Fatal(err)
		}
		for k, v := range in {
			folded := strings.EqualFold(k, "requestState") || strings.EqualFold(k, "inputResponses")
			got, kept := msg.Params[k]
			switch {
			case folded && kept:
				t.Fatalf("params.%s survived the rewrite", k)
			case !folded && !kept:
				t.Fatalf("params.%s was dropped", k)
			case !folded && !testutil.JSONEqual(got, v):
				t.Fatalf("params.%s changed: %s -> %s", k, v, got)
			}
		}
	})
}
