package conf

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/detect"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// DefaultAnswerBytes bounds the answer an answer step reads when none of
// the tool's steps gives a bound: 1 MiB.
const DefaultAnswerBytes = 1 << 20

// The answer policy step: a plain HTTP tool's answers (of every status,
// with a body) decided by the Rego and WASM policies its answer section
// names (answer.policies), which see the answer as input.answer beside the
// call's usual input. A policy allows the answer, withholds it (the caller
// gets a refusal that holds the policy's message, never the answer) or
// redacts values of it by JSON pointer. It runs after the answer schema
// and the detectors.

// AnswerPolicyConfig is the answer policies' part of a tool's answer
// section.
type AnswerPolicyConfig struct {
	// Policies names policies of the policies section (the names request
	// policies use) that decide the tool's answers (of every status, with
	// a body), in order. The tool's policy_mode and fail_open apply to
	// them as to its request policies; global policies do not decide
	// answers. Default: none.
	Policies []string `yaml:"policies"`
	// PolicyHeaders names answer headers the policies see in
	// input.answer.headers besides content-type. Default: none.
	PolicyHeaders []string `yaml:"policy_headers"`
}

// compileAnswerPolicy validates the policies' part of a tool's answer
// section (p is the tool's field path). The policy names are resolved by
// the composition root, which builds the tool's AnswerChecker.
func (c *Config) compileAnswerPolicy(t *Tool, p string) error {
	a := &t.Cfg.Answer
	if len(a.Policies) == 0 {
		if len(a.PolicyHeaders) > 0 {
			return fieldErr(p+".answer.policy_headers", "set without answer.policies: no policy reads them")
		}
		return nil
	}
	if t.Cfg.Protocol == ProtocolMCP {
		return fieldErr(p+".answer.policies", "set only for protocol: http (an mcp route's answers are JSON-RPC)")
	}
	for i, name := range a.Policies {
		if strings.TrimSpace(name) == "" {
			return fieldErr(fmt.Sprintf("%s.answer.policies[%d]", p, i), "empty policy name")
		}
	}
	for i, h := range a.PolicyHeaders {
		if _, ok := policies.InjectHeader(h, ""); !ok {
			return fieldErr(fmt.Sprintf("%s.answer.policy_headers[%d]", p, i), "not a header name")
		}
		a.PolicyHeaders[i] = strings.ToLower(h)
	}
	switch {
	case a.MaxBytes < 0:
		return fieldErr(p+".answer.max_bytes", "must be positive")
	case a.MaxBytes == 0:
		a.MaxBytes = DefaultAnswerBytes
	}
	return nil
}

// The answer schema step: a plain HTTP tool's 2xx answers checked against
// a JSON Schema of its results before the caller sees them.

// AnswerConfig is a plain HTTP tool's answer section: checks of what
// upstream answers, run before the caller gets any of it.
type AnswerConfig struct {
	// Schema is an inline JSON Schema (draft 2020-12 or draft-07) that the
	// tool's 2xx answers must match: a JSON object (a mapping, or a
	// boolean). It is applied as written (unlike the arguments' schema, it
	// is not made strict: add additionalProperties: false where a result
	// must hold nothing else). At most one of Schema and SchemaFile.
	// Default: none, and answers are not read.
	Schema any `yaml:"schema"`
	// SchemaFile is a JSON Schema file, relative to the configuration file.
	SchemaFile string `yaml:"schema_file"`
	// MaxBytes bounds the answer the schema step reads whole; a larger
	// answer cannot be checked and is refused. Default 1 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// AnswerDetectConfig is the built-in detectors' part (answer_detect.go):
	// detect, on_finding, mode, unreadable, instruction_threshold.
	AnswerDetectConfig `yaml:",inline"`
	// AnswerPolicyConfig is the answer policies' part (answer_policy.go):
	// policies, policy_headers.
	AnswerPolicyConfig `yaml:",inline"`
	// OutputSchema, on an MCP route only, is how a tools/call result is
	// held to the outputSchema its tool lists: enforce (a result whose
	// structuredContent does not match, or that has none, is withheld),
	// dry_run (recorded as would_withhold) or off. Default enforce when
	// the route has an answer section; a route without one checks nothing
	// (mcpcall/answer.go).
	OutputSchema string `yaml:"output_schema"`

	Compiled *policies.Schema    // compiled by compileAnswer
	Names    map[string]struct{} // the property names the schema declares
}

