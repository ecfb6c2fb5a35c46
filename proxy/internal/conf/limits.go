package conf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// Bounds on what a caller may hold. Every listener's connections are
// capped (listen.NewCapListener), each request's headers and body must arrive in
// time (limits.read_header_timeout, limits.body_timeout, set per request by
// listen.BodyDeadline), and caller-identifying values are cut to a bounded length
// before events or policies see them (BoundCallerID).

// IsTimeout reports whether err is a deadline passing.
func IsTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// BodyTimeoutRefusal refuses a call whose body did not arrive in time;
// who is "Tool 'name'" or "Call to host".
func BodyTimeoutRefusal(who string, d time.Duration) *Refusal {
	return Refuse(bucketing.CodeValidation, bucketing.ReasonBodyTimeout,
		fmt.Sprintf("%s got a body that did not arrive within %s (limits.body_timeout)", who, d), nil)
}

// UnreadQuery refuses a query string on a checked tool whose args do not
// include query: its keys would reach upstream (a Go FormValue, Flask's
// request.values) unchecked. Each key is a violation; values never appear.
func UnreadQuery(tool, raw string) *Refusal {
	q, _ := url.ParseQuery(raw)
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > MaxDuplicateViolations {
		keys = keys[:MaxDuplicateViolations]
	}
	vs := make([]policies.Violation, len(keys))
	for i, k := range keys {
		vs[i] = policies.Violation{Path: "/" + EscapePointer(k), Reason: bucketing.ReasonUnknownField,
			Message: "query argument this tool does not read", Expected: "absent"}
	}
	return Refuse(bucketing.CodeValidation, bucketing.ReasonUnknownField,
		fmt.Sprintf("Tool '%s' reads no arguments from the query string, and got one", tool), vs)
}

// truncatedMark ends a caller-identifying value that was cut.
const truncatedMark = "...[truncated]"

// BoundCallerID cuts v to at most max bytes, at a UTF-8 boundary, and marks
// the cut, so an agent or session header cannot make events or policy
// input large. A cut value never equals an uncut one.
func BoundCallerID(v string, max int) string {
	if max <= 0 || len(v) <= max {
		return v
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + truncatedMark
}

// CallerBody is a caller's body streamed upstream unread; it keeps the
// first read error, so a failed exchange can be told apart from a caller
// whose body stalled or broke.
type CallerBody struct {
	Body io.ReadCloser
	mu   sync.Mutex
	err  error
}

func (b *CallerBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *CallerBody) Close() error { return b.Body.Close() }

// Failed returns the first read error, or nil.
func (b *CallerBody) Failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}
