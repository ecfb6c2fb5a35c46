package sink

import (
	"strconv"
	"unicode/utf8"
)

// The event decoding's fast path, the reverse of appendEvent: a spool
// segment is read back and decoded when it ships from its file, and
// encoding/json took 3 to 5 µs an event for it, this 0.6 to 0.75 µs
// (BenchmarkDecodeEvent), and less where the strings it gives are cut from
// one string of the whole segment rather than allocated one by one.
// decodeEvent reads what appendEvent writes, and nothing else: any line
// it does not take whole goes to encoding/json, whose reading is the one
// that counts. FuzzDecodeEvent holds the two to the same Event for every
// line decodeEvent takes, and TestDecodeEventTakesEveryField to taking
// every field appendEvent writes.

// decodeEvent reads one line of appendEvent's output (either form, with
// or without its line break) into e, which must be the zero Event, and
// reports whether it did. It reports false, having perhaps set some of
// e's fields, for anything appendEvent does not write: spacing, a key of
// another spelling or case, null (but for a list), a number that is not an integer or does
// not fit, an escaped surrogate, bytes that are not UTF-8, or a time with
// an escape in it. The caller then zeroes e and decodes the line with
// encoding/json.
//
// text is "" or holds the same bytes as line: then a string without
// escapes in the line is cut from text, not copied, and e keeps text in
// memory for as long as it keeps any of those strings.
func decodeEvent(line []byte, text string, e *Event) bool {
	d := eventDecoder{b: line, text: text}
	if !d.next('{') {
		return false
	}
	if !d.next('}') {
		for {
			key, ok := d.key()
			if !ok || !d.field(key, e) {
				return false
			}
			if d.next(',') {
				continue
			}
			if !d.next('}') {
				return false
			}
			break
		}
	}
	rest := d.b[d.i:]
	return len(rest) == 0 || (len(rest) == 1 && rest[0] == '\n')
}

// eventDecoder reads b from i on.
type eventDecoder struct {
	b    []byte
	text string // "" or b's bytes, to cut strings from
	i    int
	buf  []byte // a string's bytes, when it has escapes
}

