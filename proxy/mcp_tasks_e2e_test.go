package proxy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestMCPOwnTasksOnTheWire checks the task toolgate makes for a refused
// task-augmented tools/call (2025-11-25), with a raw client: a
// CreateTaskResult whose task has failed with the refusal as its
// statusMessage; tasks/get and tasks/result answered by toolgate for the
// same session only (another session, or an id toolgate never made, is
// not found: -32602); tasks/cancel refused as the task is terminal; and
// none of it reaches the server.
func TestMCPOwnTasksOnTheWire(t *testing.T) {
	up := startMCPUpstream(t)
	cfg := strings.ReplaceAll(mcpConfig, "MCPUP", up.srv.URL) + `    mcp:
      tools:
        create_issue:
          schema_file: ` + writeSchema(t, issueSchema) + `
`
	e := newEnvTo(t, cfg, nil, nil, nil, 10*time.Millisecond)
	hdr := func(sid string) map[string]string {
		return map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	}
	post := func(sid, body string) (int, map[string]json.RawMessage) {
		a := do(t, e.viaHTTP, "POST", up.srv.URL+"/mcp", "application/json", body, hdr(sid))
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &msg); err != nil {
			t.Fatalf("%s: %v", a.body, err)
		}
		return a.status, msg
	}
	status, msg := post("sess-a", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_issue","arguments":{"title":"x","lables":["bug"]},"task":{"ttl":60000}}}`)
	var created struct {
		Task struct {
			TaskID, Status, StatusMessage, CreatedAt, LastUpdatedAt string
			TTL                                                     int64
			PollInterval                                            int64
		}
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(msg["result"], &created); err != nil || status != 200 || string(msg["id"]) != "7" {
		t.Fatalf("refused task call: %d %s", status, msg["result"])
	}
	tk := created.Task
	if !strings.HasPrefix(tk.TaskID, "toolgate-refused-") || tk.Status != "failed" || !strings.Contains(tk.StatusMessage, "/lables") ||
		tk.CreatedAt == "" || tk.LastUpdatedAt == "" || tk.TTL != 60000 || tk.PollInterval <= 0 || created.Meta["toolgate/envelope"] == nil {
		t.Fatalf("CreateTaskResult: %s", msg["result"])
	}

	_, msg = post("sess-a", `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"`+tk.TaskID+`"}}`)
	var got struct{ TaskID, Status, StatusMessage string }
	if json.Unmarshal(msg["result"], &got) != nil || got.TaskID != tk.TaskID || got.Status != "failed" || got.StatusMessage != tk.StatusMessage {
		t.Errorf("tasks/get: %s", msg["result"])
	}
	_, msg = post("sess-a", `{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"`+tk.TaskID+`"}}`)
	var res struct {
		Content []struct{ Text string }
		IsError bool
		Meta    map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	if json.Unmarshal(msg["result"], &res) != nil || !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "/lables") ||
		res.Meta["io.modelcontextprotocol/related-task"].TaskID != tk.TaskID {
		t.Errorf("tasks/result: %s", msg["result"])
	}
	rpcErr := func(m map[string]json.RawMessage) int {
		var e struct{ Code int }
		_ = json.Unmarshal(m["error"], &e)
		return e.Code
	}
	if _, msg = post("sess-a", `{"jsonrpc":"2.0","id":10,"method":"tasks/cancel","params":{"taskId":"`+tk.TaskID+`"}}`); rpcErr(msg) != -32602 {
		t.Errorf("tasks/cancel of a failed task: %v", msg)
	}
	if _, msg = post("sess-b", `{"jsonrpc":"2.0","id":11,"method":"tasks/result","params":{"taskId":"`+tk.TaskID+`"}}`); rpcErr(msg) != -32602 || msg["result"] != nil {
		t.Errorf("tasks/result from another session: %v", msg)
	}
	if _, msg = post("sess-a", `{"jsonrpc":"2.0","id":12,"method":"tasks/get","params":{"taskId":"toolgate-refused-0000"}}`); rpcErr(msg) != -32602 {
		t.Errorf("tasks/get of an id toolgate never made: %v", msg)
	}
	if n := up.created.Load(); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
}
