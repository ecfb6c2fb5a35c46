package policies

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// Policy modes, per policy and per tool. The stricter setting loses: a tool
// in dry_run runs its enforce policies in dry run; a policy that is off is
// off for every tool.
const (
	ModeEnforce = "enforce"
	ModeDryRun  = "dry_run"
	ModeOff     = "off"
)

// DefaultDeadline bounds one policy evaluation.
const DefaultDeadline = 50 * time.Millisecond

// Decision is the verdict of a tool's policies on one call.
type Decision struct {
	// Allow is false when an enforced policy denied the call or failed
	// closed.
	Allow bool
	// Code is the refusal's code when Allow is false: validation when every
	// deny message says so, policy otherwise.
	Code bucketing.Code
	// Reason is bucketing.ReasonPolicyDenied, ReasonPolicyError or
	// ReasonPolicyTimeout when Allow is
	// false; when a policy failed open it names that failure instead.
	Reason string
	// Detail is one sentence naming the policy and its first message.
	Detail string
	// Violations are every deny message of every enforced policy.
	Violations []Violation
	// Inject holds headers to add upstream, merged from every policy that
	// allowed the call, by canonical header name.
	Inject map[string]string
	// DryRun holds the messages of dry-run policies that would have denied.
	DryRun []Violation
	// FailedOpen names policies that failed and let the call through
	// (fail_open).
	FailedOpen []string
	// Approval is set when an enforced policy that allowed the call asks
	// that a person approve it first (the first such policy's request);
	// nil otherwise.
	Approval *Approval
}

// Evaluator is one compiled policy: Rego now, WASM later.
type Evaluator interface {
	// Name is the policy's name in the configuration.
	Name() string
	// Eval decides one call. ctx carries the deadline.
	Eval(ctx context.Context, in *Input) (Result, error)
}

// deadlineEvaluator is an Evaluator that bounds its own evaluation by a
// deadline, without a context timer (the compiled engine's Rego).
type deadlineEvaluator interface {
	EvalBefore(ctx context.Context, in *Input, deadline time.Time) (Result, error)
}

// Result is what one policy said about one call.
type Result struct {
	// Denies are the deny messages; none means the policy did not deny.
	Denies []Violation
	// Allowed is false only when the policy defines allow and it is not true.
	Allowed bool
	// Inject are headers the policy asks to add.
	Inject map[string]string
	// Approval is the policy's request for a person's approval; nil when
	// it asks none.
	Approval *Approval
	// Withholds are the policy's withhold messages (answer policies,
	// answer.go); none means it withholds nothing.
	Withholds []Violation
	// Redacts are the JSON pointers into the answer's body whose values
	// the policy asks to replace (answer policies).
	Redacts []string
}

// Bound is a policy bound to a tool with its effective mode.
type Bound struct {
	Policy Evaluator
	Mode   string
}

// Set is the policies that decide one tool's calls, in order: global ones
// first, then the tool's own. It is immutable and safe for concurrent use.
type Set struct {
	tool     string
	bound    []Bound
	deadline time.Duration
	failOpen bool
}

// NewSet returns the set for a tool. deadline 0 means DefaultDeadline.
func NewSet(tool string, bound []Bound, deadline time.Duration, failOpen bool) *Set {
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	var active []Bound
	for _, b := range bound {
		if b.Mode != ModeOff {
			active = append(active, b)
		}
	}
	return &Set{tool: tool, bound: active, deadline: deadline, failOpen: failOpen}
}

// Len reports how many policies run (off ones are left out).
func (s *Set) Len() int { return len(s.bound) }

