package bucketing

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on the headers an Upstream excerpt keeps.
const (
	// MaxExcerptHeaders is the most headers an excerpt keeps; past it, the
	// first by name win.
	MaxExcerptHeaders = 32
	// MaxExcerptHeaderValue is the most bytes of one header's value an
	// excerpt keeps, several values being joined with ", " first.
	MaxExcerptHeaderValue = 256
)

// Excerpt describes upstream's answer for the envelope: its status, the
// start of its body and its useful headers. It returns nil when status is 0
// (upstream never answered).
//
// The body is cut to at most MaxExcerpt bytes at a UTF-8 boundary, with each
// invalid byte replaced by U+FFFD; Truncated is set when anything was cut,
// or when bodyComplete is false (body is only the start of upstream's body).
//
// Only headers that help a caller or an operator are kept: Content-Type,
// Retry-After, WWW-Authenticate, rate-limit headers (RateLimit*,
// X-RateLimit-*, X-Rate-Limit-*), request, trace and correlation ids
// (X-Request-Id, X-Amzn-RequestId, X-Amz-Request-Id, Traceparent, Cf-Ray and
// the like) and upstream error types (X-Amzn-ErrorType, X-Ms-Error-Code).
// Whatever their shape, names that speak of cookies, authorization,
// sessions, secrets, passwords, credentials, keys, signatures or tokens
// (rate-limit token counts aside) are dropped.
func Excerpt(status int, header http.Header, body []byte, bodyComplete bool) *Upstream {
	if status == 0 {
		return nil
	}
	text, cut := validPrefix(body, MaxExcerpt)
	return &Upstream{
		Status:    status,
		Body:      text,
		Truncated: cut || !bodyComplete,
		Headers:   usefulHeaders(header),
	}
}

var replacement = []byte(string(utf8.RuneError))

// validPrefix returns the longest start of b, with invalid bytes replaced by
// U+FFFD, that fits in max bytes without splitting a character, and whether
// that left part of b out. A character cut short at the very end of b counts
// as left out, not as invalid.
func validPrefix(b []byte, max int) (string, bool) {
	if len(b) <= max && utf8.Valid(b) {
		return string(b), false
	}
	var s strings.Builder
	s.Grow(min(len(b), max))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		chunk := b[i : i+size]
		if r == utf8.RuneError && size == 1 {
			if !utf8.FullRune(b[i:]) {
				return s.String(), true // a character cut short at the end
			}
			chunk = replacement
		}
		if s.Len()+len(chunk) > max {
			return s.String(), true
		}
		s.Write(chunk)
		i += size
	}
	return s.String(), false
}

// usefulHeaders returns the headers Excerpt keeps, or nil when none.
func usefulHeaders(h http.Header) map[string]string {
	var names []string
	for name := range h {
		if keepHeader(strings.ToLower(name)) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.SortFunc(names, func(a, b string) int {
		return strings.Compare(textproto.CanonicalMIMEHeaderKey(a), textproto.CanonicalMIMEHeaderKey(b))
	})
	out := make(map[string]string, min(len(names), MaxExcerptHeaders))
	for _, name := range names {
		if len(out) == MaxExcerptHeaders {
			break
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		v, _ := validPrefix([]byte(strings.Join(h[name], ", ")), MaxExcerptHeaderValue)
		if prev, ok := out[key]; ok { // two spellings of one name
			v, _ = validPrefix([]byte(prev+", "+v), MaxExcerptHeaderValue)
		}
		out[key] = v
	}
	return out
}

// keepHeader reports whether Excerpt keeps a header; name is lower case.
func keepHeader(name string) bool {
	rateLimit := strings.HasPrefix(name, "ratelimit") ||
		strings.HasPrefix(name, "x-ratelimit") ||
		strings.HasPrefix(name, "x-rate-limit")
	for _, bad := range [...]string{"cookie", "authorization", "session", "secret", "password",
		"passwd", "credential", "api-key", "apikey", "signature", "csrf", "xsrf"} {
		if strings.Contains(name, bad) {
			return false
		}
	}
	if strings.Contains(name, "token") && !rateLimit {
		return false
	}
	switch name {
	case "content-type", "retry-after", "www-authenticate", "traceparent", "cf-ray",
		"x-cloud-trace-context", "x-amzn-errortype", "x-ms-error-code":
		return true
	}
	return rateLimit ||
		strings.HasSuffix(name, "request-id") ||
		strings.HasSuffix(name, "requestid") ||
		strings.HasSuffix(name, "trace-id") ||
		strings.HasSuffix(name, "correlation-id")
}
