package bucketing

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonenc"
)

// Refusal returns the envelope of a call toolgate refused before it reached
// upstream: OK false, the error's class ClassOf(code), Retryable false and
// no Upstream. reason is a Reason word such as unknown_field; detail is one
// sentence that never holds a rejected value. violations may be nil. A code
// of CodeNone or CodeOK, which cannot refuse, becomes CodeUnknown.
func Refusal(code Code, reason, detail string, violations []Violation) Envelope {
	if code == CodeNone || code == CodeOK {
		code = CodeUnknown
	}
	return Envelope{Error: &Error{
		Code:       code,
		Class:      ClassOf(code),
		Reason:     reason,
		Detail:     detail,
		Violations: violations,
	}}
}

// Envelope returns the envelope of a forwarded call. When r is OK, it holds
// data, upstream's answer (see Envelope.Data; Marshal turns a body that is
// not JSON into a string). Otherwise it holds an error filled from r, with up
// (from Excerpt, nil when upstream never answered) as its Upstream, and data
// is dropped.
func (r Result) Envelope(up *Upstream, data json.RawMessage) Envelope {
	if r.OK() {
		return Envelope{OK: true, Data: data}
	}
	e := &Error{
		Code:      r.Code,
		Class:     r.Class,
		Reason:    r.Reason,
		Detail:    r.Detail,
		Retryable: r.Retryable,
		Upstream:  up,
	}
	if r.RetryAfterMS != nil {
		ms := *r.RetryAfterMS
		e.RetryAfterMS = &ms
	}
	return Envelope{Error: e}
}

// TextData returns text as a JSON string, for an Envelope's Data when
// upstream's answer is text rather than JSON. Invalid UTF-8 is replaced by
// U+FFFD; <, > and & are not escaped.
func TextData(text []byte) json.RawMessage {
	var buf bytes.Buffer
	writeString(&buf, text)
	return buf.Bytes()
}

// Marshal encodes the envelope as compact JSON followed by a newline, with
// no HTML escaping (<, > and & stay as they are). It always gives all three
// members, and it holds to the envelope's shape whatever e holds:
//
//   - when OK is true, error is null and data is Data compacted, or null
//     when Data is empty or only spaces, or a JSON string holding Data
//     (TextData) when Data is not valid JSON; invalid UTF-8 is replaced by
//     U+FFFD;
//   - when OK is false, data is null and error is Error, with violations
//     [] rather than null; a nil Error encodes as null.
func (e Envelope) Marshal() []byte {
	if e.OK {
		// One allocation, the answer's own: the data is compacted into
		// it in place.
		out := make([]byte, 0, len(e.Data)+48)
		out = append(out, `{"ok":true,"data":`...)
		out = appendData(out, e.Data)
		return append(out, `,"error":null}`+"\n"...)
	}
	var buf bytes.Buffer
	buf.WriteString(`{"ok":false,"data":null,"error":`)
	if e.Error == nil {
		buf.WriteString("null}\n")
		return buf.Bytes()
	}
	er := *e.Error
	if er.Violations == nil {
		er.Violations = []Violation{}
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&er); err != nil {
		// Unreachable: Error holds only strings, numbers, booleans and
		// maps of strings, which always encode.
		return []byte(`{"ok":false,"data":null,"error":{"code":"unknown","class":"terminal",` +
			`"reason":"encoding","detail":"toolgate could not encode the error","violations":[],` +
			`"retryable":false,"retry_after_ms":null,"upstream":null}}` + "\n")
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteString("}\n")
	return buf.Bytes()
}

// appendData appends data as Marshal describes it.
func appendData(out, data []byte) []byte {
	if len(bytes.TrimSpace(data)) == 0 {
		return append(out, "null"...)
	}
	if !utf8.Valid(data) {
		data = bytes.ToValidUTF8(data, replacement)
	}
	if compact, ok := jsonenc.AppendCompact(out, data); ok {
		return compact
	}
	var buf bytes.Buffer
	writeString(&buf, data)
	return append(out, buf.Bytes()...)
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(buf *bytes.Buffer, s []byte) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(s)) // a string always encodes
	buf.Truncate(buf.Len() - 1)
}
