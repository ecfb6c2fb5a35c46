package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/sink"
)

// The answer side of a plain HTTP tool's chain: steps that see upstream's
// answer before the caller does. A tool without answer steps pays nothing:
// its answers stream past as before. A tool with some has each 2xx answer
// (but 204, and the answer to HEAD) read whole, up to the largest bound its
// steps ask for, and checked; an answer its steps refuse is replaced by an
// envelope that names what failed and never holds the answer's content.
// Other answers (errors upstream gave) pass as they would without steps.

// answer is upstream's answer as answer steps see it. Steps read it; a
// step that rewrites the body (redaction) does so through replace, and
// the steps after it see the new body.
type answer struct {
	// Status is upstream's status code: 2xx, or any status with a body
	// when a step of the chain reads every status.
	Status int
	// Header is upstream's answer's header, hop-by-hop and X-Toolgate-*
	// headers removed.
	Header http.Header
	// Body is the whole body, at most the chain's answer bound.
	Body []byte
	// replaced is true when a step rewrote Body.
	replaced bool

	// What read decoded of Body, kept for the steps after the first.
	read1 bool
	v     any
	text  bool
	why   string
}

// replace puts a rewritten body in place of upstream's.
func (a *answer) replace(body []byte) { a.Body, a.replaced, a.read1 = body, true, false }

// read reads Body as the steps that scan it do (readAnswer), once: the
// steps after the first share what it decoded, until a step replaces the
// body. The value is shared, so a step that changes it in place must
// replace the body afterwards.
func (a *answer) read(maxDepth int) (v any, text bool, why string) {
	if !a.read1 {
		a.v, a.text, a.why = readAnswer(a, maxDepth)
		a.read1 = true
	}
	return a.v, a.text, a.why
}

// noteAnswer records what the answer checks did with upstream's answer:
// the verdict (sink.Answer*), the kinds they found (added, each once) and
// how many values they replaced.
func (c *call) noteAnswer(verdict string, kinds []string, redactions int64) {
	c.ev.Answer = verdict
	for _, k := range kinds {
		if !slices.Contains(c.ev.AnswerFindings, k) {
			c.ev.AnswerFindings = append(c.ev.AnswerFindings, k)
		}
	}
	c.ev.Redactions += redactions
}

// answerEntry is one place in the order of answer steps: how a tool's
// step there is built (nil: the tool has none), from the tool alone
// (build) or from the snapshot too (buildEnv, for a step that calls a
// collaborator such as the answer policies).
type answerEntry struct {
	name     string
	build    func(t *tool) answerStep
	buildEnv func(e *chainEnv) answerStep
}

// answerOrder is the order of a plain HTTP tool's answer steps. A new
// answer step is one file (its config section, its compile, its step) and
// one entry here.
var answerOrder = []answerEntry{
	{name: "answer_schema", build: buildAnswerSchema},
	{name: "answer_detect", build: buildAnswerDetect},
	{name: "answer_policy", buildEnv: buildAnswerPolicy},
}

// reasonAnswerUnreadable: upstream's answer cannot be checked (not a JSON
// object, duplicate names, nested too deep, larger than the bound).
const reasonAnswerUnreadable = "answer_unreadable"

// answerBounder is an answer step that says how much of an answer it may
// read: the chain reads up to the largest bound of its steps.
type answerBounder interface {
	maxAnswerBytes() int64
}

// answerPasser is an answer step that lets an answer larger than the
// chain's bound go on unchecked. Such an answer passes only when every
// answer step of the chain is one that lets it.
type answerPasser interface {
	passesUnreadable() bool
}

// defaultAnswerBytes bounds the answer an answer step reads when none of
// the tool's steps gives a bound: 1 MiB.
const defaultAnswerBytes = 1 << 20

// buildAnswerSteps compiles a plain HTTP tool's answer steps, and the most
// of an answer they read.
// It also reports whether an answer larger than that passes unchecked,
// and whether a step reads answers of every status.
func buildAnswerSteps(e *chainEnv) (steps []answerStep, limit int64, pass, all bool) {
	pass = true
	for _, en := range answerOrder {
		var s answerStep
		if en.buildEnv != nil {
			s = en.buildEnv(e)
		} else {
			s = en.build(e.t)
		}
		if s == nil {
			continue
		}
		steps = append(steps, s)
		if b, ok := s.(answerBounder); ok {
			limit = max(limit, b.maxAnswerBytes())
		}
		p, ok := s.(answerPasser)
		pass = pass && ok && p.passesUnreadable()
		if a, ok := s.(answerAller); ok && a.readsEveryStatus() {
			all = true
		}
	}
	if len(steps) > 0 && limit == 0 {
		limit = defaultAnswerBytes
	}
	return steps, limit, pass && len(steps) > 0, all
}

