package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/mcp"
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

	compiled *policies.Schema    // compiled by compileAnswer
	names  map[string]struct{} // the property names the schema declares
}

// reasonAnswerSchema: upstream's answer does not match the tool's answer
// schema.
const reasonAnswerSchema = "answer_schema"

// compileAnswer validates a tool's answer section (p is the tool's field
// path) and compiles its schema.
func (c *Config) compileAnswer(t *tool, p string) error {
	a := &t.cfg.Answer
	if err := c.compileAnswerPolicy(t, p); err != nil {
		return err
	}
	if t.cfg.Protocol == ProtocolMCP {
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
		a.MaxBytes = defaultAnswerBytes
	}
	sch, err := c.loadSchema(p+".answer", t.cfg.Name, a.Schema, a.SchemaFile, schemaOpts{strict: false, unknownFormats: t.cfg.UnknownFormats, unknownKeywords: t.cfg.UnknownKeywords})
	if err != nil {
		return err
	}
	a.compiled = sch
	// The names a refusal may show in a violation's path: those the
	// schema itself declares. Any other member name is the answer's
	// content, and is shown as "*".
	doc, _ := jsonOf(a.Schema)
	if a.SchemaFile != "" {
		doc, _ = readLimited(section.Resolve(c.dir, a.SchemaFile), policies.MaxSchemaFileBytes)
	}
	a.names = map[string]struct{}{}
	var v any
	if json.Unmarshal(doc, &v) == nil {
		declaredNames(v, a.names, 0)
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

// redactPath keeps, of a violation's JSON pointer into an answer, the
// array indices and the names the schema declares; any other segment is
// the answer's own content and becomes "*".
func redactPath(p string, names map[string]struct{}) string {
	if p == "" {
		return p
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if _, ok := names[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]; ok {
			continue
		}
		if _, err := strconv.Atoi(seg); err == nil && len(seg) <= 9 {
			continue
		}
		segs[i] = "*"
	}
	return "/" + strings.Join(segs, "/")
}

// answerSchemaStep checks a 2xx answer against the tool's answer schema.
// What it refuses never echoes the answer: the violations hold paths and
// what was expected, as the arguments' schema refusals do.
type answerSchemaStep struct {
	tool   string
	schema *policies.Schema
	limit  int64
	names  map[string]struct{}
}

func buildAnswerSchema(t *tool) answerStep {
	a := t.cfg.Answer
	if a.compiled == nil {
		return nil
	}
	return answerSchemaStep{tool: t.cfg.Name, schema: a.compiled, limit: a.MaxBytes, names: a.names}
}

func (s answerSchemaStep) maxAnswerBytes() int64 { return s.limit }

func (s answerSchemaStep) answer(_ context.Context, c *call, a *answer) *refusal {
	if a.Status/100 != 2 {
		return nil // the schema is of results; errors upstream gave pass as they are
	}
	subject := fmt.Sprintf("Tool '%s' answered", s.tool)
	mt, _, _ := canonical.ParseMediaType(a.Header.Get("Content-Type"))
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return refuse(bucketing.CodeUpstream, reasonAnswerUnreadable,
			fmt.Sprintf("%s with a body that is not JSON (Content-Type %q), and its answers are checked against a schema", subject, mcp.BoundedText(mt)), nil)
	}
	if ref := checkJSONNames("Tool '"+s.tool+"'", a.Body, c.st.cfg.Limits.MaxJSONDepth); ref != nil {
		return refuse(bucketing.CodeUpstream, reasonAnswerUnreadable, subject+" with JSON that parsers read differently: "+ref.detail, ref.violations)
	}
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil || dec.More() {
		return refuse(bucketing.CodeUpstream, reasonAnswerUnreadable,
			subject+" with a body that is not one JSON object, and its answers are checked against a schema", nil)
	}
	vs := s.schema.Validate(doc)
	if len(vs) == 0 {
		// A member in another case than a declared one is one a
		// case-folding caller reads as that member.
		vs = s.schema.FoldedNames(doc)
	}
	if len(vs) > 0 {
		for i := range vs {
			vs[i].Path = redactPath(vs[i].Path, s.names)
			if vs[i].Reason == bucketing.ReasonUnknownField {
				// Its message lists the names expected there: the
				// schema's, not the answer's.
				vs[i].Message = strings.Replace(vs[i].Message, "unknown argument", "undeclared member", 1)
			}
		}
		return refuse(bucketing.CodeUpstream, reasonAnswerSchema,
			fmt.Sprintf("%s with a result that does not match its answer schema (%d violation(s), first at %s)", subject, len(vs), pathOrArgs(vs[0].Path)), vs)
	}
	return nil
}
