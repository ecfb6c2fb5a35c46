package sink

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A journal's record holds its events as a spool writes them, fields at
// their zero value left out (newRecordEncoder); the File behind it writes
// every field. Shipping a segment to the File decoded each event and
// encoded it again: about 4% of a checked call's CPU (docs/performance.md,
// "Issue 45, tenth pass"). appendFullLine writes the File's line from the
// record's line in one pass instead, copying each value as it stands and
// writing the zero value of each field the record left out.
//
// It copies only what it can prove appendEvent would write the same way
// after decodeEvent read it: keys in Event's order, each once; strings
// without escapes, control characters, bytes that are not UTF-8, U+2028
// or U+2029; integers as strconv writes them; the time as
// Time.AppendText writes it. Any other line gets false, and the caller
// decodes and encodes it as before. FuzzAppendFullLine holds it to
// encode(decode(line)) on every input.

// fullField is one field of the File's line, in appendEvent's order.
type fullField struct {
	key       string // the key and its colon: `"tool":`
	kind      byte   // 's' string, 'i' integer, 'b' bool, 'l' list of strings, 't' time
	omitEmpty bool   // left out when empty, in either form (arg_shape)
	always    bool   // written in either form (event_id, time): a line without it is declined
}

// fullFields are appendEvent's fields, read from its own output once: the
// zero Event's full line gives each field's key, order and zero value, and
// a line with every omitempty field set gives those. fullZeros holds, for
// the fields in order, what the full line has for each at its zero value
// (`,"tool":""` and so on; nothing for an omitempty field), field i's
// starting at zeroAt[i]: the zeros of the fields a record leaves out
// between two it holds are one piece of it.
var fullFields, fullZeros, zeroAt = readFullFields()

func readFullFields() ([]fullField, string, []int) {
	zero, err := appendEvent(nil, &Event{}, false)
	if err != nil {
		panic(err)
	}
	set, err := appendEvent(nil, &Event{ArgShape: "x"}, false)
	if err != nil {
		panic(err)
	}
	zeros := map[string]string{}
	for _, kv := range splitFields(zero) {
		zeros[kv[0]] = kv[1]
	}
	var (
		fields []fullField
		all    strings.Builder
		at     []int
	)
	for i, kv := range splitFields(set) {
		f := fullField{key: kv[0] + ":", always: i < 2}
		z, ok := zeros[kv[0]]
		f.omitEmpty = !ok
		switch {
		case kv[0] == `"time"`:
			f.kind = 't'
		case f.omitEmpty || z[0] == '"':
			f.kind = 's'
		case z == "false":
			f.kind = 'b'
		case z == "null":
			f.kind = 'l'
		default:
			f.kind = 'i'
		}
		at = append(at, all.Len())
		if !f.omitEmpty && !f.always {
			all.WriteString("," + f.key + z)
		}
		fields = append(fields, f)
	}
	return fields, all.String(), append(at, all.Len())
}

// splitFields cuts one of appendEvent's lines, whose values hold no commas,
// into its keys and values.
func splitFields(line []byte) [][2]string {
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("}"))[1:]
	var out [][2]string
	for part := range bytes.SplitSeq(line, []byte(",")) {
		k, v, _ := bytes.Cut(part, []byte(":"))
		out = append(out, [2]string{string(k), string(v)})
	}
	return out
}

// appendFullLine appends to dst the line File writes for the event of
// line, one line of a record (its line break included or not), and
// returns the event's id as it stands in line. It reports false, with dst
// as given, for any line it cannot prove it copies as decoding and
// encoding again would.
//
// The line's bytes are copied in runs: from the start, or from the comma
// before a field held after fields left out, up to the comma before the
// next field left out; the zeros of those fields go between.
func appendFullLine(dst, line []byte, memo *timeMemo) ([]byte, []byte, bool) {
	n0 := len(dst)
	d := eventDecoder{b: line}
	var id []byte
	if !d.next('{') {
		return dst[:n0], nil, false
	}
	fi, run := 0, 0 // the next field the line may hold; where the run to copy starts
	for first := true; ; first = false {
		comma := d.i
		if !first && !d.next(',') {
			break
		}
		rest := line[d.i:]
		at := fi
		for at < len(fullFields) && !bytes.HasPrefix(rest, []byte(fullFields[at].key)) {
			if fullFields[at].always {
				return dst[:n0], nil, false
			}
			at++
		}
		if at == len(fullFields) {
			return dst[:n0], nil, false // unknown, out of order, twice, or not a key
		}
		f := &fullFields[at]
		if at > fi { // fields left out before this one
			dst = append(append(dst, line[run:comma]...), fullZeros[zeroAt[fi]:zeroAt[at]]...)
			run = comma
		}
		fi = at + 1
		d.i += len(f.key)
		vs := d.i
		if !d.canonical(f.kind, memo) {
			return dst[:n0], nil, false
		}
		if f.omitEmpty && d.i-vs == 2 { // "": appendEvent leaves it out
			dst = append(dst, line[run:comma]...)
			run = d.i
		}
		if at == 0 {
			id = line[vs+1 : d.i-1]
		}
	}
	end := d.i
	if !d.next('}') || (d.i != len(line) && !(d.i == len(line)-1 && line[d.i] == '\n')) {
		return dst[:n0], nil, false
	}
	if fi < 2 {
		return dst[:n0], nil, false // no time
	}
	dst = append(append(dst, line[run:end]...), fullZeros[zeroAt[fi]:]...)
	return append(dst, '}', '\n'), id, true
}

