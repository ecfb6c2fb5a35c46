// Package testutil holds small helpers that tests of several packages
// share. Only tests import it.
package testutil

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
)

// SyncBuffer is a bytes.Buffer that one goroutine (a logger, a child
// process, the code under test) may write while the test reads it. The
// zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// DecodeArgs decodes fuzz input as a call's arguments, as the sidecar
// decodes a JSON body (numbers as json.Number); ok is false when data is
// not one JSON object.
func DecodeArgs(data []byte) (args map[string]any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, false
	}
	return args, true
}

// JSONEqual reports whether a and b are JSON documents of equal value
// (object member order and spacing aside); false when either is not JSON.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
