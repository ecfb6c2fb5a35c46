package sink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes is the longest line ReadEvents accepts: 1 MiB, without the
// line break.
const MaxLineBytes = 1 << 20

// ReadEvents parses NDJSON events, as File writes them, until r's end. Each
// non-blank line must hold one JSON object that decodes into an Event;
// fields Event does not know are ignored. Blank lines are skipped. An error
// names the first bad line by number (from 1); a line longer than
// MaxLineBytes gives an error wrapping ErrLineTooLong.
func ReadEvents(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	// One more byte than the limit, so that a line of exactly MaxLineBytes
	// still fits with its line break.
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes+1)
	var events []Event
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) > MaxLineBytes {
			return nil, fmt.Errorf("sink: read events: line %d: %w", line, ErrLineTooLong)
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			return nil, fmt.Errorf("sink: read events: line %d: not a JSON object", line)
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("sink: read events: line %d: %w", line, err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("sink: read events: line %d: %w", line+1, ErrLineTooLong)
		}
		return nil, fmt.Errorf("sink: read events: after line %d: %w", line, err)
	}
	return events, nil
}
