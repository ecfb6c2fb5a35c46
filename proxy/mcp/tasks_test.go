package mcp

import (
	"encoding/json"
	"testing"
	"time"
)

// TestRefusedTasksBounds checks the bounds of the tasks toolgate keeps for
// refused task-augmented calls: at most maxRefusedTasks (the oldest goes
// first), a ttl capped at maxRefusedTaskTTL, read only by their owner and
// only until they expire.
func TestRefusedTasksBounds(t *testing.T) {
	var ts RefusedTasks
	env := []byte(`{"ok":false}`)
	first := ts.Add("a", 0, "refused", env, false, false)
	var c struct {
		Task struct {
			TaskID string `json:"taskId"`
			TTL    int64  `json:"ttl"`
		} `json:"task"`
	}
	if err := json.Unmarshal(first, &c); err != nil || c.Task.TTL != maxRefusedTaskTTL.Milliseconds() {
		t.Fatalf("default ttl: %s", first)
	}
	if ts.Get("b", c.Task.TaskID) != nil || ts.Get("a", c.Task.TaskID) == nil {
		t.Errorf("a task is read by its owner only")
	}
	_ = json.Unmarshal(ts.Add("a", int64(24*time.Hour/time.Millisecond), "x", env, false, false), &c)
	if c.Task.TTL != maxRefusedTaskTTL.Milliseconds() {
		t.Errorf("a day's ttl was kept as %d ms, want the cap", c.Task.TTL)
	}
	_ = json.Unmarshal(ts.Add("a", 1, "x", env, false, false), &c)
	time.Sleep(5 * time.Millisecond)
	if ts.Get("a", c.Task.TaskID) != nil {
		t.Errorf("an expired task is still read")
	}
	for range maxRefusedTasks + 10 {
		ts.Add("a", 0, "x", env, false, false)
	}
	ts.mu.Lock()
	n, o := len(ts.tasks), len(ts.order)
	ts.mu.Unlock()
	if n > maxRefusedTasks || o > maxRefusedTasks {
		t.Errorf("%d tasks (%d ids) kept, want at most %d", n, o, maxRefusedTasks)
	}
}

// FuzzTaskRequest feeds tools/call params to TaskRequest, which reads the
// caller's task request: it never panics, and a ttl it returns is never
// negative.
func FuzzTaskRequest(f *testing.F) {
	for _, s := range []string{
		`{"name":"t","arguments":{},"task":{"ttl":60000}}`,
		`{"name":"t","task":{}}`,
		`{"name":"t","task":null}`,
		`{"name":"t","task":[1]}`,
		`{"name":"t","task":{"ttl":-5}}`,
		`{"name":"t","task":{"ttl":1e300}}`,
		`{"name":"t","task":{"ttl":"60000"}}`,
		`{"task":{"ttl":60000},"task":{}}`,
		`{"name":"t","TASK":{"ttl":60000}}`,
		`{"name":"t","\u0074ask":{"ttl":60000}}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		ttl, ok := TaskRequest(params)
		if ttl < 0 || ttl > maxRefusedTaskTTL.Milliseconds() || (!ok && ttl != 0) {
			t.Fatalf("TaskRequest(%q) = %d, %v", params, ttl, ok)
		}
		// A server reads the member "task" only, spelled so (escapes aside).
		var exact map[string]json.RawMessage
		if ok && (json.Unmarshal(params, &exact) != nil || exact["task"] == nil) {
			t.Fatalf("TaskRequest(%q) found a task where a server finds none", params)
		}
	})
}