// canonical reads a value of the kind given, reporting whether it is
// written as appendEvent writes what decodeEvent reads from it. memo, if
// not nil, remembers the last time found so.
func (d *eventDecoder) canonical(kind byte, memo *timeMemo) bool {
	switch kind {
	case 's':
		return d.canonicalString()
	case 't':
		raw, ok := d.plain()
		return ok && memo.canonical(raw)
	case 'i':
		return d.canonicalInt()
	case 'b':
		var v bool
		return d.bool(&v)
	case 'l':
		if rest := d.b[d.i:]; len(rest) >= 4 && string(rest[:4]) == "null" {
			d.i += 4
			return true
		}
		if !d.next('[') {
			return false
		}
		if d.next(']') {
			return true
		}
		for {
			if !d.canonicalString() {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next(']')
		}
	}
	return false
}

// canonicalInt reads an integer as strconv.AppendInt writes one: no
// leading zero, no "-0", and within 64 bits.
func (d *eventDecoder) canonicalInt() bool {
	start := d.i
	d.next('-')
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	switch {
	case n == 0, d.b[digits] == '0' && (n > 1 || digits > start):
		return false
	case d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E'):
		return false
	case n < 19: // fits
		return true
	}
	_, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	return err == nil
}

// timeMemo remembers the second and the zone of the last time found
// canonical: a segment's events were written within a second or so of
// one another, so most of their times need only their fraction looked at.
type timeMemo struct {
	second string // "2026-12-03T03:04:05"
	zone   string // "Z", "+01:00"
}

// canonical reports whether raw is a time as Time.AppendText writes the
// one Time.UnmarshalText reads from it.
func (m *timeMemo) canonical(raw []byte) bool {
	if m.known(raw) {
		return true
	}
	var t time.Time
	if t.UnmarshalText(raw) != nil {
		return false
	}
	var buf [64]byte
	out, err := t.AppendText(buf[:0])
	if err != nil || string(out) != string(raw) {
		return false
	}
	if m != nil && len(raw) > memoSecond && m.second != string(raw[:memoSecond]) {
		zone := raw[memoSecond:]
		if zone[0] == '.' {
			zone = zone[1+bytes.IndexFunc(zone[1:], func(r rune) bool { return r < '0' || r > '9' }):]
		}
		m.second, m.zone = string(raw[:memoSecond]), string(zone)
	}
	return true
}

// memoSecond is how long a time's second is: "2006-01-02T15:04:05".
const memoSecond = len("2006-01-02T15:04:05")

// known reports whether raw is the remembered second, a fraction of it as
// AppendText writes one (one to nine digits, the last not 0) or none, and
// the remembered zone.
func (m *timeMemo) known(raw []byte) bool {
	if m == nil || m.second == "" || len(raw) <= memoSecond || string(raw[:memoSecond]) != m.second {
		return false
	}
	rest := raw[memoSecond:]
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && i <= 9 && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 || rest[i-1] == '0' {
			return false
		}
		rest = rest[i:]
	}
	return string(rest) == m.zone
}

// canonicalString reads a string that jsonenc.AppendString writes as it
// stands: no escapes, no control characters, UTF-8 without U+2028 and
// U+2029.
func (d *eventDecoder) canonicalString() bool {
	if !d.next('"') {
		return false
	}
	b := d.b
	for d.i < len(b) {
		if c := b[d.i]; asIs[c] {
			d.i++
			continue
		}
		switch c := b[d.i]; {
		case c == '"':
			d.i++
			return true
		case c < utf8.RuneSelf:
			return false // a control character or a backslash
		default:
			r, size := utf8.DecodeRune(b[d.i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return false // U+FFFD itself is fine, but not worth telling from a bad byte here
			}
			d.i += size
		}
	}
	return false
}

// asIs are the bytes AppendString writes as they are and that end nothing:
// ASCII from space on, but for the quote and the backslash.
var asIs = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
