package bucketing

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfterMS is the largest RetryAfterMS Classify reports, 2^53-1: the
// largest integer every JSON reader keeps exact. Larger values are clamped.
const MaxRetryAfterMS = 1<<53 - 1

// ParseRetryAfter parses a Retry-After header value (RFC 9110, section
// 10.2.3) into milliseconds from now. The value is either delay-seconds, a
// non-negative integer, or an HTTP-date in any of the three formats
// http.ParseTime accepts; surrounding spaces are ignored. A date in the past
// gives 0, a date in the future is rounded up to the millisecond, and
// anything above MaxRetryAfterMS is clamped to it. ok is false when v is
// neither.
func ParseRetryAfter(v string, now time.Time) (ms int64, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const maxSeconds = MaxRetryAfterMS / 1000
		var s int64
		for i := 0; i < len(v); i++ {
			s = s*10 + int64(v[i]-'0')
			if s > maxSeconds {
				return MaxRetryAfterMS, true
			}
		}
		return s * 1000, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d <= 0:
		return 0, true
	case d == time.Duration(math.MaxInt64): // Sub saturated: centuries away
		ms = t.UnixMilli() - now.UnixMilli()
	default:
		ms = int64(d / time.Millisecond)
		if d%time.Millisecond != 0 {
			ms++
		}
	}
	return min(ms, MaxRetryAfterMS), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
