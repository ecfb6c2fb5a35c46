package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
)

// refusal is an answer toolgate gives itself, without calling upstream.
type refusal struct {
	code       bucketing.Code
	reason     string
	detail     string
	violations []policies.Violation
	// retryAfterMS is when the same call may pass (budgets, rate limits);
	// nil for refusals that retrying does not cure.
	retryAfterMS *int64
	approval     *bucketing.Approval // error.approval, for approval refusals
	// dryRunNote, when set, is what a dry-run step records of this
	// refusal in place of its violations' paths and messages.
	dryRunNote string
}

func refuse(code bucketing.Code, reason, detail string, vs []policies.Violation) *refusal {
	return &refusal{code: code, reason: reason, detail: detail, violations: vs}
}

// envelope is the encoded envelope a refused caller gets.
func (ref *refusal) envelope() []byte {
	// The violations go as they are: only their path, message, expected
	// and got are encoded.
	env := bucketing.Refusal(ref.code, ref.reason, ref.detail, ref.violations)
	env.Error.Approval = ref.approval
	if ref.retryAfterMS != nil {
		env.Error.RetryAfterMS = ref.retryAfterMS
		env.Error.Retryable = env.Error.Class == bucketing.ClassTransient
	}
	return env.Marshal()
}

func schemaRefusal(tool string, vs []policies.Violation) *refusal {
	return refuse(bucketing.CodeValidation, policies.Reason(vs), policies.Detail(tool, vs), vs)
}

// refusalStatus is the one place a refusal becomes an HTTP status: 403 for
// policy, 429 for rate_limit, 503 for events_unavailable, 408 for a body that did not arrive in time, 415 for a body
// toolgate cannot read, 422 for every other validation refusal.
func refusalStatus(ref *refusal) int {
	switch {
	case ref.code == bucketing.CodePolicy:
		return http.StatusForbidden
	case ref.code == bucketing.CodeRateLimit:
		return http.StatusTooManyRequests
	case ref.reason == bucketing.ReasonEventsUnavailable:
		return http.StatusServiceUnavailable
	case ref.reason == bucketing.ReasonBodyTimeout:
		return http.StatusRequestTimeout
	case ref.reason == bucketing.ReasonUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	}
	return http.StatusUnprocessableEntity
}

// refuse answers a refused call: always the envelope, a 4xx status, and the
// error code header. Upstream is never called.
func (c *call) refuse(r *http.Request, ref *refusal) *http.Response {
	body := ref.envelope()
	c.ev.Refused = true
	c.noteRefusal(ref)
	c.finish(bucketing.Result{Code: ref.code, Class: bucketing.ClassOf(ref.code), Reason: ref.reason, RetryAfterMS: ref.retryAfterMS}, 0, int64(len(body)))
	var h http.Header
	if ref.retryAfterMS != nil {
		h = http.Header{"Retry-After": {strconv.FormatInt((*ref.retryAfterMS+999)/1000, 10)}}
	}
	return envelopeResponse(r, refusalStatus(ref), string(ref.code), h, body)
}

// noteRefusal records in the event what a refusal says: its detail and
// its violations' paths, and whether the caller asked for the envelope.
func (c *call) noteRefusal(ref *refusal) {
	paths := make([]string, len(ref.violations))
	for i, v := range ref.violations {
		paths[i] = v.Path
	}
	c.ev.Envelope = c.envelope
	c.ev.Detail = ref.detail
	c.ev.ViolationPaths = paths
}

// fail answers a call whose upstream exchange failed with no usable answer
// (timeout, refused or reset connection, an answer cut short): the envelope,
// whether or not the caller asked, since there is no raw answer to give.
func (c *call) fail(r *http.Request, res bucketing.Result, up *bucketing.Upstream, status int) *http.Response {
	env := res.Envelope(up, nil)
	env.Error.Detail = c.prefix() + res.Detail
	body := env.Marshal()
	c.ev.Envelope = c.envelope
	upStatus := 0
	if up != nil {
		upStatus = up.Status
	}
	c.finish(res, upStatus, int64(len(body)))
	return envelopeResponse(r, status, string(res.Code), nil, body)
}