// answerChecked reports whether an answer goes through the chain's answer
// steps: a 2xx answer with a body, and when a step reads every answer
// (the detectors: an error page can carry a secret or an instruction as
// well as a result) any other answer with a body too.
func (ch *chain) answerChecked(r *http.Request, resp *http.Response) bool {
	if len(ch.answers) == 0 || r.Method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return false
	}
	return resp.StatusCode/100 == 2 || ch.answerAll
}

// answerAller is an answer step that reads answers of every status, not
// only 2xx.
type answerAller interface {
	readsEveryStatus() bool
}

// runAnswers reads upstream's answer whole and runs the answer steps on
// it. It returns the caller's answer when a step refused (or the answer
// could not be read), and nil when the answer goes on: then resp's body is
// the bytes read.
func (c *call) runAnswers(ctx context.Context, r *http.Request, resp *http.Response) *http.Response {
	ch := c.ch
	buf, failed := c.readAnswerBody(r, resp, ch.answerLimit)
	if failed != nil {
		return failed
	}
	if int64(len(buf)) > ch.answerLimit {
		if ch.answerPass {
			c.noteAnswer(sink.AnswerUninspected, nil, 0)
			resp.Body = multiReadCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
			return nil
		}
		resp.Body.Close()
		c.cancel()
		c.noteAnswer(sink.AnswerWithheld, []string{reasonAnswerUnreadable}, 0)
		return c.refuseAnswer(r, resp.StatusCode, refuse(bucketing.CodeUpstream, reasonAnswerUnreadable,
			fmt.Sprintf("%s answered with more than the %d bytes its answer checks read", c.subject(), ch.answerLimit), nil))
	}
	resp.Body.Close()
	a := &answer{Status: resp.StatusCode, Header: resp.Header, Body: buf}
	for _, s := range ch.answers {
		if ref := s.answer(ctx, c, a); ref != nil {
			c.cancel()
			if c.ev.Answer != sink.AnswerWithheld {
				// A step that refuses without saying more (the schema,
				// an unreadable answer): the caller never saw it.
				c.noteAnswer(sink.AnswerWithheld, []string{ref.reason}, 0)
			}
			return c.refuseAnswer(r, resp.StatusCode, ref)
		}
	}
	if c.ev.Answer == "" {
		c.noteAnswer(sink.AnswerPassed, nil, 0)
	}
	if a.replaced {
		resp.ContentLength = int64(len(a.Body))
		resp.Header.Del("Content-Length")
		for _, k := range []string{"Etag", "Content-Md5", "Digest", "Content-Range", "Accept-Ranges"} {
			resp.Header.Del(k)
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(a.Body))
	return nil
}

// readAnswerBody reads upstream's answer up to limit bytes and one more (so
// that a larger answer shows as longer than limit). When the read fails
// (upstream cut the answer short, or timed out), the call fails and
// failed is the caller's answer.
func (c *call) readAnswerBody(r *http.Request, resp *http.Response, limit int64) (buf []byte, failed *http.Response) {
	buf, err := readUpTo(resp.Body, resp.ContentLength, limit)
	if err != nil {
		resp.Body.Close()
		c.cancel()
		res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Err: err}, c.rules(), time.Now())
		return nil, c.fail(r, res, nil, statusForTransport(res))
	}
	return buf, nil
}

// refuseAnswer answers a call whose upstream answer an answer step refused:
// always the envelope, 502, and the error code header. The event records
// upstream's status (upstream was called: the call is not refused) and the
// violations' paths.
func (c *call) refuseAnswer(r *http.Request, upStatus int, ref *refusal) *http.Response {
	body := ref.envelope()
	c.noteRefusal(ref)
	c.finish(bucketing.Result{Code: ref.code, Class: bucketing.ClassOf(ref.code), Reason: ref.reason}, upStatus, int64(len(body)))
	return envelopeResponse(r, http.StatusBadGateway, string(ref.code), nil, body)
}
