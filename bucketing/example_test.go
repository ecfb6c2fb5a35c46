package bucketing_test

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

func ExampleClassify() {
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	o := bucketing.Outcome{
		Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"2"}},
		Body:   []byte(`{"message":"slow down"}`),
	}
	r := bucketing.Classify(o, nil, now)
	fmt.Println(r.Code, r.Class, r.Reason, r.Retryable, *r.RetryAfterMS)
	fmt.Println(r.Detail)

	// A per-tool rule: this upstream reports a spent quota as a 403.
	rules := bucketing.Rules{{Status: 403, BodyContains: "rateLimitExceeded", Code: bucketing.CodeRateLimit}}
	if err := rules.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	o = bucketing.Outcome{Status: http.StatusForbidden, Body: []byte(`{"reason":"rateLimitExceeded"}`)}
	r = bucketing.Classify(o, rules, now)
	fmt.Println(r.Code, r.Class, r.Reason, r.Retryable)
	// Output:
	// rate_limit transient status_429 true 2000
	// upstream answered 429 Too Many Requests; retry after 2s
	// rate_limit transient rule true
}

func ExampleRefusal() {
	env := bucketing.Refusal(bucketing.CodeValidation, bucketing.ReasonUnknownField,
		"Tool 'pubmed_search' got unknown argument 'edit_requests'; expected one of: term, retmax, pmid",
		[]bucketing.Violation{{Path: "/edit_requests", Message: "unknown argument", Expected: "absent"}})
	os.Stdout.Write(env.Marshal())
	// Output:
	// {"ok":false,"data":null,"error":{"code":"validation","class":"user","reason":"unknown_field","detail":"Tool 'pubmed_search' got unknown argument 'edit_requests'; expected one of: term, retmax, pmid","violations":[{"path":"/edit_requests","message":"unknown argument","expected":"absent"}],"retryable":false,"retry_after_ms":null,"upstream":null}}
}

func ExampleResult_Envelope() {
	now := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
	o := bucketing.Outcome{
		Status: http.StatusServiceUnavailable,
		Header: http.Header{"Retry-After": {"Fri, 14 Mar 2025 12:00:30 GMT"}, "Set-Cookie": {"sid=1"}},
		Body:   []byte("down for maintenance"),
	}
	r := bucketing.Classify(o, nil, now)
	env := r.Envelope(bucketing.Excerpt(o.Status, o.Header, o.Body, true), nil)
	os.Stdout.Write(env.Marshal())
	// Output:
	// {"ok":false,"data":null,"error":{"code":"upstream","class":"transient","reason":"status_5xx","detail":"upstream answered 503 Service Unavailable; retry after 30s","violations":[],"retryable":true,"retry_after_ms":30000,"upstream":{"status":503,"body":"down for maintenance","headers":{"Retry-After":"Fri, 14 Mar 2025 12:00:30 GMT"}}}}
}

// ExampleCodes lists the error codes dashboards group by, each with the
// class a refusal of that code gets.
func ExampleCodes() {
	for _, c := range bucketing.Codes() {
		fmt.Println(c, bucketing.ClassOf(c))
	}
	// Output:
	// validation user
	// policy policy
	// rate_limit transient
	// auth terminal
	// upstream transient
	// unknown terminal
}
