package bucketing

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// MaxReason is the longest Reason a Rule may name, in bytes.
const MaxReason = 64

// Rule overrides the status table for one tool's upstream answers. It is
// configuration: write it in YAML, check it once with Rules.Validate, and do
// not change it after. A rule matches an answer when every condition it sets
// holds; it must set at least one. Rules never see transport errors.
//
// For example, a 403 whose body says the daily quota is exhausted is a rate
// limit, not an auth failure:
//
//	rules:
//	  - status: 403
//	    body_contains: rateLimitExceeded
//	    code: rate_limit
//	    reason: quota_exhausted
type Rule struct {
	// Status is the HTTP status the answer must have, 100 to 599. Default 0:
	// any status.
	Status int `yaml:"status" json:"status"`
	// BodyContains is a substring the first MaxRuleBody bytes of the body
	// must contain, matched byte for byte. Default "": no body condition.
	BodyContains string `yaml:"body_contains" json:"body_contains"`
	// JSONField names a top-level member the body must have, the body being
	// a JSON object, with a value that is not null, false or "" (0, {} and []
	// count as present). Names are matched exactly, after JSON unescaping;
	// nested paths are not supported; with duplicate members the first
	// counts. Members are looked for in the first MaxRuleBody bytes, so a
	// body cut short matches when the member and its whole value come before
	// the cut. Default "": no JSON condition.
	JSONField string `yaml:"json_field" json:"json_field"`
	// Code is the bucket a matching answer falls into. It is required: one
	// of the error codes, or CodeOK ("ok") to count the answer as a success.
	Code Code `yaml:"code" json:"code"`
	// Class overrides the code's class. Default "": ClassOf(Code). It must
	// be empty when Code is ok.
	Class Class `yaml:"class" json:"class"`
	// Reason is the finer word dashboards see, in lowercase letters, digits
	// and underscores, at most MaxReason bytes, such as "error_in_body" or
	// "quota_exhausted". Default "": ReasonRule ("rule"). It must be empty
	// when Code is ok.
	Reason string `yaml:"reason" json:"reason"`
}

// Rules are one tool's rules, tried in order; the first that matches wins.
type Rules []Rule

// Validate reports every problem with the rules, each as a *RuleError that
// names the rule's index, joined with errors.Join; it returns nil when there
// are none. It does not change the rules: Classify applies the defaults.
func (rs Rules) Validate() error {
	var errs []error
	for i, r := range rs {
		for _, p := range r.problems() {
			errs = append(errs, &RuleError{Index: i, Problem: p})
		}
	}
	return errors.Join(errs...)
}

// knownCodes lists the codes a Rule may name, in the order error messages
// give them: ok, then Codes.
var knownCodes = append([]Code{CodeOK}, Codes()...)

var knownClasses = []Class{ClassUser, ClassPolicy, ClassTransient, ClassTerminal}

func (r Rule) problems() []string {
	var ps []string
	if r.Status == 0 && r.BodyContains == "" && r.JSONField == "" {
		ps = append(ps, "rule has no condition; set status, body_contains or json_field")
	}
	if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
		ps = append(ps, "status "+strconv.Itoa(r.Status)+" is out of range; expected 100..599, or 0 for any status")
	}
	if len(r.BodyContains) > MaxRuleBody {
		ps = append(ps, "body_contains is longer than the "+strconv.Itoa(MaxRuleBody)+" bytes rules look at, so it can never match")
	}
	switch {
	case r.Code == "":
		ps = append(ps, "code is required; expected one of: "+join(knownCodes))
	case !isKnownCode(r.Code):
		ps = append(ps, "unknown code "+strconv.Quote(string(r.Code))+"; expected one of: "+join(knownCodes))
	case r.Code == CodeOK:
		if r.Class != ClassNone {
			ps = append(ps, "class must be empty when code is ok")
		}
		if r.Reason != "" {
			ps = append(ps, "reason must be empty when code is ok")
		}
	}
	if r.Class != ClassNone && !isKnownClass(r.Class) {
		ps = append(ps, "unknown class "+strconv.Quote(string(r.Class))+"; expected one of: "+join(knownClasses))
	}
	if r.Reason != "" && !isWord(r.Reason) {
		ps = append(ps, "reason "+strconv.Quote(r.Reason)+" must be lowercase letters, digits and underscores, at most "+strconv.Itoa(MaxReason)+" of them")
	}
	return ps
}

