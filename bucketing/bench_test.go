package bucketing_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
)

func BenchmarkClassify(b *testing.B) {
	jsonBody := []byte(`{"data":[` + strings.Repeat(`{"id":"PMID123456","title":"a title"},`, 100) + `{}]}`)
	benchmarks := []struct {
		name  string
		o     bucketing.Outcome
		rules bucketing.Rules
	}{
		{"200 no rules", bucketing.Outcome{Status: 200, Body: jsonBody}, nil},
		{"200 status rule", bucketing.Outcome{Status: 200, Body: jsonBody},
			bucketing.Rules{{Status: 403, BodyContains: "rateLimitExceeded", Code: bucketing.CodeRateLimit}}},
		{"200 body rule", bucketing.Outcome{Status: 200, Body: jsonBody},
			bucketing.Rules{{BodyContains: "rateLimitExceeded", Code: bucketing.CodeRateLimit}}},
		{"200 json rule", bucketing.Outcome{Status: 200, Body: jsonBody},
			bucketing.Rules{{Status: 200, JSONField: "error", Code: bucketing.CodeUpstream}}},
		{"503 retry-after", bucketing.Outcome{Status: 503, Header: http.Header{"Retry-After": {"2"}}}, nil},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bucketing.Classify(bm.o, bm.rules, now)
			}
		})
	}
}

func BenchmarkMarshal(b *testing.B) {
	data := []byte(`{"data":[` + strings.Repeat(`{"id":"PMID123456","title":"a title"},`, 100) + `{}]}`)
	env := bucketing.Envelope{OK: true, Data: data}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		env.Marshal()
	}
}