// Check evaluates every active policy and combines their results: any
// enforced denial refuses the call, with every enforced message; dry-run
// denials are only reported; an evaluation that fails or runs past the
// deadline refuses the call unless the tool fails open.
func (s *Set) Check(ctx context.Context, in *Input) Decision {
	d := Decision{Allow: true}
	var denied []string
	allValidation := true
	for _, b := range s.bound {
		res, err, timedOut := s.eval(ctx, b.Policy, in)
		if err != nil {
			reason, what := s.failure(err, timedOut)
			if s.failOpen || b.Mode == ModeDryRun {
				d.FailedOpen = append(d.FailedOpen, b.Policy.Name()+": "+reason)
				continue
			}
			return Decision{Code: bucketing.CodePolicy, Reason: reason,
				Detail:     fmt.Sprintf("Tool '%s' refused: policy '%s' %s", s.tool, b.Policy.Name(), what),
				Violations: []Violation{{Reason: reason, Message: "policy '" + b.Policy.Name() + "' " + what}}}
		}
		if len(res.Denies) == 0 && !res.Allowed {
			res.Denies = []Violation{{Reason: bucketing.ReasonPolicyDenied, Message: "not allowed by policy '" + b.Policy.Name() + "'", Code: bucketing.CodePolicy}}
		}
		if len(res.Denies) > 0 {
			if b.Mode == ModeDryRun {
				d.DryRun = append(d.DryRun, res.Denies...)
				continue
			}
			d.Allow = false
			denied = append(denied, b.Policy.Name())
			for _, v := range res.Denies {
				if v.Code != bucketing.CodeValidation {
					allValidation = false
				}
			}
			d.Violations = append(d.Violations, res.Denies...)
			continue
		}
		if res.Approval != nil && b.Mode != ModeDryRun && d.Approval == nil {
			a := *res.Approval
			a.Policy = b.Policy.Name()
			d.Approval = &a
		}
		switch {
		case len(res.Inject) == 0:
		case d.Inject == nil:
			d.Inject = res.Inject // the policy's own map, made for this call
		default:
			maps.Copy(d.Inject, res.Inject)
		}
	}
	if !d.Allow {
		d.Inject, d.Approval = nil, nil
		d.Code, d.Reason = bucketing.CodePolicy, bucketing.ReasonPolicyDenied
		if allValidation {
			d.Code = bucketing.CodeValidation
		}
		d.Detail = fmt.Sprintf("Tool '%s' refused by policy '%s': %s", s.tool, denied[0], d.Violations[0].Message) + andMore(len(d.Violations)-1)
	}
	return d
}

// andMore ends a detail that names one message of n+1: "", " (and 1 more
// problem)" or " (and n more problems)".
func andMore(n int) string {
	switch {
	case n == 1:
		return " (and 1 more problem)"
	case n > 1:
		return fmt.Sprintf(" (and %d more problems)", n)
	}
	return ""
}

// failure words a policy's failed evaluation: its reason
// (ReasonPolicyError or ReasonPolicyTimeout) and what the policy did, to
// follow "policy 'NAME' ".
func (s *Set) failure(err error, timedOut bool) (reason, what string) {
	switch {
	case timedOut:
		return bucketing.ReasonPolicyTimeout, fmt.Sprintf("did not decide within %s", s.deadline)
	case errors.Is(err, context.DeadlineExceeded):
		// The policy's own, shorter deadline (a WASM module's): its error
		// says which.
		return bucketing.ReasonPolicyTimeout, "did not decide in time: " + strings.TrimPrefix(err.Error(), "timeout: ")
	}
	return bucketing.ReasonPolicyError, "failed: " + err.Error()
}

// eval runs one policy within the set's deadline: its result or error, and
// whether the deadline (not ctx) ended it.
func (s *Set) eval(ctx context.Context, p Evaluator, in *Input) (Result, error, bool) {
	if de, ok := p.(deadlineEvaluator); ok {
		res, err := safeEval(func() (Result, error) { return de.EvalBefore(ctx, in, time.Now().Add(s.deadline)) })
		return res, err, errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
	}
	ectx, cancel := context.WithTimeout(ctx, s.deadline)
	defer cancel()
	res, err := safeEval(func() (Result, error) { return p.Eval(ectx, in) })
	return res, err, ectx.Err() != nil && ctx.Err() == nil
}

