package mcp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// A tools/call that asks to run as a task (MCP 2025-11-25 tasks: params.task)
// expects a CreateTaskResult, and its client then polls tasks/get and reads
// tasks/result. When toolgate refuses such a call, the call never reaches
// the server, so the server knows no such task: toolgate answers with a task
// of its own, already failed, and answers tasks/get, tasks/result and
// tasks/cancel for it itself.

// Methods of 2025-11-25 tasks toolgate answers for its own tasks.
const (
	// MethodTasksGet reads a task's status.
	MethodTasksGet = "tasks/get"
	// MethodTasksResult reads a task's result.
	MethodTasksResult = "tasks/result"
	// MethodTasksCancel cancels a task.
	MethodTasksCancel = "tasks/cancel"
)

// metaRelatedTask is the _meta key tying a message to its task.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// TaskIDPrefix starts the id of every task toolgate makes, so that a
// tasks/get for one is told from one for the server's own tasks.
const TaskIDPrefix = "toolgate-refused-"

// Bounds of the refused tasks kept: at most maxRefusedTasks (the oldest is
// dropped first), each for the ttl its call asked, at most maxRefusedTaskTTL
// (the default when it asked none).
const (
	maxRefusedTasks   = 1024
	maxRefusedTaskTTL = 10 * time.Minute
	refusedTaskPollMS = 1000
)

// RefusedTasks holds the tasks toolgate made for refused calls. The zero
// value is ready to use; it is safe for concurrent use.
type RefusedTasks struct {
	mu    sync.Mutex
	tasks map[string]*RefusedTask
	order []string // ids, oldest first
}

// RefusedTask is one task toolgate made.
type RefusedTask struct {
	owner   string    // who may read it: the server, session and authorization context
	expires time.Time // when it is forgotten
	// Task is the Task, as tasks/get answers it.
	Task json.RawMessage
	// Result is the refused call's CallToolResult, as tasks/result
	// answers it.
	Result json.RawMessage
}

// TaskRequest returns the ttl in milliseconds a tools/call asked for its
// task (0 when none; at most maxRefusedTaskTTL), and whether it asked to
// run as a task at all (params.task, spelled exactly so, is an object, as
// a server reads it).
func TaskRequest(params json.RawMessage) (ttl int64, ok bool) {
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

// TaskOwner names who may read a task toolgate made for the request r to
// server key: the same server, session and authorization context.
func TaskOwner(r *http.Request, key string) string {
	return key + "|" + r.Header.Get(HeaderSession) + "|" + AuthContext(r)
}

// Add makes a failed task for a refused call and returns the
// CreateTaskResult that answers the call. text and envelope are the
// refusal's, as in ToolError; structured says whether the result may
// carry the envelope as structuredContent.
func (ts *RefusedTasks) Add(owner string, askedTTL int64, text string, envelope []byte, complete, structured bool) json.RawMessage {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := TaskIDPrefix + hex.EncodeToString(raw[:])
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
	result := ToolErrorResult(text, envelope, complete, structured, map[string]any{metaRelatedTask: map[string]string{"taskId": id}})
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tasks == nil {
		ts.tasks = make(map[string]*RefusedTask)
	}
	for len(ts.order) > 0 && (len(ts.tasks) >= maxRefusedTasks || ts.tasks[ts.order[0]] == nil || now.After(ts.tasks[ts.order[0]].expires)) {
		delete(ts.tasks, ts.order[0])
		ts.order = ts.order[1:]
	}
	ts.tasks[id] = &RefusedTask{owner: owner, expires: now.Add(ttl), Task: task, Result: result}
	ts.order = append(ts.order, id)
	created, _ := json.Marshal(map[string]any{"task": json.RawMessage(task), "_meta": map[string]any{MetaEnvelope: json.RawMessage(envelope)}})
	return created
}

// Get returns a task toolgate made, when owner may read it and it has not
// expired.
func (ts *RefusedTasks) Get(owner, id string) *RefusedTask {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t == nil || t.owner != owner || time.Now().After(t.expires) {
		return nil
	}
	return t
}
