package mcpcall

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// A tools/call that asks to run as a task (MCP 2025-11-25 tasks: params.task)
// expects a CreateTaskResult, and its client then polls tasks/get and reads
// tasks/result. When toolgate refuses such a call, the call never reaches
// the server, so the server knows no such task: toolgate answers with a task
// of its own, already failed, and answers tasks/get, tasks/result and
// tasks/cancel for it itself. The tasks are kept in mcp.RefusedTasks.

// refusedTaskAnswer answers a refused tools/call that asked to run as a
// task: a CreateTaskResult whose task has already failed, its
// statusMessage the refusal's text. ok is false for a call that did not
// ask for a task.
func refusedTaskAnswer(c *pipe.Call, r *http.Request, msg *mcp.Message, ref *conf.Refusal) (body []byte, ok bool) {
	ttl, ok := mcp.TaskRequest(msg.Params)
	if !ok {
		return nil, false
	}
	m := ExchangeOf(c)
	created := m.h.tasks.Add(mcp.TaskOwner(r, m.Key), ttl, RefusalText(ref), ref.Envelope(), m.Stateless, m.Tools.PlainResult(c.Event.Tool))
	body, _ = json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", msg.ID, created})
	return body, true
}

// answerOwnTask answers tasks/get, tasks/result and tasks/cancel for a
// task toolgate made (its id has mcp.TaskIDPrefix); it returns nil for any
// other message, which goes to the server. A task toolgate does not hold
// for this caller (expired, or made for another session) is not found,
// as the specification asks (-32602).
func answerOwnTask(c *pipe.Call, r *http.Request, msg *mcp.Message) *http.Response {
	switch msg.Method {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel:
	default:
		return nil
	}
	if !msg.IsRequest() {
		return nil
	}
	var p map[string]json.RawMessage
	var id string
	if json.Unmarshal(msg.Params, &p) != nil || json.Unmarshal(p["taskId"], &id) != nil || !strings.HasPrefix(id, mcp.TaskIDPrefix) {
		return nil
	}
	m := ExchangeOf(c)
	t := m.h.tasks.Get(mcp.TaskOwner(r, m.Key), id)
	var answer any
	switch {
	case t == nil:
		answer = map[string]any{"code": -32602, "message": "Failed to retrieve task: Task not found"}
	case msg.Method == mcp.MethodTasksCancel:
		answer = map[string]any{"code": -32602, "message": "Cannot cancel task: it is already in a terminal status (failed)"}
	}
	var body []byte
	switch {
	case answer != nil:
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": answer})
	case msg.Method == mcp.MethodTasksGet:
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": t.Task})
	default:
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": t.Result})
	}
	c.Event.Reason = reasonOwnTask
	c.Finish(bucketing.Result{}, 0, int64(len(body)))
	resp := mcpAnswer(r, http.StatusOK, "", body)
	if sid := r.Header.Get(mcp.HeaderSession); sid != "" {
		resp.Header[mcp.HeaderSession] = []string{sid}
	}
	return resp
}

// reasonOwnTask marks the event of a tasks/* request toolgate answered
// itself, for a task it made when refusing a call.
const reasonOwnTask = "toolgate_task"
