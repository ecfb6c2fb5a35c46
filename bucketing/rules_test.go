package bucketing_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// Rules from the design: a Google-style quota 403 is a rate limit, and a 200
// whose JSON body has a top-level error is an upstream failure.
var (
	quotaRule = bucketing.Rule{Status: 403, BodyContains: "rateLimitExceeded",
		Code: bucketing.CodeRateLimit, Reason: "quota_exhausted"}
	errorInBodyRule = bucketing.Rule{Status: 200, JSONField: "error",
		Code: bucketing.CodeUpstream, Reason: bucketing.ReasonErrorInBody}
)

func TestClassifyRules(t *testing.T) {
	const quotaBody = `{"error":{"errors":[{"reason":"rateLimitExceeded"}],"code":403}}`
	tests := []struct {
		name   string
		rules  bucketing.Rules
		status int
		header http.Header
		body   string
		want   view
	}{
		{"403 quota body is a rate limit", bucketing.Rules{quotaRule}, 403, retryAfter("30"), quotaBody,
			view{bucketing.CodeRateLimit, bucketing.ClassTransient, "quota_exhausted", true, 30000,
				"upstream answered 403 Forbidden, which a rule for this tool buckets as rate_limit; retry after 30s"}},
		{"403 other body stays auth", bucketing.Rules{quotaRule}, 403, nil, `{"error":"forbidden"}`,
			view{bucketing.CodeAuth, bucketing.ClassUser, "status_403", false, -1, "upstream answered 403 Forbidden"}},
		{"quota body on another status does not match", bucketing.Rules{quotaRule}, 400, nil, quotaBody,
			view{bucketing.CodeValidation, bucketing.ClassUser, "status_4xx", false, -1, "upstream answered 400 Bad Request"}},
		{"200 with top-level error", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":{"message":"db down"},"data":null}`,
			view{bucketing.CodeUpstream, bucketing.ClassTransient, "error_in_body", true, -1,
				`upstream answered 200 OK with a member "error" in its body, which a rule for this tool buckets as upstream`}},
		{"200 with error null stays ok", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error": null, "data": [1]}`,
			view{RetryAfter: -1}},
		{"200 with error false stays ok", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":false}`,
			view{RetryAfter: -1}},
		{"200 with error empty string stays ok", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":""}`,
			view{RetryAfter: -1}},
		{"200 with error 0 is an error", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":0}`,
			view{bucketing.CodeUpstream, bucketing.ClassTransient, "error_in_body", true, -1,
				`upstream answered 200 OK with a member "error" in its body, which a rule for this tool buckets as upstream`}},
		{"200 with nested error only stays ok", bucketing.Rules{errorInBodyRule}, 200, nil, `{"data":{"error":"x"}}`,
			view{RetryAfter: -1}},
		{"200 array body stays ok", bucketing.Rules{errorInBodyRule}, 200, nil, `[{"error":"x"}]`,
			view{RetryAfter: -1}},
		{"200 body cut short after the member", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":"x", "data": [1, 2`,
			view{bucketing.CodeUpstream, bucketing.ClassTransient, "error_in_body", true, -1,
				`upstream answered 200 OK with a member "error" in its body, which a rule for this tool buckets as upstream`}},
		{"200 string value cut short", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":"x`,
			view{RetryAfter: -1}},
		{"200 literal value cut short", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":tru`,
			view{RetryAfter: -1}},
		{"200 member after a value cut short", bucketing.Rules{errorInBodyRule}, 200, nil, `{"data":[{"a":1}, "error":1`,
			view{RetryAfter: -1}},
		{"200 escaped member name", bucketing.Rules{errorInBodyRule}, 200, nil, `{"\u0065rror":{}}`,
			view{bucketing.CodeUpstream, bucketing.ClassTransient, "error_in_body", true, -1,
				`upstream answered 200 OK with a member "error" in its body, which a rule for this tool buckets as upstream`}},
		{"200 member name in a nested string", bucketing.Rules{errorInBodyRule}, 200, nil, `{"data":"\",\"error\":1", "ok": true}`,
			view{RetryAfter: -1}},
		{"200 first of duplicate members counts", bucketing.Rules{errorInBodyRule}, 200, nil, `{"error":null,"error":1}`,
			view{RetryAfter: -1}},
		{"200 text body stays ok", bucketing.Rules{errorInBodyRule}, 200, nil, `error: x`,
			view{RetryAfter: -1}},
		{"first matching rule wins", bucketing.Rules{
			{Status: 503, Code: bucketing.CodeUnknown, Reason: "first"},
			{Status: 503, Code: bucketing.CodeRateLimit, Reason: "second"},
		}, 503, nil, "", view{bucketing.CodeUnknown, bucketing.ClassTerminal, "first", false, -1,
			"upstream answered 503 Service Unavailable, which a rule for this tool buckets as unknown"}},
		{"a rule that does not match is skipped", bucketing.Rules{
			{Status: 503, BodyContains: "maintenance", Code: bucketing.CodeUnknown, Reason: "first"},
			{Status: 503, Code: bucketing.CodeRateLimit, Reason: "second"},
		}, 503, nil, "overloaded", view{bucketing.CodeRateLimit, bucketing.ClassTransient, "second", true, -1,
			"upstream answered 503 Service Unavailable, which a rule for this tool buckets as rate_limit"}},
		{"body and JSON conditions must both hold", bucketing.Rules{
			{BodyContains: "quota", JSONField: "error", Code: bucketing.CodeRateLimit},
		}, 200, nil, `{"message":"quota"}`, view{RetryAfter: -1}},
		{"body and JSON conditions both hold, default reason", bucketing.Rules{
			{BodyContains: "quota", JSONField: "error", Code: bucketing.CodeRateLimit},
		}, 200, nil, `{"error":"quota"}`, view{bucketing.CodeRateLimit, bucketing.ClassTransient, "rule", true, -1,
			`upstream answered 200 OK with a member "error" in its body, which a rule for this tool buckets as rate_limit`}},
		{"ok rule turns a 404 into a success", bucketing.Rules{{Status: 404, Code: bucketing.CodeOK}}, 404, nil, "",
			view{RetryAfter: -1}},
		{"class override", bucketing.Rules{{Status: 500, Code: bucketing.CodeUpstream, Class: bucketing.ClassTerminal}}, 500, nil, "",
			view{bucketing.CodeUpstream, bucketing.ClassTerminal, "rule", false, -1,
				"upstream answered 500 Internal Server Error, which a rule for this tool buckets as upstream"}},
		{"unvalidated rule with an unknown code buckets as unknown", bucketing.Rules{{Status: 500, Code: "ratelimit"}}, 500, nil, "",
			view{bucketing.CodeUnknown, bucketing.ClassTerminal, "rule", false, -1,
				"upstream answered 500 Internal Server Error, which a rule for this tool buckets as unknown"}},
		{"rule without condition never matches", bucketing.Rules{{Code: bucketing.CodeOK}}, 500, nil, "",
			view{bucketing.CodeUpstream, bucketing.ClassTransient, "status_5xx", true, -1, "upstream answered 500 Internal Server Error"}},
		{"body past MaxRuleBody is not looked at", bucketing.Rules{{BodyContains: "needle", Code: bucketing.CodeUpstream}}, 200, nil,
			strings.Repeat(" ", bucketing.MaxRuleBody) + "needle", view{RetryAfter: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := bucketing.Outcome{Status: tt.status, Header: tt.header, Body: []byte(tt.body)}
			if v := viewOf(bucketing.Classify(o, tt.rules, now)); v != tt.want {
				t.Errorf("Classify = %+v, want %+v", v, tt.want)
			}
		})
	}
}

