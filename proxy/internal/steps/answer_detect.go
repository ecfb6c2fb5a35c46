package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/detect"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/sink"
)

// Reasons of the detect step's refusals.
const (
	// reasonAnswerWithheld: the detectors found something in upstream's
	// answer and the tool withholds such answers.
	reasonAnswerWithheld = "answer_withheld"
)

// DetectJudgement is what a DetectRule made of one answer value.
type DetectJudgement struct {
	// verdict is a sink.Answer* value; "" when nothing was found.
	Verdict string
	// kinds are the kinds found, each once; findings the findings in the
	// value (not its names or headers).
	Kinds    []string
	findings []detect.Finding
	// where says why the value is withheld whatever on_finding says: a
	// finding in a member name or a header, or a scan cut short; "" for
	// content.
	where string
	// out is the value redacted, and n how many values were replaced,
	// when verdict is redacted.
	Out any
	N   int
}

// Judge scans an answer value (a JSON value, or text when text is true)
// and its member names; hdrKinds are the kinds already found in the
// answer's headers. A finding in a member name, or in a header when
// findings are withheld, withholds the answer in any on_finding mode, as
// does a scan cut short by a bound: what lies past it was not scanned.
func Judge(r *conf.DetectRule, v any, text bool, hdrKinds []string) DetectJudgement {
	var rep detect.Report
	if text {
		rep = r.Det.ScanText(v.(string))
	} else {
		rep = r.Det.Scan(v)
	}
	j := DetectJudgement{Kinds: findingKinds(rep.Findings), findings: rep.Findings}
	keyKinds := scanNames(r, v)
	for _, k := range append(keyKinds, hdrKinds...) {
		if !slices.Contains(j.Kinds, k) {
			j.Kinds = append(j.Kinds, k)
		}
	}
	withhold := func(where string) DetectJudgement {
		j.where, j.Verdict = where, sink.AnswerWithheld
		if r.DryRun {
			j.Verdict = sink.AnswerWouldWithhold
		}
		return j
	}
	switch {
	case len(keyKinds) > 0:
		return withhold("with content its answer checks withhold in its member names")
	case len(hdrKinds) > 0 && !r.Redact:
		return withhold("with content its answer checks withhold in its headers")
	case rep.Incomplete != detect.BoundNone:
		j.Kinds = append(j.Kinds, "incomplete")
		return withhold(fmt.Sprintf("with more than its detectors scan at once (%s)", rep.Incomplete))
	case len(rep.Findings) == 0 && len(hdrKinds) == 0:
		return j
	}
	switch {
	case r.Redact && r.DryRun:
		j.Verdict = sink.AnswerWouldRedact
	case r.Redact:
		j.Verdict, j.Out = sink.AnswerRedacted, v
		if len(rep.Findings) > 0 {
			var counts map[detect.Kind]int
			j.Out, counts = detect.RedactFindings(v, rep.Findings)
			j.N = total(counts)
		}
	case r.DryRun:
		j.Verdict = sink.AnswerWouldWithhold
	default:
		j.Verdict = sink.AnswerWithheld
	}
	return j
}

// Refusal is the refusal of a withheld answer: it names the kinds found
// and where (paths whose member names are not declared in names shown as
// "*"), never what was found. subject is "Tool 'x' answered".
func (j *DetectJudgement) Refusal(subject string, names map[string]struct{}) *conf.Refusal {
	if j.where != "" {
		if strings.HasPrefix(j.where, "with content") {
			return conf.Refuse(bucketing.CodePolicy, reasonAnswerWithheld, fmt.Sprintf("%s %s (%s)", subject, j.where, strings.Join(j.Kinds, ", ")), nil)
		}
		return conf.Refuse(bucketing.CodePolicy, reasonAnswerWithheld, subject+" "+j.where, nil)
	}
	vs := make([]bucketing.Violation, 0, min(len(j.findings), 10))
	for _, f := range j.findings[:min(len(j.findings), 10)] {
		vs = append(vs, bucketing.Violation{Path: RedactPath(f.Pointer, names), Message: "the answer holds " + string(f.Kind)})
	}
	return conf.Refuse(bucketing.CodePolicy, reasonAnswerWithheld,
		fmt.Sprintf("%s with content its answer checks withhold (%s)", subject, strings.Join(j.Kinds, ", ")), vs)
}

