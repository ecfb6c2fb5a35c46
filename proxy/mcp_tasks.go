package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// A tools/call that asks to run as a task (MCP 2025-11-25 tasks: params.task)
// expects a CreateTaskResult, and its client then polls tasks/get and reads
// tasks/result. When toolgate refuses such a call, the call never reaches
// the server, so the server knows no such task: toolgate answers with a task
// of its own, already failed, and answers tasks/get, tasks/result and
// tasks/cancel for it itself.

// Methods of 2025-11-25 tasks toolgate answers for its own tasks.
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"
)

// metaRelatedTask is the _meta key tying a message to its task.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// taskIDPrefix starts the id of every task toolgate makes, so that a
// tasks/get for one is told from one for the server's own tasks.
const taskIDPrefix = "toolgate-refused-"

// Bounds of the refused tasks kept: at most maxRefusedTasks (the oldest is
// dropped first), each for the ttl its call asked, at most maxRefusedTaskTTL
// (the default when it asked none).
const (
	maxRefusedTasks   = 1024
	maxRefusedTaskTTL = 10 * time.Minute
	refusedTaskPollMS = 1000
)

// refusedTasks holds the tasks toolgate made for refused calls. The zero
// value is ready to use; it is safe for concurrent use.
type refusedTasks struct {
	mu    sync.Mutex
	tasks map[string]*refusedTask
	order []string // ids, oldest first
}

// refusedTask is one task toolgate made.
type refusedTask struct {
	owner   string          // who may read it: the server, session and authorization context
	expires time.Time       // when it is forgotten
	task    json.RawMessage // the Task, as tasks/get answers it
	result  json.RawMessage // the refused call's CallToolResult, as tasks/result answers it
}

// taskRequest returns the ttl in milliseconds a tools/call asked for its
// task (0 when none; at most maxRefusedTaskTTL), and whether it asked to
// run as a task at all (params.task, spelled exactly so, is an object, as
// a server reads it).
func taskRequest(params json.RawMessage) (ttl int64, ok bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return 0, false
	}
	task := bytes.TrimSpace(p["task"])
	if len(task) == 0 || task[0] != '{' {
		return 0, false
	}
	var t map[string]json.RawMessage
	if json.Unmarshal(task, &t) != nil {
		return 0, false
	}
	var asked float64
	if json.Unmarshal(t["ttl"], &asked) == nil && asked > 0 {
		ttl = int64(min(asked, float64(maxRefusedTaskTTL.Milliseconds())))
	}
	return ttl, true
}

// taskOwner names who may read a task toolgate made for the request r to
// server key: the same server, session and authorization context.
func taskOwner(r *http.Request, key string) string {
	return key + "|" + r.Header.Get(mcp.HeaderSession) + "|" + mcp.AuthContext(r)
}

// add makes a failed task for a refused call and returns the
// CreateTaskResult that answers the call. text and envelope are the
// refusal's, as in rpcToolError; structured says whether the result may
// carry the envelope as structuredContent.
func (ts *refusedTasks) add(owner string, askedTTL int64, text string, envelope []byte, complete, structured bool) json.RawMessage {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := taskIDPrefix + hex.EncodeToString(raw[:])
	ttl := maxRefusedTaskTTL
	if askedTTL > 0 && time.Duration(askedTTL)*time.Millisecond < ttl {
		ttl = time.Duration(askedTTL) * time.Millisecond
	}
	now := time.Now().UTC()
	stamp := now.Format(time.RFC3339Nano)
	task, _ := json.Marshal(map[string]any{
		"taskId": id, "status": "failed", "statusMessage": text,
		"createdAt": stamp, "lastUpdatedAt": stamp,
		"ttl": ttl.Milliseconds(), "pollInterval": refusedTaskPollMS,
	})
	result := toolErrorResult(text, envelope, complete, structured, map[string]any{metaRelatedTask: map[string]string{"taskId": id}})
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tasks == nil {
		ts.tasks = make(map[string]*refusedTask)
	}
	for len(ts.order) > 0 && (len(ts.tasks) >= maxRefusedTasks || ts.tasks[ts.order[0]] == nil || now.After(ts.tasks[ts.order[0]].expires)) {
		delete(ts.tasks, ts.order[0])
		ts.order = ts.order[1:]
	}
	ts.tasks[id] = &refusedTask{owner: owner, expires: now.Add(ttl), task: task, result: result}
	ts.order = append(ts.order, id)
	created, _ := json.Marshal(map[string]any{"task": json.RawMessage(task), "_meta": map[string]any{metaEnvelope: json.RawMessage(envelope)}})
	return created
}

// get returns a task toolgate made, when owner may read it and it has not
// expired.
func (ts *refusedTasks) get(owner, id string) *refusedTask {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t == nil || t.owner != owner || time.Now().After(t.expires) {
		return nil
	}
	return t
}

// refusedTaskAnswer answers a refused tools/call that asked to run as a
// task: a CreateTaskResult whose task has already failed, its
// statusMessage the refusal's text. ok is false for a call that did not
// ask for a task.
func (c *call) refusedTaskAnswer(r *http.Request, msg *mcp.Message, ref *refusal) (body []byte, ok bool) {
	ttl, ok := taskRequest(msg.Params)
	if !ok {
		return nil, false
	}
	m := c.mcp
	created := c.s.tasks.add(taskOwner(r, m.key), ttl, refusalText(ref), ref.envelope(), m.stateless, m.srv.PlainResult(c.ev.Tool))
	body, _ = json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", msg.ID, created})
	return body, true
}

// answerOwnTask answers tasks/get, tasks/result and tasks/cancel for a
// task toolgate made (its id has taskIDPrefix); it returns nil for any
// other message, which goes to the server. A task toolgate does not hold
// for this caller (expired, or made for another session) is not found,
// as the specification asks (-32602).
func (c *call) answerOwnTask(r *http.Request, msg *mcp.Message) *http.Response {
	switch msg.Method {
	case methodTasksGet, methodTasksResult, methodTasksCancel:
	default:
		return nil
	}
	if !msg.IsRequest() {
		return nil
	}
	var p map[string]json.RawMessage
	var id string
	if json.Unmarshal(msg.Params, &p) != nil || json.Unmarshal(p["taskId"], &id) != nil || !strings.HasPrefix(id, taskIDPrefix) {
		return nil
	}
	t := c.s.tasks.get(taskOwner(r, c.mcp.key), id)
	var answer any
	switch {
	case t == nil:
		answer = map[string]any{"code": -32602, "message": "Failed to retrieve task: Task not found"}
	case msg.Method == methodTasksCancel:
		answer = map[string]any{"code": -32602, "message": "Cannot cancel task: it is already in a terminal status (failed)"}
	}
	var body []byte
	switch {
	case answer != nil:
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": answer})
	case msg.Method == methodTasksGet:
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": t.task})
	default:
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": t.result})
	}
	c.ev.Reason = reasonOwnTask
	c.finish(bucketing.Result{}, 0, int64(len(body)))
	resp := mcpAnswer(r, http.StatusOK, "", body)
	if sid := r.Header.Get(mcp.HeaderSession); sid != "" {
		resp.Header[mcp.HeaderSession] = []string{sid}
	}
	return resp
}

// reasonOwnTask marks the event of a tasks/* request toolgate answered
// itself, for a task it made when refusing a call.
const reasonOwnTask = "toolgate_task"
