package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/bucketing"
)

// The answer side of a plain HTTP tool's chain: steps that see upstream's
// answer before the caller does. A tool without answer steps pays nothing:
// its answers stream past as before. A tool with some has each 2xx answer
// (but 204, and the answer to HEAD) read whole, up to the largest bound its
// steps ask for, and checked; an answer its steps refuse is replaced by an
// envelope that names what failed and never holds the answer's content.
// Other answers (errors upstream gave) pass as they would without steps.

// answer is upstream's answer as answer steps see it. Steps read it and
// do not change it.
type answer struct {
	// Status is upstream's status code (2xx).
	Status int
	// Header is upstream's answer's header, hop-by-hop and X-Toolgate-*
	// headers removed.
	Header http.Header
	// Body is the whole body, at most the chain's answer bound.
	Body []byte
}

// answerEntry is one place in the order of answer steps: how a tool's
// step there is built (nil: the tool has none).
type answerEntry struct {
	name  string
	build func(t *tool) answerStep
}

// answerOrder is the order of a plain HTTP tool's answer steps. A new
// answer step is one file (its config section, its compile, its step) and
// one entry here.
var answerOrder = []answerEntry{
	{name: "answer_schema", build: buildAnswerSchema},
}

// reasonAnswerUnreadable: upstream's answer cannot be checked (not a JSON
// object, duplicate names, nested too deep, larger than the bound).
const reasonAnswerUnreadable = "answer_unreadable"

// answerBounder is an answer step that says how much of an answer it may
// read: the chain reads up to the largest bound of its steps.
type answerBounder interface {
	maxAnswerBytes() int64
}

// defaultAnswerBytes bounds the answer an answer step reads when none of
// the tool's steps gives a bound: 1 MiB.
const defaultAnswerBytes = 1 << 20

// buildAnswerSteps compiles a plain HTTP tool's answer steps, and the most
// of an answer they read.
func buildAnswerSteps(t *tool) ([]answerStep, int64) {
	var steps []answerStep
	var limit int64
	for _, en := range answerOrder {
		s := en.build(t)
		if s == nil {
			continue
		}
		steps = append(steps, s)
		if b, ok := s.(answerBounder); ok {
			limit = max(limit, b.maxAnswerBytes())
		}
	}
	if len(steps) > 0 && limit == 0 {
		limit = defaultAnswerBytes
	}
	return steps, limit
}

// answerChecked reports whether an answer goes through the answer steps:
// a 2xx answer with a body.
func answerChecked(r *http.Request, resp *http.Response) bool {
	return resp.StatusCode/100 == 2 && resp.StatusCode != http.StatusNoContent && r.Method != http.MethodHead
}

// runAnswers reads upstream's answer whole and runs the answer steps on
// it. It returns the caller's answer when a step refused (or the answer
// could not be read), and nil when the answer goes on: then resp's body is
// the bytes read.
func (c *call) runAnswers(ctx context.Context, r *http.Request, resp *http.Response) *http.Response {
	ch := c.ch
	buf, err := readUpTo(resp.Body, resp.ContentLength, ch.answerLimit)
	if err != nil {
		resp.Body.Close()
		c.cancel()
		res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Err: err}, c.rules(), time.Now())
		return c.fail(r, res, nil, statusForTransport(res))
	}
	resp.Body.Close()
	if int64(len(buf)) > ch.answerLimit {
		c.cancel()
		return c.refuseAnswer(r, resp.StatusCode, refuse(bucketing.CodeUpstream, reasonAnswerUnreadable,
			fmt.Sprintf("%s answered with more than the %d bytes its answer checks read", c.subject(), ch.answerLimit), nil))
	}
	a := &answer{Status: resp.StatusCode, Header: resp.Header, Body: buf}
	for _, s := range ch.answers {
		if ref := s.answer(ctx, c, a); ref != nil {
			c.cancel()
			return c.refuseAnswer(r, resp.StatusCode, ref)
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return nil
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
