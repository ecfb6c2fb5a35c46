package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// ReasonAnswerSchema: upstream's answer does not match the tool's answer
// schema.
const ReasonAnswerSchema = "answer_schema"

// RedactPath keeps, of a violation's JSON pointer into an answer, the
// array indices and the names the schema declares; any other segment is
// the answer's own content and becomes "*".
func RedactPath(p string, names map[string]struct{}) string {
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

func buildAnswerSchema(t *conf.Tool) pipe.AnswerStep {
	a := t.Cfg.Answer
	if a.Compiled == nil {
		return nil
	}
	return answerSchemaStep{tool: t.Cfg.Name, schema: a.Compiled, limit: a.MaxBytes, names: a.Names}
}

func (s answerSchemaStep) maxAnswerBytes() int64 { return s.limit }

func (s answerSchemaStep) Answer(_ context.Context, c *pipe.Call, a *pipe.Answer) *conf.Refusal {
	if a.Status/100 != 2 {
		return nil // the schema is of results; errors upstream gave pass as they are
	}
	subject := fmt.Sprintf("Tool '%s' answered", s.tool)
	mt, _, _ := canonical.ParseMediaType(a.Header.Get("Content-Type"))
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable,
			fmt.Sprintf("%s with a body that is not JSON (Content-Type %q), and its answers are checked against a schema", subject, mcp.BoundedText(mt)), nil)
	}
	if ref := CheckJSONNames("Tool '"+s.tool+"'", a.Body, c.State.Cfg.Limits.MaxJSONDepth); ref != nil {
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable, subject+" with JSON that parsers read differently: "+ref.Detail, ref.Violations)
	}
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil || dec.More() {
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable,
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
			vs[i].Path = RedactPath(vs[i].Path, s.names)
			if vs[i].Reason == bucketing.ReasonUnknownField {
				// Its message lists the names expected there: the
				// schema's, not the answer's.
				vs[i].Message = strings.Replace(vs[i].Message, "unknown argument", "undeclared member", 1)
			}
		}
		return conf.Refuse(bucketing.CodeUpstream, ReasonAnswerSchema,
			fmt.Sprintf("%s with a result that does not match its answer schema (%d violation(s), first at %s)", subject, len(vs), conf.PathOrArgs(vs[0].Path)), vs)
	}
	return nil
}
