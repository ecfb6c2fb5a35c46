package bucketing_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{"2", "0", " 120 ", "99999999999999999999", "Fri, 14 Mar 2025 12:00:05 GMT",
		"Friday, 14-Mar-25 12:01:00 GMT", "Fri Mar 14 12:00:10 2025", "-1", "1.5", "soon", ""} {
		f.Add(v, int64(0))
	}
	f.Fuzz(func(t *testing.T, v string, offset int64) {
		at := now.Add(time.Duration(offset))
		ms, ok := bucketing.ParseRetryAfter(v, at)
		if !ok && ms != 0 {
			t.Errorf("ParseRetryAfter(%q) = %d, false; want 0 when not ok", v, ms)
		}
		if ms < 0 || ms > bucketing.MaxRetryAfterMS {
			t.Errorf("ParseRetryAfter(%q) = %d, out of range", v, ms)
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add(200, []byte(`{"error":{"code":1}}`), "", "error", "", "upstream", "", "2")
	f.Add(200, []byte(`{"error":null}`), "", "error", "", "upstream", "", "")
	f.Add(403, []byte(`{"reason":"rateLimitExceeded"}`), "rateLimitExceeded", "", "", "rate_limit", "", "Fri, 14 Mar 2025 12:00:05 GMT")
	f.Add(404, []byte(""), "", "", "", "ok", "", "")
	f.Add(500, []byte("[1,2"), "", "x", "bogus", "ratelimit", "nope", "-3")
	f.Fuzz(func(t *testing.T, status int, body []byte, contains, field, class, code, reason, retry string) {
		rules := bucketing.Rules{
			{Status: status, BodyContains: contains, JSONField: field,
				Code: bucketing.Code(code), Class: bucketing.Class(class), Reason: reason},
			{JSONField: field, Code: bucketing.CodeUpstream},
			{BodyContains: contains, Code: bucketing.CodeOK},
		}
		_ = rules.Validate()
		o := bucketing.Outcome{Status: status, Header: http.Header{"Retry-After": {retry}}, Body: body}
		r := bucketing.Classify(o, rules, now)
		if r.Retryable != (r.Class == bucketing.ClassTransient) {
			t.Errorf("Retryable = %v with class %q", r.Retryable, r.Class)
		}
		switch r.Code {
		case bucketing.CodeNone:
			if r.Class != bucketing.ClassNone || r.Reason != "" || r.Detail != "" || r.RetryAfterMS != nil {
				t.Errorf("success with class %q, reason %q, detail %q", r.Class, r.Reason, r.Detail)
			}
		case bucketing.CodeValidation, bucketing.CodePolicy, bucketing.CodeRateLimit,
			bucketing.CodeAuth, bucketing.CodeUpstream, bucketing.CodeUnknown:
			if r.Class == bucketing.ClassNone || r.Reason == "" || r.Detail == "" {
				t.Errorf("failure %s with class %q, reason %q, detail %q", r.Code, r.Class, r.Reason, r.Detail)
			}
		default:
			t.Errorf("Classify returned code %q", r.Code)
		}
		env := r.Envelope(bucketing.Excerpt(status, o.Header, body, true), body).Marshal()
		if !json.Valid(env) || !utf8.Valid(env) {
			t.Errorf("envelope %q is not valid UTF-8 JSON", env)
		}
	})
}

func FuzzExcerpt(f *testing.F) {
	f.Add([]byte("plain"), "X-Request-Id", "abc")
	f.Add([]byte("caf\xe9 \xe2\x82"), "set-cookie", "\xff")
	f.Fuzz(func(t *testing.T, body []byte, name, value string) {
		up := bucketing.Excerpt(500, http.Header{name: {value}}, body, true)
		if len(up.Body) > bucketing.MaxExcerpt || !utf8.ValidString(up.Body) {
			t.Errorf("Body is %d bytes, valid UTF-8 %v", len(up.Body), utf8.ValidString(up.Body))
		}
		if !up.Truncated && len(body) > bucketing.MaxExcerpt+3*bucketing.MaxExcerpt {
			t.Errorf("a %d-byte body was not truncated", len(body))
		}
		for k, v := range up.Headers {
			if len(v) > bucketing.MaxExcerptHeaderValue || !utf8.ValidString(v) {
				t.Errorf("header %s is %d bytes, valid UTF-8 %v", k, len(v), utf8.ValidString(v))
			}
		}
	})
}

func FuzzMarshal(f *testing.F) {
	f.Add(true, []byte(`{"a":[1,2]}`), "detail")
	f.Add(true, []byte("not json <&>"), "")
	f.Add(false, []byte("\xff"), "caf\xe9")
	f.Fuzz(func(t *testing.T, ok bool, data []byte, detail string) {
		env := bucketing.Envelope{OK: ok, Data: data}
		if !ok {
			env.Error = &bucketing.Error{Code: bucketing.CodeUnknown, Detail: detail}
		}
		out := env.Marshal()
		if !json.Valid(out) || !utf8.Valid(out) || out[len(out)-1] != '\n' {
			t.Errorf("Marshal() = %q, want valid UTF-8 JSON ending in a newline", out)
		}
	})
}