// envelopeAnswer reads upstream's answer (bounded) and rewrites it into the
// envelope. An answer larger than the limit passes through raw.
func (c *call) envelopeAnswer(r *http.Request, resp *http.Response) *http.Response {
	limit := c.st.cfg.MaxEnvelopeBytes
	if resp.ContentLength > limit {
		return c.passAnswer(r, resp)
	}
	buf, err := readUpTo(resp.Body, resp.ContentLength, limit)
	if err != nil {
		resp.Body.Close()
		c.cancel()
		res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Err: err}, c.rules(), time.Now())
		return c.fail(r, res, bucketing.Excerpt(resp.StatusCode, resp.Header, buf, false), statusForTransport(res))
	}
	if int64(len(buf)) > limit {
		resp.Body = multiReadCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
		return c.passAnswer(r, resp)
	}
	resp.Body.Close()
	c.cancel()
	data, ok := envelopeData(resp.Header.Get("Content-Type"), buf)
	if !ok {
		resp.Body = io.NopCloser(bytes.NewReader(buf))
		return c.passAnswer(r, resp)
	}
	res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: ruleBody(buf)}, c.rules(), time.Now())
	var env bucketing.Envelope
	status := resp.StatusCode
	if res.OK() {
		env = res.Envelope(nil, data)
	} else {
		env = res.Envelope(bucketing.Excerpt(resp.StatusCode, resp.Header, buf, true), nil)
		env.Error.Detail = c.prefix() + res.Detail
		if status < 400 {
			status = http.StatusBadGateway
		}
	}
	body := env.Marshal()
	c.ev.Envelope = true
	c.finish(res, resp.StatusCode, int64(len(body)))
	for _, k := range []string{"Content-Length", "Content-Type", "Content-Encoding", "Etag", "Content-Md5", "Digest", "Content-Range", "Accept-Ranges"} {
		delete(resp.Header, k)
	}
	return envelopeResponse(r, status, string(res.Code), resp.Header, body)
}

func ruleBody(b []byte) []byte {
	if len(b) > bucketing.MaxRuleBody {
		return b[:bucketing.MaxRuleBody]
	}
	return b
}

// envelopable reports whether an answer can be rewritten: a body that is
// JSON or text, not streamed, not encoded.
func envelopable(r *http.Request, resp *http.Response) bool {
	if r.Method == http.MethodHead || resp.StatusCode < 200 || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return false
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return false
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, err := canonical.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "text/event-stream":
		return false
	case strings.HasPrefix(mt, "text/"), mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"), mt == "application/javascript",
		mt == "application/x-ndjson", mt == "application/problem+json":
		return true
	}
	return false
}

// envelopeData turns an answer's body into the envelope's data: JSON as is,
// text as a JSON string. ok is false for a body that is neither.
func envelopeData(ct string, body []byte) (json.RawMessage, bool) {
	mt, _, _ := canonical.ParseMediaType(ct)
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == ""
	if isJSON && json.Valid(body) {
		return json.RawMessage(body), true
	}
	if !utf8.Valid(body) {
		return nil, false
	}
	return bucketing.TextData(body), true
}

// envelopeResponse builds an answer whose body is an encoded envelope.
func envelopeResponse(r *http.Request, status int, code string, h http.Header, body []byte) *http.Response {
	if h == nil {
		h = make(http.Header, 3)
	}
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	if code != "" {
		h[HeaderErrorCode] = []string{code}
	}
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

func textResponse(r *http.Request, status int, msg string) *http.Response {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {strconv.Itoa(len(msg))}}
	return &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(msg)), ContentLength: int64(len(msg)), Request: r,
	}
}

// passAnswer hands upstream's answer to the caller untouched. Its body is
// watched as it streams: the event is finished when the body ends, with the
// bytes counted and the outcome bucketed (rules that look at the body see its
// first bucketing.MaxRuleBody bytes).
func (c *call) passAnswer(r *http.Request, resp *http.Response) *http.Response {
	c.ev.Envelope = false
	if c.mcp != nil {
		if whole := c.mcp.holdAnswer(r, resp); whole != nil {
			resp = whole
		}
	}
	pb := &passBody{c: c, rc: resp.Body, status: resp.StatusCode, header: resp.Header, length: resp.ContentLength, stream: resp.ContentLength < 0}
	if c.t != nil && c.t.needsBody() {
		pb.capture = make([]byte, 0, 512)
		pb.capturing = true
	}
	if c.mcp != nil {
		pb.stream = c.mcp.begin(resp) || pb.stream
	}
	resp.Body = pb
	return resp
}

