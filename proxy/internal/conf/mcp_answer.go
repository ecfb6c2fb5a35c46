package conf

import (
	"github.com/toolgate/toolgate/policies"
)

// The answer checks of an MCP route: a tools/call's result is held to the
// outputSchema its tool lists and scanned by the built-in detectors before
// the client sees it. The answer is held back (mcp_hold.go) until the
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

// mcpAnswerRule is an MCP route's compiled answer section.
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