// compileAnswer validates a tool's answer section (p is the tool's field
// path) and compiles its schema.
func (c *Config) compileAnswer(t *Tool, p string) error {
	a := &t.Cfg.Answer
	if err := c.compileAnswerPolicy(t, p); err != nil {
		return err
	}
	if t.Cfg.Protocol == ProtocolMCP {
		return c.compileMCPAnswer(t, p)
	}
	if a.OutputSchema != "" {
		return fieldErr(p+".answer.output_schema", "set only for protocol: mcp (a plain HTTP tool's answers are held to answer.schema)")
	}
	if a.Schema == nil && a.SchemaFile == "" {
		if a.MaxBytes != 0 && len(a.Detect) == 0 && len(a.Policies) == 0 {
			return fieldErr(p+".answer.max_bytes", "set without answer.schema or answer.schema_file: nothing reads the answer")
		}
		return c.compileAnswerDetect(t, p)
	}
	switch {
	case a.MaxBytes < 0:
		return fieldErr(p+".answer.max_bytes", "must be positive")
	case a.MaxBytes == 0:
		a.MaxBytes = DefaultAnswerBytes
	}
	sch, err := c.loadSchema(p+".answer", t.Cfg.Name, a.Schema, a.SchemaFile, schemaOpts{strict: false, unknownFormats: t.Cfg.UnknownFormats, unknownKeywords: t.Cfg.UnknownKeywords})
	if err != nil {
		return err
	}
	a.Compiled = sch
	// The names a refusal may show in a violation's path: those the
	// schema itself declares. Any other member name is the answer's
	// content, and is shown as "*".
	doc, _ := jsonOf(a.Schema)
	if a.SchemaFile != "" {
		doc, _ = readLimited(section.Resolve(c.dir, a.SchemaFile), policies.MaxSchemaFileBytes)
	}
	a.Names = map[string]struct{}{}
	var v any
	if json.Unmarshal(doc, &v) == nil {
		declaredNames(v, a.Names, 0)
	}
	return nil
}

// declaredNames collects the member names of every "properties" object in
// a schema document, to a bounded depth.
func declaredNames(v any, out map[string]struct{}, depth int) {
	if depth > 64 {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			if props, ok := sub.(map[string]any); ok && k == "properties" {
				for name := range props {
					out[name] = struct{}{}
				}
			}
			declaredNames(sub, out, depth+1)
		}
	case []any:
		for _, sub := range x {
			declaredNames(sub, out, depth+1)
		}
	}
}

// The answer detect step: a plain HTTP tool's 2xx answers scanned by the
// built-in detectors (proxy/detect: secrets, e-mail and phone numbers,
// instruction-like text) before the caller sees them, and withheld or
// redacted as the tool's answer section says.

// AnswerDetectConfig is the detectors' part of a tool's answer section.
type AnswerDetectConfig struct {
	// Detect names the detectors to run on the tool's answers: groups
	// (secrets, pii, instructions) or single kinds (secret.github_token,
	// pii.email, instruction). Default: none, and no detector runs.
	Detect []string `yaml:"detect"`
	// OnFinding is what an answer with a finding gets: withhold (the
	// caller gets a refusal that names the kinds found and never holds the
	// answer) or redact (each finding is replaced by
	// "[redacted:<kind>]" and the answer goes on). Default withhold.
	OnFinding string `yaml:"on_finding"`
	// Mode is enforce or dry_run: in dry run the answer always goes on
	// unchanged, and the event records what enforcing would have done
	// (answer: would_withhold or would_redact). Default enforce.
	Mode string `yaml:"mode"`
	// Unreadable is what an answer the detectors cannot read gets (not
	// JSON or text, an encoded body, larger than max_bytes): refuse, or
	// pass (it goes on unchecked, and the event says answer: uninspected).
	// Default refuse: nothing passes unscanned unless the tool says so.
	Unreadable string `yaml:"unreadable"`
	// InstructionThreshold is the score at which text counts as
	// instruction-like (docs/answers.md lists the cues). Default 4.
	InstructionThreshold int `yaml:"instruction_threshold"`

	det *detect.Detector // compiled by compileAnswerDetect
}

// The values of answer.on_finding and answer.unreadable.
const (
	onFindingWithhold = "withhold"
	onFindingRedact   = "redact"
	unreadableRefuse  = "refuse"
	unreadablePass    = "pass"
)

// compileAnswerDetect validates the detectors' part of a tool's answer
// section (p is the tool's field path) and builds its detector.
func (c *Config) compileAnswerDetect(t *Tool, p string) error {
	a := &t.Cfg.Answer.AnswerDetectConfig
	if len(a.Detect) == 0 {
		for field, set := range map[string]bool{"on_finding": a.OnFinding != "", "mode": a.Mode != "", "unreadable": a.Unreadable != "", "instruction_threshold": a.InstructionThreshold != 0} {
			if set {
				return fieldErr(p+".answer."+field, "set without answer.detect: no detector runs")
			}
		}
		return nil
	}
	if err := oneOf(&a.OnFinding, p+".answer.on_finding", onFindingWithhold, onFindingRedact); err != nil {
		return err
	}
	if err := oneOf(&a.Mode, p+".answer.mode", policies.ModeEnforce, policies.ModeDryRun); err != nil {
		return err
	}
	if err := oneOf(&a.Unreadable, p+".answer.unreadable", unreadableRefuse, unreadablePass); err != nil {
		return err
	}
	if t.Cfg.Answer.MaxBytes < 0 {
		return fieldErr(p+".answer.max_bytes", "must be positive")
	}
	if t.Cfg.Answer.MaxBytes == 0 {
		t.Cfg.Answer.MaxBytes = DefaultAnswerBytes
	}
	det, err := detect.New(detect.Config{Detect: a.Detect, MaxBytes: int(t.Cfg.Answer.MaxBytes), InstructionThreshold: a.InstructionThreshold})
	if err != nil {
		return fieldErr(p+".answer", "%s", strings.TrimPrefix(err.Error(), detect.ErrConfig.Error()+": "))
	}
	a.det = det
	return nil
}

