package bucketing_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
)

func TestExcerptBody(t *testing.T) {
	pad := strings.Repeat("a", bucketing.MaxExcerpt-2) // leaves 2 bytes of room
	tests := []struct {
		name          string
		body          string
		complete      bool
		wantBody      string
		wantTruncated bool
	}{
		{"empty", "", true, "", false},
		{"short", `{"error":"quota"}`, true, `{"error":"quota"}`, false},
		{"short but incomplete", `{"error":`, false, `{"error":`, true},
		{"exactly MaxExcerpt", pad + "bb", true, pad + "bb", false},
		{"one byte over", pad + "bbc", true, pad + "bb", true},
		{"cut before a 3-byte character", pad + "€", true, pad, true},
		{"2-byte character fits exactly", pad + "é", true, pad + "é", false},
		{"2-byte character then more", pad + "éx", true, pad + "é", true},
		{"4-byte character does not fit", pad + "😀", true, pad, true},
		{"invalid byte replaced", "a\xffb", true, "a\uFFFDb", false},
		{"replacement that does not fit", pad + "\xff", true, pad, true},
		{"character cut short at the end of the body", "ab\xe2\x82", false, "ab", true},
		{"lone continuation byte at the end", "ab\x82", true, "ab\uFFFD", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := bucketing.Excerpt(502, nil, []byte(tt.body), tt.complete)
			if up.Body != tt.wantBody || up.Truncated != tt.wantTruncated {
				t.Errorf("Excerpt body = %q (%d bytes), truncated %v, want %q (%d bytes), truncated %v",
					up.Body, len(up.Body), up.Truncated, tt.wantBody, len(tt.wantBody), tt.wantTruncated)
			}
			if len(up.Body) > bucketing.MaxExcerpt || !utf8.ValidString(up.Body) {
				t.Errorf("Excerpt body is %d bytes, valid UTF-8 %v", len(up.Body), utf8.ValidString(up.Body))
			}
			if up.Status != 502 {
				t.Errorf("Status = %d, want 502", up.Status)
			}
		})
	}
}

func TestExcerptNoAnswer(t *testing.T) {
	if up := bucketing.Excerpt(0, http.Header{"Retry-After": {"1"}}, []byte("x"), true); up != nil {
		t.Errorf("Excerpt(0, ...) = %+v, want nil", up)
	}
}

func TestExcerptHeaders(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   map[string]string // nil when none is kept
	}{
		{"none", nil, nil},
		{"only unhelpful ones", http.Header{"Server": {"nginx"}, "Date": {"x"}, "Content-Length": {"3"}}, nil},
		{"useful ones", http.Header{
			"Content-Type":          {"application/json"},
			"Retry-After":           {"30"},
			"Www-Authenticate":      {`Bearer realm="api"`},
			"X-Ratelimit-Limit":     {"100"},
			"X-Ratelimit-Remaining": {"0"},
			"Ratelimit":             {"limit=100, remaining=0, reset=30"},
			"Ratelimit-Policy":      {"100;w=60"},
			"X-Rate-Limit-Reset":    {"30"},
			"X-Request-Id":          {"abc"},
			"X-Amzn-Requestid":      {"def"},
			"X-Amz-Request-Id":      {"ghi"},
			"X-Amzn-Errortype":      {"ThrottlingException"},
			"X-Correlation-Id":      {"jkl"},
			"Traceparent":           {"00-1-2-01"},
			"Cf-Ray":                {"mno"},
			"Server":                {"nginx"},
		}, map[string]string{
			"Content-Type":          "application/json",
			"Retry-After":           "30",
			"Www-Authenticate":      `Bearer realm="api"`,
			"X-Ratelimit-Limit":     "100",
			"X-Ratelimit-Remaining": "0",
			"Ratelimit":             "limit=100, remaining=0, reset=30",
			"Ratelimit-Policy":      "100;w=60",
			"X-Rate-Limit-Reset":    "30",
			"X-Request-Id":          "abc",
			"X-Amzn-Requestid":      "def",
			"X-Amz-Request-Id":      "ghi",
			"X-Amzn-Errortype":      "ThrottlingException",
			"X-Correlation-Id":      "jkl",
			"Traceparent":           "00-1-2-01",
			"Cf-Ray":                "mno",
		}},
		{"secrets are dropped", http.Header{
			"Set-Cookie":              {"sid=secret"},
			"Authorization":           {"Bearer secret"},
			"Proxy-Authorization":     {"Basic secret"},
			"X-Auth-Token":            {"secret"},
			"X-Subject-Token":         {"secret"},
			"X-Csrf-Token":            {"secret"},
			"X-Api-Key":               {"secret"},
			"X-Session-Request-Id":    {"secret"},
			"X-Amz-Security-Token":    {"secret"},
			"X-Ratelimit-Remaining-T": {"1"},
		}, map[string]string{"X-Ratelimit-Remaining-T": "1"}},
		{"rate-limit token counts are kept", http.Header{
			"X-Ratelimit-Remaining-Tokens": {"1000"},
		}, map[string]string{"X-Ratelimit-Remaining-Tokens": "1000"}},
		{"values are joined", http.Header{"Www-Authenticate": {"Basic", "Bearer"}},
			map[string]string{"Www-Authenticate": "Basic, Bearer"}},
		{"names are canonicalised", http.Header{"x-request-id": {"a"}, "content-type": {"text/plain"}},
			map[string]string{"X-Request-Id": "a", "Content-Type": "text/plain"}},
		{"long values are cut", http.Header{"X-Request-Id": {strings.Repeat("é", 200)}},
			map[string]string{"X-Request-Id": strings.Repeat("é", bucketing.MaxExcerptHeaderValue/2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bucketing.Excerpt(429, tt.header, nil, true).Headers
			if !maps.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("Headers = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExcerptHeadersBounded(t *testing.T) {
	h := http.Header{}
	for i := range 100 {
		h.Set("X-Ratelimit-"+strings.Repeat("a", i+1), "1")
	}
	got := bucketing.Excerpt(429, h, nil, true).Headers
	if len(got) != bucketing.MaxExcerptHeaders {
		t.Errorf("kept %d headers, want %d", len(got), bucketing.MaxExcerptHeaders)
	}
	if _, ok := got["X-Ratelimit-A"]; !ok {
		t.Errorf("kept %v, want the first names in order", got)
	}
}
