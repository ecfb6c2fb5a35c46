package jsonenc

// AppendCompact appends src to dst with its insignificant space elided, the
// bytes json.Compact writes for it, when src is one valid JSON text (what
// json.Valid accepts, its nesting bound included), and reports whether it
// was; when it was not, dst is returned as it came. Like json.Compact it
// escapes nothing and does not look at UTF-8.
//
// It reads src once, a byte at a time in plain loops, where json.Compact
// runs encoding/json's scanner, a function call for every byte: upstream's
// answer is compacted into every envelope, and that call was 2% of a
// checked call's CPU (docs/performance.md). FuzzAppendCompact holds it to
// json.Compact on every input.
func AppendCompact(dst, src []byte) ([]byte, bool) {
	c := compactor{src: src, dst: dst}
	if !c.value() {
		return dst, false
	}
	c.space()
	if c.i != len(src) {
		return dst, false
	}
	return append(c.dst, src[c.start:]...), true
}

// maxNesting is encoding/json's bound on nested arrays and objects: a
// deeper text is not valid.
const maxNesting = 10000

// compactor reads a JSON text and copies it without the space between its
// tokens: src[start:i] is what is read and not copied yet.
type compactor struct {
	src, dst        []byte
	i, start, depth int
}

// space moves past any space at i, copying what came before it.
func (c *compactor) space() {
	j := c.i
	for j < len(c.src) {
		switch c.src[j] {
		case ' ', '\t', '\n', '\r':
			j++
			continue
		}
		break
	}
	if j > c.i {
		c.dst = append(c.dst, c.src[c.start:c.i]...)
		c.i, c.start = j, j
	}
}

// next is the byte at i after any space, and false when the text ends
// there.
func (c *compactor) next() (byte, bool) {
	c.space()
	if c.i >= len(c.src) {
		return 0, false
	}
	return c.src[c.i], true
}

func (c *compactor) value() bool {
	b, ok := c.next()
	if !ok {
		return false
	}
	switch b {
	case '{':
		return c.object()
	case '[':
		return c.array()
	case '"':
		return c.str()
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.literal("null")
	}
	return c.number()
}

func (c *compactor) literal(w string) bool {
	if len(c.src)-c.i < len(w) || string(c.src[c.i:c.i+len(w)]) != w {
		return false
	}
	c.i += len(w)
	return true
}

// digits moves past the digits at i, of which there must be one.
func (c *compactor) digits() bool {
	j := c.i
	for j < len(c.src) && c.src[j] >= '0' && c.src[j] <= '9' {
		j++
	}
	ok := j > c.i
	c.i = j
	return ok
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func (c *compactor) number() bool {
	if c.src[c.i] == '-' {
		c.i++
	}
	if c.i < len(c.src) && c.src[c.i] == '0' {
		c.i++
	} else if !c.digits() {
		return false
	}
	if c.i < len(c.src) && c.src[c.i] == '.' {
		c.i++
		if !c.digits() {
			return false
		}
	}
	if c.i < len(c.src) && (c.src[c.i] == 'e' || c.src[c.i] == 'E') {
		c.i++
		if c.i < len(c.src) && (c.src[c.i] == '+' || c.src[c.i] == '-') {
			c.i++
		}
		return c.digits()
	}
	return true
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b|0x20 >= 'a' && b|0x20 <= 'f'
}

// str reads a string at i (its opening quote).
func (c *compactor) str() bool {
	s := c.src
	for i := c.i + 1; i < len(s); {
		b := s[i]
		switch {
		case b == '"':
			c.i = i + 1
			return true
		case b < 0x20:
			return false
		case b != '\\':
			i++
			continue
		}
		if i+1 >= len(s) {
			return false
		}
		switch s[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(s) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
				return false
			}
			i += 6
		default:
			return false
		}
	}
	return false
}

// open enters the object or array at i and reports whether it is empty
// (close comes next); ok is false when it cannot be read or nests too
// deep.
func (c *compactor) open(close byte) (empty, ok bool) {
	if c.depth++; c.depth > maxNesting {
		return false, false
	}
	c.i++ // { or [
	b, ok := c.next()
	if !ok {
		return false, false
	}
	if b == close {
		c.i++
		c.depth--
		return true, true
	}
	return false, true
}

// more reads what follows a member or an element: more is true after a
// comma, false after close (the object or array then ends); ok is false
// for anything else.
func (c *compactor) more(close byte) (more, ok bool) {
	b, ok := c.next()
	if !ok {
		return false, false
	}
	c.i++
	switch b {
	case ',':
		return true, true
	case close:
		c.depth--
		return false, true
	}
	return false, false
}

func (c *compactor) object() bool {
	if empty, ok := c.open('}'); empty || !ok {
		return ok
	}
	for {
		if b, ok := c.next(); !ok || b != '"' || !c.str() {
			return false
		}
		if b, ok := c.next(); !ok || b != ':' {
			return false
		}
		c.i++
		if !c.value() {
			return false
		}
		if more, ok := c.more('}'); !more {
			return ok
		}
	}
}

func (c *compactor) array() bool {
	if empty, ok := c.open(']'); empty || !ok {
		return ok
	}
	for {
		if !c.value() {
			return false
		}
		if more, ok := c.more(']'); !more {
			return ok
		}
	}
}
