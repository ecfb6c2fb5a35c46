package conf

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
)

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
	// (mcp_answer.go).
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
