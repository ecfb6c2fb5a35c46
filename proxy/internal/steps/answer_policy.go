package steps

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/sink"
)

// answerPolicyStep asks a tool's answer policies about an answer.
type answerPolicyStep struct {
	tool    string
	chk     pipe.AnswerChecker
	limit   int64
	headers []string // lower case: content-type, then the tool's policy_headers
}

func buildAnswerPolicy(e *pipe.ChainEnv) pipe.AnswerStep {
	a := e.Tool.Cfg.Answer
	chk := e.Snap.AnswerCheckers[e.Tool.Cfg.Name]
	if len(a.Policies) == 0 || chk == nil {
		return nil
	}
	return answerPolicyStep{tool: e.Tool.Cfg.Name, chk: chk, limit: a.MaxBytes,
		headers: append([]string{"content-type"}, a.PolicyHeaders...)}
}

func (s answerPolicyStep) maxAnswerBytes() int64 { return s.limit }

// readsEveryStatus: an error page reaches the caller as surely as a result
// does, and the policies see its status.
func (s answerPolicyStep) readsEveryStatus() bool { return true }

func (s answerPolicyStep) Answer(ctx context.Context, c *pipe.Call, a *pipe.Answer) *conf.Refusal {
	subject := fmt.Sprintf("Tool '%s' answered", s.tool)
	v, _, why := read(a, c.State.Cfg.Limits.MaxJSONDepth)
	if why != "" {
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable,
			fmt.Sprintf("%s with %s, and its answers are decided by policies", subject, why), nil)
	}
	h := make(map[string]string, len(s.headers))
	for _, name := range s.headers {
		if vs := a.Header.Values(name); len(vs) > 0 {
			h[name] = strings.Join(vs, ", ")
		}
	}
	in := c.Input()
	in.Answer = &policies.Answer{Status: a.Status, Headers: h, Body: foldNames(v)}
	d := s.chk.CheckAnswer(ctx, in)
	if len(d.FailedOpen) > 0 {
		msg := strings.Join(d.FailedOpen, "; ")
		if c.Event.PolicyError != "" {
			msg = c.Event.PolicyError + "; " + msg
		}
		c.Event.PolicyError = msg
	}
	if d.Withhold {
		noteAnswerPolicy(c, sink.AnswerWithheld, policyKinds(d.Policies), 0)
		reason := reasonAnswerWithheld
		if d.Reason != "" {
			reason = d.Reason // the policy failed closed
		}
		return conf.Refuse(bucketing.CodePolicy, reason, d.Detail, d.Violations)
	}
	if len(d.WouldWithhold) > 0 {
		noteAnswerPolicy(c, sink.AnswerWouldWithhold, policyKinds(d.WouldWithhold), 0)
	}
	if len(d.WouldRedact) > 0 {
		if names := redactingPolicies(v, d.WouldRedact); len(names) > 0 {
			noteAnswerPolicy(c, sink.AnswerWouldRedact, policyKinds(names), 0)
		}
	}
	if len(d.Redact) == 0 {
		return nil
	}
	var names []string
	n := 0
	for _, r := range d.Redact {
		if replaceAt(v, r.Pointer, "[redacted:policy:"+r.Policy+"]") {
			n++
			if !slices.Contains(names, r.Policy) {
				names = append(names, r.Policy)
			}
		}
	}
	if n == 0 {
		return nil // nothing the pointers name is in this answer
	}
	out, err := MarshalAnswer(v)
	if err != nil {
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable, subject+" with JSON that cannot be written again after redaction", nil)
	}
	replace(a, out)
	noteAnswerPolicy(c, sink.AnswerRedacted, policyKinds(names), int64(n))
	return nil
}

// answerRank orders the answer verdicts: a step records its verdict only
// when it says more than what an earlier step recorded (a dry-run policy
// does not hide that the detectors redacted).
var answerRank = map[string]int{"": 0, sink.AnswerPassed: 0, sink.AnswerWouldRedact: 1,
	sink.AnswerWouldWithhold: 2, sink.AnswerRedacted: 3, sink.AnswerWithheld: 4}