func isKnownCode(c Code) bool { return slices.Contains(knownCodes, c) }

func isKnownClass(c Class) bool {
	switch c {
	case ClassUser, ClassPolicy, ClassTransient, ClassTerminal:
		return true
	}
	return false
}

func isWord(s string) bool {
	if len(s) > MaxReason {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func join[T ~string](vs []T) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(v))
	}
	return b.String()
}

// applyRules returns the result of the first rule that matches o, and
// whether one did. o.Status is not 0.
func applyRules(o Outcome, rules Rules) (Result, bool) {
	body := o.Body
	if len(body) > MaxRuleBody {
		body = body[:MaxRuleBody]
	}
	for i := range rules {
		r := &rules[i]
		switch {
		case r.Status == 0 && r.BodyContains == "" && r.JSONField == "":
			continue // no condition: invalid, never matches
		case r.Status != 0 && r.Status != o.Status:
			continue
		case r.BodyContains != "" && !bytes.Contains(body, []byte(r.BodyContains)):
			continue
		case r.JSONField != "" && !present(member(body, r.JSONField)):
			continue
		}
		return r.result(o.Status), true
	}
	return Result{}, false
}

// result is what a matching rule makes of an answer with the given status.
// It applies the defaults, so that rules which were never validated still
// give a consistent Result: an unknown code becomes CodeUnknown and an
// unknown class the code's default.
func (r *Rule) result(status int) Result {
	if r.Code == CodeOK {
		return Result{}
	}
	code := r.Code
	if !isKnownCode(code) {
		code = CodeUnknown
	}
	class := r.Class
	if !isKnownClass(class) {
		class = ClassOf(code)
	}
	reason := r.Reason
	if reason == "" {
		reason = ReasonRule
	}
	detail := answered(status)
	if r.JSONField != "" {
		detail += " with a member " + strconv.Quote(r.JSONField) + " in its body"
	}
	detail += ", which a rule for this tool buckets as " + string(code)
	return Result{Code: code, Class: class, Reason: reason, Detail: detail}
}

// member returns the value of the first top-level member called name of
// the JSON object body starts with, or nil when there is none. It reads no
// further than it must and allocates nothing unless a member name holds an
// escape. It checks only the structure it walks through: for valid JSON it
// agrees with a full decoder, and for anything else it gives an answer
// without failing (a body cut short still counts up to where it stops, but a
// value that runs into the end of body does not).
func member(body []byte, name string) []byte {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return nil
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return nil
	}
	for i < len(body) && body[i] == '"' {
		keyEnd := skipString(body, i)
		if keyEnd < 0 {
			return nil
		}
		key := body[i:keyEnd]
		i = skipSpace(body, keyEnd)
		if i == len(body) || body[i] != ':' {
			return nil
		}
		i = skipSpace(body, i+1)
		end := skipValue(body, i)
		if end < 0 {
			return nil
		}
		if keyIs(key, name) {
			return body[i:end]
		}
		i = skipSpace(body, end)
		if i == len(body) || body[i] != ',' {
			return nil // '}' ends the object; anything else is not JSON
		}
		i = skipSpace(body, i+1)
	}
	return nil
}

// keyIs reports whether the quoted member name key (quotes included) is name.
func keyIs(key []byte, name string) bool {
	raw := key[1 : len(key)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var unquoted string
	return json.Unmarshal(key, &unquoted) == nil && unquoted == name
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i]
// (a '"'), or -1 when it does not end within b.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value that starts at b[i], or
// -1 when there is none or it does not end within b.
func skipValue(b []byte, i int) int {
	if i == len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				i-- // the loop steps past the closing quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	case ',', ':', '}', ']':
		return -1
	default: // a number, true, false or null: up to the next delimiter
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return -1
	}
}

// present reports whether a member's raw value, as member returns it,
// counts as present: it exists and is not null, false or "".
func present(v []byte) bool {
	switch string(v) {
	case "", "null", "false", `""`:
		return false
	}
	return true
}
