package h1serve

import (
	"bufio"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// smallHeader is how many names a header may have for writeHeaderLines
// to sort them on the stack; a larger one goes to http.Header.WriteSubset.
const smallHeader = 16

// writeHeaderLines writes h's lines, but for the names in exclude, as
// http.Header.WriteSubset writes them: names in sorted order, a name that
// is not a valid field name dropped, each value with its CR and LF turned
// into spaces and then trimmed. It does so without WriteSubset's pooled
// sorter and its sort.Interface, for the handful of names an answer has
// (TestHeaderLinesAsNetHTTP holds the two to the same bytes).
func writeHeaderLines(bw *bufio.Writer, h http.Header, exclude map[string]bool) {
	if len(h) > smallHeader {
		h.WriteSubset(bw, exclude)
		return
	}
	var arr [smallHeader]string
	keys := arr[:0]
	for k := range h {
		if !exclude[k] {
			keys = append(keys, k)
		}
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range h[k] {
			if strings.ContainsAny(v, "\r\n") {
				v = newlineToSpace.Replace(v)
			}
			bw.WriteString(k)
			bw.Write(colonSpace)
			bw.WriteString(textproto.TrimString(v))
			bw.Write(crlf)
		}
	}
}

// newlineToSpace is net/http's headerNewlineToSpace.
var newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// dates is the Date value of every answer h1serve writes.
var dates dateCache

// dateCache holds the Date header's value for the current second: every
// answer of that second has the same, so it is formatted once a second
// rather than once an answer.
type dateCache struct {
	cur atomic.Pointer[dateValue]
}

type dateValue struct {
	sec  int64
	text []byte // read-only once stored
}

// appendNow appends now's Date value (http.TimeFormat, UTC) to b.
func (c *dateCache) appendNow(b []byte) []byte {
	now := time.Now()
	sec := now.Unix()
	if d := c.cur.Load(); d != nil && d.sec == sec {
		return append(b, d.text...)
	}
	d := &dateValue{sec: sec, text: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	c.cur.Store(d)
	return append(b, d.text...)
}