// next consumes c if it comes next.
func (d *eventDecoder) next(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// key reads a key without escapes and the colon after it.
func (d *eventDecoder) key() ([]byte, bool) {
	raw, ok := d.plain()
	return raw, ok && d.next(':')
}

// plain reads a string without escapes and returns its bytes, in b.
func (d *eventDecoder) plain() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start : d.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// field reads the value of key into e.
func (d *eventDecoder) field(key []byte, e *Event) bool {
	switch string(key) { // no allocation: the compiler compares the bytes
	case "event_id":
		return d.str(&e.EventID)
	case "time":
		raw, ok := d.plain()
		return ok && e.Time.UnmarshalText(raw) == nil // what Time.UnmarshalJSON does with the quotes off
	case "sidecar":
		return d.str(&e.Sidecar)
	case "listener":
		return d.str(&e.Listener)
	case "tool":
		return d.str(&e.Tool)
	case "agent":
		return d.str(&e.Agent)
	case "session":
		return d.str(&e.Session)
	case "trace_id":
		return d.str(&e.TraceID)
	case "method":
		return d.str(&e.Method)
	case "host":
		return d.str(&e.Host)
	case "path_template":
		return d.str(&e.PathTemplate)
	case "upstream_status":
		v, ok := d.int(strconv.IntSize)
		e.UpstreamStatus = int(v)
		return ok
	case "ok":
		return d.bool(&e.OK)
	case "error_code":
		return d.str(&e.ErrorCode)
	case "error_class":
		return d.str(&e.ErrorClass)
	case "reason":
		return d.str(&e.Reason)
	case "detail":
		return d.str(&e.Detail)
	case "violation_paths":
		return d.strs(&e.ViolationPaths)
	case "envelope":
		return d.bool(&e.Envelope)
	case "refused":
		return d.bool(&e.Refused)
	case "retry_after_ms":
		return d.int64(&e.RetryAfterMS)
	case "total_us":
		return d.int64(&e.TotalUS)
	case "upstream_us":
		return d.int64(&e.UpstreamUS)
	case "request_bytes":
		return d.int64(&e.RequestBytes)
	case "response_bytes":
		return d.int64(&e.ResponseBytes)
	case "config_version":
		return d.str(&e.ConfigVersion)
	case "policy_version":
		return d.str(&e.PolicyVersion)
	case "dry_run_denied":
		return d.bool(&e.DryRunDenied)
	case "dry_run_violations":
		return d.strs(&e.DryRunViolations)
	case "policy_error":
		return d.str(&e.PolicyError)
	case "mcp_server":
		return d.str(&e.MCPServer)
	case "rpc_method":
		return d.str(&e.RPCMethod)
	case "rpc_id":
		return d.str(&e.RPCID)
	case "inspected":
		return d.bool(&e.Inspected)
	case "outcome":
		return d.str(&e.Outcome)
	case "mcp_protocol":
		return d.str(&e.MCPProtocol)
	case "approval":
		return d.str(&e.Approval)
	case "budget":
		return d.str(&e.Budget)
	case "limit_scope":
		return d.str(&e.LimitScope)
	case "answer":
		return d.str(&e.Answer)
	case "answer_findings":
		return d.strs(&e.AnswerFindings)
	case "redactions":
		return d.int64(&e.Redactions)
	case "definition_changes":
		return d.strs(&e.DefinitionChanges)
	case "arg_shape":
		return d.str(&e.ArgShape)
	}
	return false
}

// str reads a string into v.
func (d *eventDecoder) str(v *string) bool {
	if !d.next('"') {
		return false
	}
	start, ascii := d.i, true
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			raw := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(raw) {
				return false // encoding/json puts U+FFFD in; leave it to it
			}
			if d.text != "" {
				*v = d.text[start : d.i-1]
			} else {
				*v = string(raw)
			}
			return true
		case c == '\\':
			return d.escaped(start, v)
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return false
}

// escaped reads the rest of a string from its first escape at d.i, the
// string's bytes having begun at start.
func (d *eventDecoder) escaped(start int, v *string) bool {
	out := append(d.buf[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			d.buf = out
			if !utf8.Valid(out) {
				return false
			}
			*v = string(out)
			return true
		case c < 0x20:
			return false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return false
		}
		d.i += 2
		switch d.b[d.i-1] {
		case '"', '\\', '/':
			out = append(out, d.b[d.i-1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if d.i+4 > len(d.b) {
				return false
			}
			r, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return false // a surrogate: encoding/json pairs them up, or puts U+FFFD in
			}
			d.i += 4
			out = utf8.AppendRune(out, rune(r))
		default:
			return false
		}
	}
	return false
}

// strs reads an array of strings into v: an empty array is an empty
// slice and null is nil, as encoding/json makes them (appendEvent's full
// form writes a nil slice as null).
func (d *eventDecoder) strs(v *[]string) bool {
	if rest := d.b[d.i:]; len(rest) >= 4 && string(rest[:4]) == "null" {
		*v, d.i = nil, d.i+4
		return true
	}
	if !d.next('[') {
		return false
	}
	out := []string{}
	if d.next(']') {
		*v = out
		return true
	}
	for {
		var s string
		if !d.str(&s) {
			return false
		}
		out = append(out, s)
		if d.next(',') {
			continue
		}
		if !d.next(']') {
			return false
		}
		*v = out
		return true
	}
}

// int reads an integer that fits in bits.
func (d *eventDecoder) int(bits int) (int64, bool) {
	start := d.i
	d.next('-')
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	switch {
	case d.i == digits,
		d.b[digits] == '0' && d.i-digits > 1, // a leading zero: not JSON
		d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E'):
		return 0, false
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, bits)
	return v, err == nil
}

// int64 reads an integer into v.
func (d *eventDecoder) int64(v *int64) bool {
	n, ok := d.int(64)
	*v = n
	return ok
}

// bool reads true or false into v.
func (d *eventDecoder) bool(v *bool) bool {
	switch rest := d.b[d.i:]; {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		*v, d.i = true, d.i+4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		*v, d.i = false, d.i+5
	default:
		return false
	}
	return true
}