// passBody is upstream's body on its way to the caller.
type passBody struct {
	c         *call
	rc        io.ReadCloser
	status    int
	header    http.Header
	n         int64
	length    int64 // the declared length, or -1
	capture   []byte
	capturing bool
	stream    bool // no declared length: flush as it arrives
	done      bool
	recorded  bool // the call's event is finished
	cut       bool // its event was not kept: the answer is cut (counted once)
}

func (b *passBody) Read(p []byte) (int, error) {
	if b.done && b.length > 0 && b.n >= b.length {
		return 0, io.EOF // ended at its declared length
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.c.mcp != nil && n > 0 {
		b.c.mcp.observe(p[:n])
		if b.stream && !b.recorded && b.c.mcp.answered() {
			// The response an MCP client waits for has passed in a
			// stream the server may keep open a while: the client has its
			// answer with these bytes, so the event is finished before
			// they are written to it, not when the stream ends.
			b.record(nil)
		}
	}
	if b.capturing && n > 0 {
		room := bucketing.MaxRuleBody - len(b.capture)
		b.capture = append(b.capture, p[:min(n, room)]...)
		b.capturing = len(b.capture) < bucketing.MaxRuleBody
	}
	switch {
	case err == io.EOF:
		b.end(nil)
	case err != nil:
		b.end(err)
	case b.length > 0 && b.n >= b.length:
		// The whole declared body is here: finish the event now, before
		// these last bytes are written to the caller, whatever upstream's
		// reader says on the next Read.
		b.end(nil)
		err = io.EOF
	}
	if b.c.lost {
		// Its event was not kept (events.on_write_failure: refuse): the
		// caller does not get the rest of the answer, and the
		// connection is cut.
		if !b.cut {
			b.cut = true
			b.c.s.eventsLost.WithLabelValues(eventsWithheld).Inc()
		}
		return 0, errEventLost
	}
	return n, err
}

// Close ends the body. Closed before its end, the caller went away.
func (b *passBody) Close() error {
	err := b.rc.Close()
	if !b.done {
		b.c.gone = true
		b.end(nil)
	}
	return err
}

func (b *passBody) end(err error) {
	if b.done {
		return
	}
	b.done = true
	b.c.cancel()
	b.record(err)
}

// record finishes the call's event, once: at the body's end, or earlier
// when an MCP response has passed in a stream.
func (b *passBody) record(err error) {
	if b.recorded {
		return
	}
	b.recorded = true
	if b.c.mcp != nil && b.c.mcp.answered() {
		// Once its response has passed, an MCP client may close the stream
		// (and the server end it) any way it likes.
		err, b.c.gone = nil, false
	}
	res := bucketing.Classify(bucketing.Outcome{Status: b.status, Header: b.header, Body: b.capture, Err: err}, b.c.rules(), time.Now())
	if b.c.mcp != nil {
		res = b.c.mcp.settle(res)
	}
	b.c.finish(res, b.status, b.n)
}

// writeTo copies the body to w, flushing as it goes when the answer is a
// stream. It returns upstream's read error, or w's write error.
func (b *passBody) writeTo(w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	if b.stream {
		// The headers of a streamed answer go at once, before its first
		// bytes: an event stream that is quiet at first (an MCP server's
		// GET stream) is open for the caller as it is upstream, and a
		// client that waits for it (the Go SDK's) is not held up.
		rc.Flush()
	}
	for {
		n, err := b.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				b.c.gone = true
				return werr
			}
			if b.stream {
				rc.Flush()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// copyBuffers holds the buffers answers are copied through.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func copyBody(w io.Writer, r io.Reader) (int64, error) { return io.Copy(w, r) }

type multiReadCloser struct {
	io.Reader
	io.Closer
}

func bytesBody(b []byte) io.Reader { return bytes.NewReader(b) }

func readCloserOf(body io.Reader) io.ReadCloser {
	if rc, ok := body.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(body)
}
