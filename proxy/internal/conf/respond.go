package conf

import (
	"net/http"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
)

// refusal is an answer toolgate gives itself, without calling upstream.
type Refusal struct {
	Code       bucketing.Code
	Reason     string
	Detail     string
	Violations []policies.Violation
	// retryAfterMS is when the same call may pass (budgets, rate limits);
	// nil for refusals that retrying does not cure.
	RetryAfterMS *int64
	Approval     *bucketing.Approval // error.approval, for approval refusals
	// dryRunNote, when set, is what a dry-run step records of this
	// refusal in place of its violations' paths and messages.
	DryRunNote string
}

func Refuse(code bucketing.Code, reason, detail string, vs []policies.Violation) *Refusal {
	return &Refusal{Code: code, Reason: reason, Detail: detail, Violations: vs}
}

// envelope is the encoded envelope a refused caller gets.
func (ref *Refusal) Envelope() []byte {
	// The violations go as they are: only their path, message, expected
	// and got are encoded.
	env := bucketing.Refusal(ref.Code, ref.Reason, ref.Detail, ref.Violations)
	env.Error.Approval = ref.Approval
	if ref.RetryAfterMS != nil {
		env.Error.RetryAfterMS = ref.RetryAfterMS
		env.Error.Retryable = env.Error.Class == bucketing.ClassTransient
	}
	return env.Marshal()
}

func SchemaRefusal(tool string, vs []policies.Violation) *Refusal {
	return Refuse(bucketing.CodeValidation, policies.Reason(vs), policies.Detail(tool, vs), vs)
}

// refusalStatus is the one place a refusal becomes an HTTP status: 403 for
// policy, 429 for rate_limit, 503 for events_unavailable, 408 for a body that did not arrive in time, 415 for a body
// toolgate cannot read, 422 for every other validation refusal.
func RefusalStatus(ref *Refusal) int {
	switch {
	case ref.Code == bucketing.CodePolicy:
		return http.StatusForbidden
	case ref.Code == bucketing.CodeRateLimit:
		return http.StatusTooManyRequests
	case ref.Reason == bucketing.ReasonEventsUnavailable:
		return http.StatusServiceUnavailable
	case ref.Reason == bucketing.ReasonBodyTimeout:
		return http.StatusRequestTimeout
	case ref.Reason == bucketing.ReasonUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	}
	return http.StatusUnprocessableEntity
}