// oneOf applies the default (the first of allowed) to an empty *v and
// checks that it is one of allowed.
func oneOf(v *string, field string, allowed ...string) error {
	if *v == "" {
		*v = allowed[0]
	}
	if !slices.Contains(allowed, *v) {
		return fieldErr(field, "unknown value %q; expected %s", mcp.BoundedText(*v), strings.Join(allowed, " or "))
	}
	return nil
}

// DetectRule is a compiled detectors section: the detectors, and what
// an answer with a finding gets. A plain HTTP tool's detect step and an
// MCP route's result checks (mcpcall/answer.go) share it.
type DetectRule struct {
	Det    *detect.Detector
	Redact bool
	DryRun bool
	Pass   bool // unreadable answers pass unchecked
}

// NewDetectRule is the rule of a validated detectors section; nil when
// no detector runs.
func NewDetectRule(a *AnswerDetectConfig) *DetectRule {
	if a.det == nil {
		return nil
	}
	return &DetectRule{Det: a.det, Redact: a.OnFinding == onFindingRedact, DryRun: a.Mode == policies.ModeDryRun, Pass: a.Unreadable == unreadablePass}
}

// The answer checks of an MCP route: a tools/call's result is held to the
// outputSchema its tool lists and scanned by the built-in detectors before
// the client sees it. The answer is held back (mcpcall/hold.go) until the
// checks ran: a JSON answer whole, an event stream one event at a time. A
// result the checks withhold reaches the client as an isError result that
// names what failed and never holds the result; a redacted one has
// "[redacted:<kind>]" in place of each finding and is otherwise intact. A
// route without an answer section has no checks, and its answers stream
// past as before.

// The values of answer.output_schema.
const (
	outputSchemaEnforce = policies.ModeEnforce
	OutputSchemaDryRun  = policies.ModeDryRun
	OutputSchemaOff     = "off"
)

// MCPAnswerRule is an MCP route's compiled answer section.
type MCPAnswerRule struct {
	// schema is output_schema: enforce, dry_run or off.
	Schema string
	// detect is the detectors' rule; nil when none runs.
	Detect *DetectRule
	// pass is true when an answer the checks cannot read (larger than
	// limit, encoded, not JSON-RPC) goes on unchecked.
	Pass  bool
	Limit int64
}

// compileMCPAnswer validates an MCP route's answer section (p is the
// tool's field path). The route has answer checks when output_schema or
// detect is set; output_schema defaults to enforce then.
func (c *Config) compileMCPAnswer(t *Tool, p string) error {
	a := &t.Cfg.Answer
	if a.Schema != nil || a.SchemaFile != "" {
		return fieldErr(p+".answer.schema", "set only for protocol: http; an mcp route holds each result to its tool's own outputSchema (answer.output_schema)")
	}
	if a.OutputSchema == "" && len(a.Detect) == 0 {
		for field, set := range map[string]bool{"max_bytes": a.MaxBytes != 0, "unreadable": a.Unreadable != ""} {
			if set {
				return fieldErr(p+".answer."+field, "set without answer.output_schema or answer.detect: nothing reads the answer")
			}
		}
		return c.compileAnswerDetect(t, p)
	}
	if err := oneOf(&a.OutputSchema, p+".answer.output_schema", outputSchemaEnforce, OutputSchemaDryRun, OutputSchemaOff); err != nil {
		return err
	}
	if len(a.Detect) > 0 {
		if err := c.compileAnswerDetect(t, p); err != nil {
			return err
		}
	} else {
		for field, set := range map[string]bool{"on_finding": a.OnFinding != "", "mode": a.Mode != "", "instruction_threshold": a.InstructionThreshold != 0} {
			if set {
				return fieldErr(p+".answer."+field, "set without answer.detect: no detector runs")
			}
		}
		if err := oneOf(&a.Unreadable, p+".answer.unreadable", unreadableRefuse, unreadablePass); err != nil {
			return err
		}
		switch {
		case a.MaxBytes < 0:
			return fieldErr(p+".answer.max_bytes", "must be positive")
		case a.MaxBytes == 0:
			a.MaxBytes = DefaultAnswerBytes
		}
	}
	if a.OutputSchema == OutputSchemaOff && len(a.Detect) == 0 {
		return nil
	}
	t.MCP.Answer = &MCPAnswerRule{Schema: a.OutputSchema, Detect: NewDetectRule(&a.AnswerDetectConfig),
		Pass: a.Unreadable == unreadablePass, Limit: a.MaxBytes}
	return nil
}
