package pipe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/sink"
)

// The answer side of a plain HTTP tool's chain: steps that see upstream's
// answer before the caller does. A tool without answer steps pays nothing:
// its answers stream past as before. A tool with some has each 2xx answer
// (but 204, and the answer to HEAD) read whole, up to the largest bound its
// steps ask for, and checked; an answer its steps refuse is replaced by an
// envelope that names what failed and never holds the answer's content.
// Other answers (errors upstream gave) pass as they would without steps.

// Answer is upstream's answer as answer steps see it. Steps read it; a
// step that rewrites the body (redaction) does so through replace, and
// the steps after it see the new body.
type Answer struct {
	// Status is upstream's status code: 2xx, or any status with a body
	// when a step of the chain reads every status.
	Status int
	// Header is upstream's answer's header, hop-by-hop and X-Toolgate-*
	// headers removed.
	Header http.Header
	// Body is the whole body, at most the chain's answer bound.
	Body []byte
	// replaced is true when a step rewrote Body.
	Replaced bool

	// What read decoded of Body, kept for the steps after the first.
	Read1 bool
	Value any
	Text  bool
	Why   string
}

// NoteAnswer records what the answer checks did with upstream's answer:
// the verdict (sink.Answer*), the kinds they found (added, each once) and
// how many values they replaced.
func (c *Call) NoteAnswer(verdict string, kinds []string, redactions int64) {
	c.Event.Answer = verdict
	for _, k := range kinds {
		if !slices.Contains(c.Event.AnswerFindings, k) {
			c.Event.AnswerFindings = append(c.Event.AnswerFindings, k)
		}
	}
	c.Event.Redactions += redactions
}

// ReasonAnswerUnreadable: upstream's answer cannot be checked (not a JSON
// object, duplicate names, nested too deep, larger than the bound).
const ReasonAnswerUnreadable = "answer_unreadable"

// answerChecked reports whether an answer goes through the chain's answer
// steps: a 2xx answer with a body, and when a step reads every answer
// (the detectors: an error page can carry a secret or an instruction as
// well as a result) any other answer with a body too.
func (ch *Chain) answerChecked(r *http.Request, resp *http.Response) bool {
	if len(ch.Answers) == 0 || r.Method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return false
	}
	return resp.StatusCode/100 == 2 || ch.AnswerAll
}

// runAnswers reads upstream's answer whole and runs the answer steps on
// it. It returns the caller's answer when a step refused (or the answer
// could not be read), and nil when the answer goes on: then resp's body is
// the bytes read.
func (c *Call) runAnswers(ctx context.Context, r *http.Request, resp *http.Response) *http.Response {
	ch := c.Chain
	buf, failed := c.ReadAnswerBody(r, resp, ch.AnswerLimit)
	if failed != nil {
		return failed
	}
	if int64(len(buf)) > ch.AnswerLimit {
		if ch.AnswerPass {
			c.NoteAnswer(sink.AnswerUninspected, nil, 0)
			resp.Body = MultiReadCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
			return nil
		}
		resp.Body.Close()
		c.Cancel()
		c.NoteAnswer(sink.AnswerWithheld, []string{ReasonAnswerUnreadable}, 0)
		return c.refuseAnswer(r, resp.StatusCode, conf.Refuse(bucketing.CodeUpstream, ReasonAnswerUnreadable,
			fmt.Sprintf("%s answered with more than the %d bytes its answer checks read", c.Subject(), ch.AnswerLimit), nil))
	}
	resp.Body.Close()
	a := &Answer{Status: resp.StatusCode, Header: resp.Header, Body: buf}
	for _, s := range ch.Answers {
		if ref := s.Answer(ctx, c, a); ref != nil {
			c.Cancel()
			if c.Event.Answer != sink.AnswerWithheld {
				// A step that refuses without saying more (the schema,
				// an unreadable answer): the caller never saw it.
				c.NoteAnswer(sink.AnswerWithheld, []string{ref.Reason}, 0)
			}
			return c.refuseAnswer(r, resp.StatusCode, ref)
		}
	}
	if c.Event.Answer == "" {
		c.NoteAnswer(sink.AnswerPassed, nil, 0)
	}
	if a.Replaced {
		resp.ContentLength = int64(len(a.Body))
		resp.Header.Del("Content-Length")
		DropBodyHeaders(resp.Header, false)
	}
	resp.Body = newBytesBody(a.Body)
	return nil
}

// ReadAnswerBody reads upstream's answer up to limit bytes and one more (so
// that a larger answer shows as longer than limit). When the read fails
// (upstream cut the answer short, or timed out), the call fails and
// failed is the caller's answer.
func (c *Call) ReadAnswerBody(r *http.Request, resp *http.Response, limit int64) (buf []byte, failed *http.Response) {
	buf, err := conf.ReadUpTo(resp.Body, resp.ContentLength, limit)
	if err != nil {
		resp.Body.Close()
		c.Cancel()
		res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Err: err}, c.rules(), time.Now())
		return nil, c.fail(r, res, nil, statusForTransport(res))
	}
	return buf, nil
}

// refuseAnswer answers a call whose upstream answer an answer step refused:
// always the envelope, 502, and the error code header. The event records
// upstream's status (upstream was called: the call is not refused) and the
// violations' paths.
func (c *Call) refuseAnswer(r *http.Request, upStatus int, ref *conf.Refusal) *http.Response {
	body := ref.Envelope()
	c.NoteRefusal(ref)
	c.Finish(bucketing.Result{Code: ref.Code, Class: bucketing.ClassOf(ref.Code), Reason: ref.Reason}, upStatus, int64(len(body)))
	return EnvelopeResponse(r, http.StatusBadGateway, string(ref.Code), nil, body)
}

// AnswerChecker is the answer policy step's collaborator: it decides one
// answer (in.Answer set) with a tool's answer policies. policies.Set
// satisfies it.
type AnswerChecker interface {
	CheckAnswer(ctx context.Context, in *policies.Input) policies.AnswerDecision
}
