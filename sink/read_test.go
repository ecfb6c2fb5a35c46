package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // event ids
	}{
		{name: "empty", in: "", want: nil},
		{name: "blank lines skipped", in: "\n\n{\"event_id\":\"a\"}\n\n  \t\n{\"event_id\":\"b\"}\n", want: []string{"a", "b"}},
		{name: "no final line break", in: `{"event_id":"a"}`, want: []string{"a"}},
		{name: "CRLF", in: "{\"event_id\":\"a\"}\r\n{\"event_id\":\"b\"}\r\n", want: []string{"a", "b"}},
		{name: "unknown fields ignored", in: `{"event_id":"a","added_later":{"x":[1,2]}}`, want: []string{"a"}},
		{name: "empty object", in: `{}`, want: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, err := ReadEvents(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ReadEvents: %v", err)
			}
			var got []string
			for _, e := range events {
				got = append(got, e.EventID)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("event ids = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadEventsErrors(t *testing.T) {
	good := `{"event_id":"a"}` + "\n"
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "not JSON", in: good + "hello\n", wantErr: "line 2: not a JSON object"},
		{name: "array", in: good + good + "[1,2]\n", wantErr: "line 3: not a JSON object"},
		{name: "null", in: "null\n", wantErr: "line 1: not a JSON object"},
		{name: "number", in: "\n42\n", wantErr: "line 2: not a JSON object"},
		{name: "truncated object", in: good + `{"event_id":"b","tool":` + "\n" + good, wantErr: "line 2: unexpected end of JSON input"},
		{name: "wrong type", in: good + `{"upstream_status":"500"}` + "\n", wantErr: "line 2: json: cannot unmarshal string into Go struct field Event.upstream_status of type int"},
		{name: "bad time", in: `{"time":"yesterday"}`, wantErr: "line 1: parsing time"},
		{name: "two objects on a line", in: good + `{} {}`, wantErr: "line 2: invalid character '{' after top-level value"},
		{name: "too long", in: good + "\n" + `{"detail":"` + strings.Repeat("x", MaxLineBytes) + `"}` + "\n", wantErr: "line 3: sink: line too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, err := ReadEvents(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ReadEvents = %d events, want an error", len(events))
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ReadEvents error = %q, want it to contain %q", err, tt.wantErr)
			}
			if events != nil {
				t.Errorf("ReadEvents returned %d events with its error", len(events))
			}
		})
	}
}

func TestReadEventsLineLimit(t *testing.T) {
	// A line of exactly MaxLineBytes is accepted; one byte more is not.
	line := func(size int) string {
		const head, tail = `{"detail":"`, `"}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	for _, tt := range []struct {
		size    int
		wantErr bool
	}{
		{size: MaxLineBytes, wantErr: false},
		{size: MaxLineBytes + 1, wantErr: true},
	} {
		for _, end := range []string{"\n", ""} {
			events, err := ReadEvents(strings.NewReader(line(tt.size) + end))
			if tt.wantErr {
				if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "line 1:") {
					t.Errorf("size %d, end %q: error = %v, want ErrLineTooLong on line 1", tt.size, end, err)
				}
				continue
			}
			if err != nil || len(events) != 1 {
				t.Errorf("size %d, end %q: %d events, error %v; want 1 event", tt.size, end, len(events), err)
			}
		}
	}
}

func FuzzReadEvents(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "events.ndjson"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte(""))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"event_id":"a","time":"2025-11-21T09:14:05Z","violation_paths":["/x"]}`))
	f.Add([]byte(`{"upstream_status":1e400}`))
	f.Add([]byte("{\"detail\":\"\xff\xfe\"}\r\n[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ReadEvents(bytes.NewReader(data))
		if err != nil {
			if events != nil {
				t.Errorf("ReadEvents returned events with error %v", err)
			}
			return
		}
		// What was read must read back the same after encoding.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for i := range events {
			if err := enc.Encode(&events[i]); err != nil {
				return // e.g. a time zone offset that pushes the year out of range
			}
		}
		again, err := ReadEvents(&buf)
		if err != nil {
			t.Fatalf("re-reading encoded events: %v", err)
		}
		if len(again) != len(events) {
			t.Fatalf("re-read %d events, want %d", len(again), len(events))
		}
	})
}
