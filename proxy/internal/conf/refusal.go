package conf

import (
	"errors"
	"net/http"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// HeaderEnvelope is the request header by which a caller asks for the envelope.
const HeaderEnvelope = "X-Toolgate-Envelope"

// HeaderErrorCode carries error.code on every answer toolgate made itself or
// rewrote as a failure.
const HeaderErrorCode = "X-Toolgate-Error-Code"

// Sentinels for bounded inputs. Each maps to one answer in exactly one place
// (handle): ErrBodyTooLarge to validation/body_too_large, ErrBodyTimeout to
// validation/body_timeout, errClientBody to a
// caller that went away, which is not a failure of the tool.
var (
	ErrBodyTooLarge = errors.New("request body exceeds the limit")
	errClientBody   = errors.New("reading the caller's body failed")
	// ErrBodyTimeout marks a body that did not arrive within
	// limits.body_timeout: validation/body_timeout, 408.
	ErrBodyTimeout = errors.New("the caller's body did not arrive in time")
	// ErrOtherName marks an upstream connection the dial guard refused: a
	// call under a name that is not a tool host reached a loopback host a
	// tool names. It becomes policy/not_allowlisted.
	ErrOtherName = errors.New("the connection reached a loopback tool host under another name")
	// ErrEventLost ends a raw answer's body whose call's event was not
	// kept (events.on_write_failure: refuse): the caller's connection is
	// cut before the last bytes.
	ErrEventLost = errors.New("the call's event could not be written")
)

// ErrNotToolsList is EvaluateMCP's error for a recorded tools/list
// (MCPTools.List) that is not one whole tools/list answer within the
// route's mcp.max_message_bytes.
var ErrNotToolsList = mcp.ErrNotToolsList

// Refusal is an answer toolgate gives itself, without calling upstream.
type Refusal struct {
	Code       bucketing.Code
	Reason     string
	Detail     string
	Violations []policies.Violation
	// RetryAfterMS is when the same call may pass (budgets, rate limits);
	// nil for refusals that retrying does not cure.
	RetryAfterMS *int64
	Approval     *bucketing.Approval // error.approval, for approval refusals
	// DryRunNote, when set, is what a dry-run step records of this
	// refusal in place of its violations' paths and messages.
	DryRunNote string
}

func Refuse(code bucketing.Code, reason, detail string, vs []policies.Violation) *Refusal {
	return &Refusal{Code: code, Reason: reason, Detail: detail, Violations: vs}
}

// Envelope is the encoded envelope a refused caller gets.
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

// RefusalStatus is the one place a refusal becomes an HTTP status: 403 for
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