// answerDetectStep scans a 2xx answer with the tool's detectors.
type answerDetectStep struct {
	*conf.DetectRule
	tool  string
	limit int64
	names map[string]struct{} // names the answer schema declares, shown in paths
}

func buildAnswerDetect(t *conf.Tool) pipe.AnswerStep {
	a := t.Cfg.Answer
	r := conf.NewDetectRule(&a.AnswerDetectConfig)
	if r == nil {
		return nil
	}
	return answerDetectStep{DetectRule: r, tool: t.Cfg.Name, limit: a.MaxBytes, names: a.Names}
}

func (s answerDetectStep) maxAnswerBytes() int64 { return s.limit }

// readsEveryStatus: an error page can carry a secret or an instruction as
// well as a result can.
func (s answerDetectStep) readsEveryStatus() bool { return true }

// passesUnreadable reports whether an answer larger than the bound goes on
// unchecked.
func (s answerDetectStep) passesUnreadable() bool { return s.Pass }

func (s answerDetectStep) Answer(_ context.Context, c *pipe.Call, a *pipe.Answer) *conf.Refusal {
	subject := fmt.Sprintf("Tool '%s' answered", s.tool)
	v, text, why := read(a, c.State.Cfg.Limits.MaxJSONDepth)
	if why != "" {
		if s.Pass {
			c.NoteAnswer(sink.AnswerUninspected, nil, 0)
			return nil
		}
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable,
			fmt.Sprintf("%s with %s, and its answers are scanned by detectors", subject, why), nil)
	}
	hdr, hdrKinds, hdrN := scanHeader(s.DetectRule, a.Header)
	j := Judge(s.DetectRule, v, text, hdrKinds)
	switch j.Verdict {
	case "":
		return nil
	case sink.AnswerWithheld:
		c.NoteAnswer(sink.AnswerWithheld, j.Kinds, 0)
		return j.Refusal(subject, s.names)
	case sink.AnswerRedacted:
	default:
		c.NoteAnswer(j.Verdict, j.Kinds, 0)
		return nil
	}
	for k, vs := range hdr {
		a.Header[k] = vs
	}
	if len(j.findings) == 0 {
		c.NoteAnswer(sink.AnswerRedacted, j.Kinds, int64(hdrN))
		return nil
	}
	out, err := []byte(nil), error(nil)
	if text {
		out = []byte(j.Out.(string))
	} else if out, err = MarshalAnswer(j.Out); err != nil {
		return conf.Refuse(bucketing.CodeUpstream, pipe.ReasonAnswerUnreadable, subject+" with JSON that cannot be written again after redaction", nil)
	}
	replace(a, out)
	c.NoteAnswer(sink.AnswerRedacted, j.Kinds, int64(j.N+hdrN))
	return nil
}

// headersNotScanned are answer headers the detectors do not read: those
// toolgate sets or checks itself, and the standard ones whose values are
// dates, sizes and media types.
var headersNotScanned = map[string]bool{"Content-Type": true, "Content-Length": true, "Date": true,
	"Content-Encoding": true, "Last-Modified": true, "Expires": true, "Cache-Control": true, "Vary": true}

// scanHeader scans upstream's answer's header values: a secret or an
// instruction in a header reaches a caller that reads headers as surely
// as one in the body. It returns the values with the findings redacted
// (only the headers that had some), the kinds found and how many.
func scanHeader(s *conf.DetectRule, h http.Header) (http.Header, []string, int) {
	var red http.Header
	var kinds []string
	n := 0
	for k, vs := range h {
		if headersNotScanned[k] {
			continue
		}
		for i, v := range vs {
			rep := s.Det.ScanText(v)
			if len(rep.Findings) == 0 {
				continue
			}
			for _, kind := range findingKinds(rep.Findings) {
				if !slices.Contains(kinds, kind) {
					kinds = append(kinds, kind)
				}
			}
			if red == nil {
				red = http.Header{}
			}
			if red[k] == nil {
				red[k] = slices.Clone(vs)
			}
			out, counts := detect.RedactFindings(v, rep.Findings)
			red[k][i] = out.(string)
			n += total(counts)
		}
	}
	return red, kinds, n
}

