package bucketing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
)

// MaxRuleBody is the most bytes of upstream's body that rules look at. The
// proxy passes at most this many in Outcome.Body; Classify ignores any more.
const MaxRuleBody = 64 << 10

// Outcome is what happened to a forwarded call: what the proxy saw of
// upstream's answer, or the transport error that stopped it.
type Outcome struct {
	// Status is upstream's HTTP status code, or 0 when no response arrived.
	Status int
	// Header holds upstream's response headers. It may be nil.
	Header http.Header
	// Body is the start of upstream's body, for rules: at most MaxRuleBody
	// bytes are looked at. It may be nil. Classify only reads it.
	Body []byte
	// Err is the transport error (dial, timeout, reset, body cut short), or
	// nil if there was none. A body read to its normal end is not an error:
	// the proxy must not pass io.EOF for it.
	Err error
}

// Result is the bucketed outcome of a call: what Classify made of it.
type Result struct {
	// Code is the bucket, or CodeNone when the call succeeded.
	Code Code
	// Class tells the caller what to do next; ClassNone on success.
	Class Class
	// Reason is the finer word under Code, such as status_5xx or timeout;
	// "" on success.
	Reason string
	// Retryable is true exactly when Class is ClassTransient.
	Retryable bool
	// RetryAfterMS is upstream's Retry-After in milliseconds from now, or
	// nil when the header is absent or cannot be parsed. It is only set on
	// failures.
	RetryAfterMS *int64
	// Detail is one human sentence about the failure, without the tool's
	// name and never with upstream's body in it, such as "upstream answered
	// 503 Service Unavailable". It is "" on success.
	Detail string
}

// OK reports whether the call counts as a success (Code is CodeNone).
func (r Result) OK() bool { return r.Code == CodeNone }

// Classify buckets the outcome of a forwarded call. It decides in this order,
// and the first step that applies wins:
//
//  1. A transport error (o.Err != nil). A timeout (context.DeadlineExceeded,
//     os.ErrDeadlineExceeded, a net.Error whose Timeout is true) is
//     upstream/timeout, whether or not a status had arrived. A cancellation
//     (context.Canceled: the client went away) is upstream/canceled. Any
//     other error after a status arrived (o.Status != 0, such as
//     io.ErrUnexpectedEOF or a reset mid-body) is upstream/truncated. A TLS
//     certificate upstream's name or chain does not satisfy is upstream/tls,
//     class terminal. Every other error before a response (refused, reset,
//     io.EOF, DNS, unreachable, anything unrecognised) is upstream/connect.
//     Rules do not see transport errors.
//  2. The rules, in order, when a status arrived; the first that matches
//     wins (see Rule).
//  3. The status table: 1xx, 2xx and 3xx succeed; 429 is
//     rate_limit/status_429 (transient); 401 is auth/status_401 (terminal);
//     403 is auth/status_403 (user); any other 4xx is validation/status_4xx
//     (user); 5xx is upstream/status_5xx (transient); anything else,
//     including status 0 without an error, is unknown/unexpected_status
//     (terminal).
//
// For every failure whose headers carry Retry-After, RetryAfterMS holds it,
// parsed by ParseRetryAfter against now. Classify only reads o. It reads
// the body only for rules that get that far, and then, for JSONField, walks
// just the top level of the JSON without decoding or allocating.
func Classify(o Outcome, rules Rules, now time.Time) Result {
	var r Result
	switch {
	case o.Err != nil:
		r = classifyErr(o.Status, o.Err)
	case o.Status != 0:
		var matched bool
		if r, matched = applyRules(o, rules); !matched {
			r = classifyStatus(o.Status)
		}
	default:
		r = Result{Code: CodeUnknown, Class: ClassTerminal, Reason: ReasonUnexpected,
			Detail: "upstream gave no status and no error"}
	}
	if r.Code == CodeNone {
		return Result{}
	}
	r.Retryable = r.Class == ClassTransient
	if v := o.Header["Retry-After"]; len(v) > 0 {
		if ms, ok := ParseRetryAfter(v[0], now); ok {
			r.RetryAfterMS = &ms
			r.Detail += "; retry after " + strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + "s"
		}
	}
	return r
}

// classifyStatus applies the status table.
func classifyStatus(status int) Result {
	switch {
	case status >= 100 && status < 400:
		return Result{}
	case status == http.StatusTooManyRequests:
		return statusResult(status, CodeRateLimit, ClassTransient, ReasonRateLimited)
	case status == http.StatusUnauthorized:
		return statusResult(status, CodeAuth, ClassTerminal, ReasonUnauthorized)
	case status == http.StatusForbidden:
		return statusResult(status, CodeAuth, ClassUser, ReasonForbidden)
	case status >= 400 && status < 500:
		return statusResult(status, CodeValidation, ClassUser, ReasonStatus4xx)
	case status >= 500 && status < 600:
		return statusResult(status, CodeUpstream, ClassTransient, ReasonStatus5xx)
	default:
		return Result{Code: CodeUnknown, Class: ClassTerminal, Reason: ReasonUnexpected,
			Detail: "upstream answered with unexpected status " + strconv.Itoa(status)}
	}
}

func statusResult(status int, code Code, class Class, reason string) Result {
	return Result{Code: code, Class: class, Reason: reason, Detail: answered(status)}
}

// answered says which status upstream answered, as the start of a Detail.
func answered(status int) string {
	s := "upstream answered " + strconv.Itoa(status)
	if text := http.StatusText(status); text != "" {
		s += " " + text
	}
	return s
}

// classifyErr buckets a transport error; status is what arrived before it.
func classifyErr(status int, err error) Result {
	r := Result{Code: CodeUpstream, Class: ClassTransient}
	switch {
	case isTimeout(err):
		r.Reason = ReasonTimeout
		r.Detail = "upstream did not answer within the timeout"
		if status != 0 {
			r.Detail = "upstream's answer was cut short by the timeout"
		}
	case errors.Is(err, context.Canceled):
		r.Reason = ReasonCanceled
		r.Detail = "the call was canceled before upstream answered"
		if status != 0 {
			r.Detail = "the call was canceled while upstream's answer was read"
		}
	case status != 0:
		r.Reason = ReasonTruncated
		r.Detail = "upstream's answer was cut short"
	case isCertificate(err):
		r.Class = ClassTerminal
		r.Reason = ReasonTLS
		r.Detail = certificateDetail(err)
	default:
		r.Reason = ReasonConnect
		r.Detail = connectDetail(err)
	}
	return r
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isCertificate(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) ||
		errors.As(err, &invalid) || errors.As(err, &hostname)
}

// certificateDetail says why upstream's certificate was refused, in words
// that hold no name or value from the certificate.
func certificateDetail(err error) string {
	const head = "upstream's TLS certificate was not accepted: "
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
	)
	switch {
	case errors.As(err, &unknown):
		return head + "it is signed by an authority toolgate does not trust (tls.upstream_ca adds one)"
	case errors.As(err, &hostname):
		return head + "it is not valid for the host called"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return head + "it has expired or is not yet valid"
	case errors.As(err, &invalid):
		return head + "it is not valid for a server (usage, constraints or chain)"
	default:
		return head + "it failed verification"
	}
}

func connectDetail(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "upstream refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "upstream reset the connection before answering"
	case errors.Is(err, io.EOF):
		return "upstream closed the connection without answering"
	case errors.As(err, &dns):
		return "upstream's host name could not be resolved"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "upstream's host could not be reached"
	default:
		return "upstream could not be reached"
	}
}