func TestRulesValidate(t *testing.T) {
	const codes = "ok, validation, policy, rate_limit, auth, upstream, unknown"
	tests := []struct {
		name  string
		rules bucketing.Rules
		want  string // "" for no error
	}{
		{"none", nil, ""},
		{"design rules", bucketing.Rules{quotaRule, errorInBodyRule}, ""},
		{"ok rule", bucketing.Rules{{Status: 404, Code: bucketing.CodeOK}}, ""},
		{"body only", bucketing.Rules{{BodyContains: "x", Code: bucketing.CodeUpstream, Class: bucketing.ClassTerminal}}, ""},
		{"unknown code", bucketing.Rules{quotaRule, errorInBodyRule, {Status: 429, Code: "ratelimit"}},
			`rules[2]: unknown code "ratelimit"; expected one of: ` + codes},
		{"missing code", bucketing.Rules{{Status: 429}},
			`rules[0]: code is required; expected one of: ` + codes},
		{"no condition", bucketing.Rules{{Code: bucketing.CodeUpstream}},
			`rules[0]: rule has no condition; set status, body_contains or json_field`},
		{"status too low", bucketing.Rules{{Status: 42, Code: bucketing.CodeUpstream}},
			`rules[0]: status 42 is out of range; expected 100..599, or 0 for any status`},
		{"status too high", bucketing.Rules{{Status: 600, Code: bucketing.CodeUpstream}},
			`rules[0]: status 600 is out of range; expected 100..599, or 0 for any status`},
		{"unknown class", bucketing.Rules{{Status: 500, Code: bucketing.CodeUpstream, Class: "retry"}},
			`rules[0]: unknown class "retry"; expected one of: user, policy, transient, terminal`},
		{"class with ok", bucketing.Rules{{Status: 404, Code: bucketing.CodeOK, Class: bucketing.ClassUser}},
			`rules[0]: class must be empty when code is ok`},
		{"reason with ok", bucketing.Rules{{Status: 404, Code: bucketing.CodeOK, Reason: "empty"}},
			`rules[0]: reason must be empty when code is ok`},
		{"reason not a word", bucketing.Rules{{Status: 500, Code: bucketing.CodeUpstream, Reason: "Bad Reason"}},
			`rules[0]: reason "Bad Reason" must be lowercase letters, digits and underscores, at most 64 of them`},
		{"body_contains too long", bucketing.Rules{{BodyContains: strings.Repeat("x", bucketing.MaxRuleBody+1), Code: bucketing.CodeUpstream}},
			`rules[0]: body_contains is longer than the 65536 bytes rules look at, so it can never match`},
		{"every problem is reported", bucketing.Rules{{Status: 1, Code: "nope"}, quotaRule, {Code: bucketing.CodeUpstream}},
			"rules[0]: status 1 is out of range; expected 100..599, or 0 for any status\n" +
				`rules[0]: unknown code "nope"; expected one of: ` + codes + "\n" +
				"rules[2]: rule has no condition; set status, body_contains or json_field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rules.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
			if err != nil && !errors.Is(err, bucketing.ErrInvalidRule) {
				t.Errorf("errors.Is(%v, ErrInvalidRule) = false, want true", err)
			}
			var re *bucketing.RuleError
			if err != nil && !errors.As(err, &re) {
				t.Errorf("errors.As(%v, *RuleError) = false, want true", err)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		wantMS int64
		wantOK bool
	}{
		{"seconds", "2", 2000, true},
		{"zero", "0", 0, true},
		{"spaces around", "  7 ", 7000, true},
		{"leading zeros", "007", 7000, true},
		{"huge is clamped", "99999999999999999999999999", bucketing.MaxRetryAfterMS, true},
		{"IMF-fixdate", "Fri, 14 Mar 2025 12:00:05 GMT", 5000, true},
		{"RFC 850 date", "Friday, 14-Mar-25 12:01:00 GMT", 60000, true},
		{"asctime date", "Fri Mar 14 12:00:10 2025", 10000, true},
		{"date now", "Fri, 14 Mar 2025 12:00:00 GMT", 0, true},
		{"past date clamps to 0", "Thu, 13 Mar 2025 12:00:00 GMT", 0, true},
		{"far future date", "Fri, 14 Mar 9999 12:00:00 GMT", time.Date(9999, 3, 14, 12, 0, 0, 0, time.UTC).UnixMilli() - now.UnixMilli(), true},
		{"empty", "", 0, false},
		{"garbage", "soon", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"seconds with unit", "5s", 0, false},
		{"date in another zone", "Fri, 14 Mar 2025 13:00:00 +0100", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, ok := bucketing.ParseRetryAfter(tt.value, now)
			if ms != tt.wantMS || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %d, %v, want %d, %v", tt.value, ms, ok, tt.wantMS, tt.wantOK)
			}
		})
	}
}

func TestParseRetryAfterRoundsUp(t *testing.T) {
	ms, ok := bucketing.ParseRetryAfter("Fri, 14 Mar 2025 12:00:02 GMT", now.Add(300*time.Microsecond))
	if ms != 2000 || !ok {
		t.Errorf("ParseRetryAfter = %d, %v, want 2000, true", ms, ok)
	}
}