// scanNames scans the member names of a JSON answer, which the detectors'
// walk of values does not: a secret can be a name as well as a value. It
// returns the kinds found.
func scanNames(s *conf.DetectRule, v any) []string {
	var kinds []string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > maxNameDepth {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				for _, kind := range findingKinds(s.Det.ScanText(k).Findings) {
					if !slices.Contains(kinds, kind) {
						kinds = append(kinds, kind)
					}
				}
				walk(e, depth+1)
			}
		case []any:
			for _, e := range x {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return kinds
}

// maxNameDepth bounds scanNames' walk; answers are already bounded in
// depth by limits.max_json_depth when they are read.
const maxNameDepth = 1000

// readAnswer reads an answer's body for the steps that scan it (the
// detectors, the answer policies): a JSON value (text false), or the text
// of a text/* body (text true). It refuses what a caller's reader could
// read otherwise than the steps do: an encoded body, more than one
// Content-Type, a charset other than UTF-8, a byte order mark, duplicate
// names, and text that a lenient reader takes for JSON (a text body that
// is JSON is read as JSON, so JSON escapes cannot hide what the steps look
// for; one that looks like JSON but is not is refused). why says what
// makes it unreadable; "" when it was read.
func readAnswer(a *pipe.Answer, maxDepth int) (v any, text bool, why string) {
	for _, ce := range a.Header.Values("Content-Encoding") {
		// Every value: a client may decode by any of them.
		if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
			return nil, false, fmt.Sprintf("an encoded body (Content-Encoding %q)", mcp.BoundedText(ce))
		}
	}
	if n := len(a.Header.Values("Content-Type")); n > 1 {
		return nil, false, fmt.Sprintf("%d Content-Type headers", n)
	}
	mt, params, _ := canonical.ParseMediaType(a.Header.Get("Content-Type"))
	if cs := strings.ToLower(strings.TrimSpace(params["charset"])); cs != "" && cs != "utf-8" && cs != "utf8" && cs != "us-ascii" {
		return nil, false, fmt.Sprintf("a body in another charset than UTF-8 (%q)", mcp.BoundedText(cs))
	}
	if bytes.HasPrefix(a.Body, []byte("\xef\xbb\xbf")) {
		return nil, false, "a body that starts with a byte order mark"
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if v, ok := readJSONAnswer(a.Body, maxDepth); ok {
			return v, false, ""
		}
		return nil, false, "a body that is not one JSON value that parsers read alike"
	case strings.HasPrefix(mt, "text/"):
		if !utf8.Valid(a.Body) {
			return nil, false, "text that is not UTF-8"
		}
		if t := bytes.TrimLeft(a.Body, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			// A text answer in JSON's clothes: many callers parse it
			// whatever its media type says.
			if v, ok := readJSONAnswer(a.Body, maxDepth); ok {
				return v, false, ""
			}
			return nil, false, "text that looks like JSON but is not one JSON value that parsers read alike"
		}
		return string(a.Body), true, ""
	}
	return nil, false, fmt.Sprintf("a body that is neither JSON nor text (Content-Type %q)", mcp.BoundedText(mt))
}

// readJSONAnswer decodes one JSON value (numbers as json.Number) that
// every parser reads alike: no duplicate names, within maxDepth.
func readJSONAnswer(body []byte, maxDepth int) (v any, ok bool) {
	if CheckJSONNames("the answer", body, maxDepth) != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// MarshalAnswer writes a redacted JSON answer: no HTML escaping, no
// trailing newline.
func MarshalAnswer(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// findingKinds lists the kinds of findings, each once, in order.
func findingKinds(fs []detect.Finding) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, string(f.Kind)) {
			out = append(out, string(f.Kind))
		}
	}
	return out
}

func total(counts map[detect.Kind]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
