package policies

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on what a policy's approval request may carry: it is shown to a
// person and stored, so it is small.
const (
	// MaxApprovalEffectBytes bounds approval.effect; longer is cut.
	MaxApprovalEffectBytes = 512
	// MaxApprovalSummaryFields bounds the fields of approval.summary; more
	// is a policy error.
	MaxApprovalSummaryFields = 32
	// MaxApprovalSummaryKeyBytes bounds a summary field's name.
	MaxApprovalSummaryKeyBytes = 64
	// MaxApprovalSummaryValueBytes bounds one summary value; longer is cut.
	MaxApprovalSummaryValueBytes = 256
)

// Approval is a policy's request that a person approve a call before it
// goes upstream. Only what the policy put here is shown to the person
// deciding: the call's arguments are never shown otherwise.
type Approval struct {
	// Policy names the policy that asked; "" when the tool's configuration
	// requires approval.
	Policy string `json:"policy,omitempty"`
	// Effect is one human sentence describing what the call will do, such
	// as "replaces the abstract of document 42".
	Effect string `json:"effect"`
	// Summary holds the argument fields the policy chose to show, by name,
	// each value as text (a JSON value that is not a string as its JSON).
	Summary map[string]string `json:"summary"`
}

// decodeApproval reads a decision's approval member: true (approval with
// no description), false or absent (none), an object {effect, summary}, or
// Rego's [value] form of a rule that may be undefined ([] when undefined).
func decodeApproval(raw any) (*Approval, error) {
	if arr, ok := raw.([]any); ok {
		switch len(arr) {
		case 0:
			return nil, nil
		case 1:
			raw = arr[0]
		default:
			return nil, fmt.Errorf("approval must be one value, got %d", len(arr))
		}
	}
	switch x := raw.(type) {
	case bool:
		if !x {
			return nil, nil
		}
		return &Approval{Summary: map[string]string{}}, nil
	case map[string]any:
		a := &Approval{Summary: map[string]string{}}
		for k := range x {
			if k != "effect" && k != "summary" {
				return nil, fmt.Errorf("approval has unknown member %q; want effect and summary", k)
			}
		}
		if e, ok := x["effect"]; ok {
			s, isStr := e.(string)
			if !isStr {
				return nil, fmt.Errorf("approval.effect must be a string, got %s", JSONTypeName(e))
			}
			a.Effect = cut(oneLine(s), MaxApprovalEffectBytes)
		}
		if sm, ok := x["summary"]; ok {
			m, isObj := sm.(map[string]any)
			if !isObj {
				return nil, fmt.Errorf("approval.summary must be an object of field names to values, got %s", JSONTypeName(sm))
			}
			if len(m) > MaxApprovalSummaryFields {
				return nil, fmt.Errorf("approval.summary has %d fields; at most %d are shown", len(m), MaxApprovalSummaryFields)
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if k == "" || len(k) > MaxApprovalSummaryKeyBytes {
					return nil, fmt.Errorf("approval.summary field names must be 1 to %d bytes", MaxApprovalSummaryKeyBytes)
				}
				a.Summary[oneLine(k)] = cut(summaryText(m[k]), MaxApprovalSummaryValueBytes)
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("approval must be a boolean or an object {effect, summary}, got %s", JSONTypeName(raw))
}

// summaryText is a summary value as text: a string as it is, anything
// else as its JSON.
func summaryText(v any) string {
	if s, ok := v.(string); ok {
		return oneLine(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "(unprintable)"
	}
	return string(b)
}

// oneLine replaces control characters, so a shown value cannot forge lines.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// cut shortens s to at most n bytes at a UTF-8 boundary, marking the cut
// with an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ApprovalCall is what the approval step sees of a call that passed the
// schema and the policies.
type ApprovalCall struct {
	// Tool is the tool's name (the MCP tool's name on MCP routes).
	Tool string
	// Arguments are the call's arguments, as the policies saw them. They
	// are digested, never stored or shown.
	Arguments map[string]any
	// Agent, Session and TraceID are the caller's, as in Input.
	Agent, Session, TraceID string
	// Method is the call's canonical method, as it goes upstream ("POST"
	// for an MCP tools/call).
	Method string
	// URL is the canonical URL the call goes upstream to: scheme, host,
	// port (always written), path and query, in the proxy's canonical form
	// (an MCP route's server endpoint for a tools/call). It is bound by
	// the grant, never stored or shown: its path and query may carry
	// argument values.
	URL string
	// Destination is what the person deciding is shown of where the call
	// goes: scheme, host and port and the tool's path template (no
	// argument values); on MCP routes the route and its server.
	Destination string
	// Route is the MCP route (the configured tool that names the server)
	// a tools/call came through; "" for plain HTTP calls, whose tool is
	// the route.
	Route string
	// Body is the call's body when the tool forwards it without reading it
	// as its arguments (nil otherwise): the grant binds its bytes.
	Body []byte
	// Annotations are the MCP tool's annotations (Input.ToolAnnotations);
	// nil for plain HTTP calls.
	Annotations map[string]any
	// Ask is the policies' approval request (Decision.Approval); nil when
	// no policy asked.
	Ask *Approval
	// InBand is true when the caller can be asked in-band: an MCP client
	// of the 2026-07-28 revision that declared URL-mode elicitation, on a
	// call that is not the continuation of the server's own input round.
	// The approval step then answers a pending call with a Token, and never
	// holds a call that carries no Token (the person needs the URL first).
	InBand bool
	// Token is the requestState the caller echoed from toolgate's own
	// input-required result ("" when none): it names the approval request
	// and binds it to the call, and the step verifies both.
	Token string
}

// The approval states of a call (ApprovalOutcome.State, the event's
// approval field).
const (
	ApprovalNone        = ""             // the call needs no approval
	ApprovalApproved    = "approved"     // a grant covers the call: it goes upstream
	ApprovalPending     = "pending"      // asked; not decided yet
	ApprovalDenied      = "denied"       // a person denied it
	ApprovalRevised     = "revised"      // a person asked for changed arguments
	ApprovalHeldTimeout = "held_timeout" // held open until hold_timeout, undecided
	ApprovalUnavailable = "unavailable"  // the store failed, or too many are pending
	ApprovalInvalid     = "invalid"      // the caller's in-band Token is forged, altered or lapsed
	ApprovalMismatch    = "mismatch"     // the caller's in-band Token was issued for another call
)

// ApprovalOutcome is the approval step's verdict on one call.
type ApprovalOutcome struct {
	// State is one of the Approval* states; the call goes upstream only
	// when it is ApprovalNone or ApprovalApproved.
	State string
	// ID is the approval request's id; "" when State is ApprovalNone or
	// ApprovalUnavailable.
	ID string
	// URL is where a person decides the request; "" when none is
	// configured.
	URL string
	// Note is the decider's note (on revised and denied).
	Note string
	// ExpiresAt is when a pending request lapses.
	ExpiresAt time.Time
	// RetryAfter is how long a refused caller should wait before retrying
	// the same call (pending, held_timeout, unavailable).
	RetryAfter time.Duration
	// Detail is one sentence for the caller; it never holds an argument
	// value.
	Detail string
	// Token is the requestState of an in-band ask (ApprovalCall.InBand):
	// set on a pending outcome when the tool asks in-band and a URL is
	// configured, "" otherwise. The caller echoes it on its retry.
	Token string
}