// noteAnswerPolicy is NoteAnswer, keeping an earlier step's verdict when it
// ranks higher.
func noteAnswerPolicy(c *pipe.Call, verdict string, kinds []string, redactions int64) {
	if answerRank[c.Event.Answer] > answerRank[verdict] {
		verdict = c.Event.Answer
	}
	c.NoteAnswer(verdict, kinds, redactions)
}

// policyKinds names policies as the event's answer_findings does:
// "policy:<name>".
func policyKinds(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "policy:" + n
	}
	return out
}

// redactingPolicies lists the policies of rs whose pointers name a value
// of v, each once.
func redactingPolicies(v any, rs []policies.Redaction) []string {
	var names []string
	for _, r := range rs {
		if _, _, ok := lookupFolded(v, r.Pointer); ok && !slices.Contains(names, r.Policy) {
			names = append(names, r.Policy)
		}
	}
	return names
}

// foldNames returns v with every object member name in lower case under
// Unicode case folding (foldName), as a reader that matches names
// regardless of case reads it; v itself is not changed, and is returned
// as it is when no name needs folding. readAnswer refused any object with
// two names that fold alike, so no member is lost.
func foldNames(v any) any {
	if !hasFoldable(v, 0) {
		return v
	}
	return foldCopy(v, 0)
}

// maxFoldDepth bounds foldNames' walk; answers are bounded in depth by
// limits.max_json_depth before (and the policies refuse deeper input).
const maxFoldDepth = policies.MaxInputDepth

func hasFoldable(v any, depth int) bool {
	if depth > maxFoldDepth {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if needsFold(k) || hasFoldable(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasFoldable(e, depth+1) {
				return true
			}
		}
	}
	return false
}

func foldCopy(v any, depth int) any {
	if depth > maxFoldDepth {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[policyName(k)] = foldCopy(e, depth+1)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = foldCopy(e, depth+1)
		}
		return out
	}
	return v
}

// policyName is a member name as answer policies see it: each letter
// replaced by one representative of its case-folding orbit (the lower-case
// letter where the orbit has one: "SSN", "Ssn" and "ſsn" all read "ssn").
// It maps rune by rune, so two names read alike exactly when they are
// equal under case folding, which readAnswer refuses within one object.
func policyName(k string) string {
	if !needsFold(k) {
		return k
	}
	var b strings.Builder
	for _, r := range k {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune is r's representative: the least rune of its case-folding
// orbit, or that rune's lower case when it is in the orbit too.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	l := unicode.ToLower(least)
	for f := unicode.SimpleFold(least); l != least; f = unicode.SimpleFold(f) {
		if f == l {
			return l
		}
		if f == least {
			break
		}
	}
	return least
}

// lookupFolded finds the container and key (or index) that a JSON pointer
// in folded names (as a policy saw the body) names in v, the body as
// upstream sent it; ok is false when v holds no such value.
func lookupFolded(v any, ptr string) (parent any, key string, ok bool) {
	if ptr == "" || ptr[0] != '/' {
		return nil, "", false
	}
	segs := strings.Split(ptr[1:], "/")
	cur := v
	for i, seg := range segs {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		var next any
		found := false
		switch x := cur.(type) {
		case map[string]any:
			for k, e := range x {
				if policyName(k) == seg {
					key, next, found = k, e, true
					break
				}
			}
		case []any:
			n, err := strconv.Atoi(seg)
			if err == nil && n >= 0 && n < len(x) && strconv.Itoa(n) == seg {
				key, next, found = seg, x[n], true
			}
		}
		if !found {
			return nil, "", false
		}
		if i == len(segs)-1 {
			return cur, key, true
		}
		cur = next
	}
	return nil, "", false
}

// replaceAt puts with in place of the value a folded-name pointer names
// in v; it reports whether there was one.
func replaceAt(v any, ptr, with string) bool {
	parent, key, _ := lookupFolded(v, ptr)
	switch x := parent.(type) {
	case map[string]any:
		x[key] = with
		return true
	case []any:
		n, _ := strconv.Atoi(key)
		x[n] = with
		return true
	}
	return false
}