// safeEval runs one policy's evaluation, turning a panic into an error: a
// broken policy never takes the sidecar down.
func safeEval(eval func() (Result, error)) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic during evaluation: %v", r)
		}
	}()
	return eval()
}

// DecodeDecision reads a policy's decision document: deny (a set of strings,
// or of objects {msg, path, code}), allow (optional boolean), inject
// (optional object of header names to strings), approval (optional:
// true, or an object {effect, summary}; see Approval), and for answer
// policies withhold and redact (answer.go).
func DecodeDecision(doc map[string]any) (Result, error) {
	res := Result{Allowed: true}
	if a, ok := doc["allow"]; ok {
		b, isBool := a.(bool)
		if !isBool {
			return res, fmt.Errorf("allow must be a boolean, got %s", JSONTypeName(a))
		}
		res.Allowed = b
	}
	if raw, ok := doc["deny"]; ok {
		items, isArr := raw.([]any)
		if !isArr {
			return res, fmt.Errorf("deny must be a set, got %s", JSONTypeName(raw))
		}
		for _, it := range items {
			v, err := denyViolation(it)
			if err != nil {
				return res, err
			}
			res.Denies = append(res.Denies, v)
		}
		sort.SliceStable(res.Denies, func(i, j int) bool {
			if res.Denies[i].Path != res.Denies[j].Path {
				return res.Denies[i].Path < res.Denies[j].Path
			}
			return res.Denies[i].Message < res.Denies[j].Message
		})
	}
	if err := decodeAnswerRules(doc, &res); err != nil {
		return res, err
	}
	if raw, ok := doc["approval"]; ok {
		a, err := decodeApproval(raw)
		if err != nil {
			return res, err
		}
		res.Approval = a
	}
	if raw, ok := doc["inject"]; ok {
		m, isObj := raw.(map[string]any)
		if !isObj {
			return res, fmt.Errorf("inject must be an object of header names to strings, got %s", JSONTypeName(raw))
		}
		res.Inject = make(map[string]string, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) { // the first bad header, always the same
			v := m[k]
			s, isStr := v.(string)
			header, valid := InjectHeader(k, s)
			if !isStr || !valid {
				return res, fmt.Errorf("inject[%q] must be a valid header name with a one-line string value", k)
			}
			res.Inject[header] = s
		}
	}
	return res, nil
}

// InjectHeader is the canonical name of header name, and whether name is a
// header name and value a one-line value, as inject requires.
func InjectHeader(name, value string) (string, bool) {
	if !validHeaderName(name) || strings.ContainsAny(value, "\r\n") {
		return "", false
	}
	return textproto.CanonicalMIMEHeaderKey(name), true
}

func denyViolation(it any) (Violation, error) {
	switch x := it.(type) {
	case string:
		return Violation{Reason: bucketing.ReasonPolicyDenied, Message: x, Code: bucketing.CodePolicy}, nil
	case map[string]any:
		msg, _ := x["msg"].(string)
		if msg == "" {
			return Violation{}, errors.New("a deny object needs a non-empty string msg")
		}
		v := Violation{Reason: bucketing.ReasonPolicyDenied, Message: msg, Code: bucketing.CodePolicy}
		if p, ok := x["path"]; ok {
			ps, isStr := p.(string)
			if !isStr || (ps != "" && ps[0] != '/') {
				return Violation{}, errors.New("a deny object's path must be a JSON pointer string such as \"/query\"")
			}
			v.Path = ps
		}
		if c, ok := x["code"]; ok {
			cs, _ := c.(string)
			switch code := bucketing.Code(cs); code {
			case bucketing.CodePolicy, bucketing.CodeValidation:
				v.Code = code
			default:
				return Violation{}, fmt.Errorf("a deny object's code must be \"policy\" or \"validation\", got %v", c)
			}
		}
		if e, ok := x["expected"].(string); ok {
			v.Expected = e
		}
		return v, nil
	}
	return Violation{}, fmt.Errorf("deny members must be strings or objects, got %s", JSONTypeName(it))
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
