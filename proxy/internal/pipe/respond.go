package pipe

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
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/headtext"
)

// Refuse answers a refused call: always the envelope, a 4xx status, and the
// error code header. Upstream is never called.
func (c *Call) Refuse(r *http.Request, ref *conf.Refusal) *http.Response {
	body := ref.Envelope()
	c.Event.Refused = true
	c.NoteRefusal(ref)
	c.Finish(bucketing.Result{Code: ref.Code, Class: bucketing.ClassOf(ref.Code), Reason: ref.Reason, RetryAfterMS: ref.RetryAfterMS}, 0, int64(len(body)))
	var h http.Header
	if ref.RetryAfterMS != nil {
		h = http.Header{"Retry-After": {strconv.FormatInt((*ref.RetryAfterMS+999)/1000, 10)}}
	}
	return EnvelopeResponse(r, conf.RefusalStatus(ref), string(ref.Code), h, body)
}

// NoteRefusal records in the event what a refusal says: its detail and
// its violations' paths, and whether the caller asked for the envelope.
func (c *Call) NoteRefusal(ref *conf.Refusal) {
	paths := make([]string, len(ref.Violations))
	for i, v := range ref.Violations {
		paths[i] = v.Path
	}
	c.Event.Envelope = c.envelope
	c.Event.Detail = ref.Detail
	c.Event.ViolationPaths = paths
}

// fail answers a call whose upstream exchange failed with no usable answer
// (timeout, refused or reset connection, an answer cut short): the envelope,
// whether or not the caller asked, since there is no raw answer to give.
func (c *Call) fail(r *http.Request, res bucketing.Result, up *bucketing.Upstream, status int) *http.Response {
	env := res.Envelope(up, nil)
	env.Error.Detail = c.prefix() + res.Detail
	body := env.Marshal()
	c.Event.Envelope = c.envelope
	upStatus := 0
	if up != nil {
		upStatus = up.Status
	}
	c.Finish(res, upStatus, int64(len(body)))
	return EnvelopeResponse(r, status, string(res.Code), nil, body)
}

// envelopeAnswer reads upstream's answer (bounded) and rewrites it into the
// envelope. An answer larger than the limit passes through raw.
func (c *Call) envelopeAnswer(r *http.Request, resp *http.Response) *http.Response {
	limit := c.State.Cfg.MaxEnvelopeBytes
	if resp.ContentLength > limit {
		return c.passAnswer(r, resp)
	}
	buf, err := conf.ReadUpTo(resp.Body, resp.ContentLength, limit)
	if err != nil {
		resp.Body.Close()
		c.Cancel()
		res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Err: err}, c.rules(), time.Now())
		return c.fail(r, res, bucketing.Excerpt(resp.StatusCode, resp.Header, buf, false), statusForTransport(res))
	}
	if int64(len(buf)) > limit {
		resp.Body = MultiReadCloser{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
		return c.passAnswer(r, resp)
	}
	resp.Body.Close()
	c.Cancel()
	data, ok := envelopeData(headtext.Get(resp.Header, "Content-Type"), buf)
	if !ok {
		resp.Body = newBytesBody(buf)
		return c.passAnswer(r, resp)
	}
	now := time.Now() // the answer's classification and the call's end
	res := bucketing.Classify(bucketing.Outcome{Status: resp.StatusCode, Header: resp.Header, Body: ruleBody(buf)}, c.rules(), now)
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
	c.Event.Envelope = true
	c.FinishAt(res, resp.StatusCode, int64(len(body)), now)
	DropBodyHeaders(resp.Header, true)
	return EnvelopeResponse(r, status, string(res.Code), resp.Header, body)
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
	if ce := headtext.Get(resp.Header, "Content-Encoding"); ce != "" && ce != "identity" {
		return false
	}
	ct := headtext.Get(resp.Header, "Content-Type")
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
	if isJSON && utf8.Valid(body) && len(bytes.TrimSpace(body)) > 0 {
		// Envelope.Marshal compacts it, which checks it is JSON on the
		// way, and writes it as a JSON string (TextData) when it is not:
		// one pass over the answer instead of a json.Valid pass first.
		return json.RawMessage(body), true
	}
	if isJSON && json.Valid(body) {
		return json.RawMessage(body), true
	}
	if !utf8.Valid(body) {
		return nil, false
	}
	return bucketing.TextData(body), true
}

// envelopeResponse is an envelope answer, the values of the headers
// EnvelopeResponse sets and its body in one allocation.
type envelopeResponse struct {
	resp http.Response
	vs   [3]string
	body bytesBody
}

// EnvelopeResponse builds an answer whose body is an encoded envelope.
func EnvelopeResponse(r *http.Request, status int, code string, h http.Header, body []byte) *http.Response {
	if h == nil {
		h = make(http.Header, 3)
	}
	e := &envelopeResponse{vs: [3]string{"application/json", strconv.Itoa(len(body)), code}}
	// The three values share one array, each its own slice of capacity
	// one (an append to one copies it).
	h["Content-Type"] = e.vs[0:1:1]
	h["Content-Length"] = e.vs[1:2:2]
	if code != "" {
		h[conf.HeaderErrorCode] = e.vs[2:3:3]
	}
	e.body.Reset(body)
	e.resp = http.Response{
		StatusCode: status, Status: statusLine(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &e.body, ContentLength: int64(len(body)), Request: r,
	}
	return &e.resp
}

// statusLines are the status lines of the envelope's usual statuses,
// written once.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for _, st := range []int{200, 201, 202, 400, 401, 403, 404, 408, 409, 413, 415, 422, 429, 500, 502, 503, 504} {
		m[st] = strconv.Itoa(st) + " " + http.StatusText(st)
	}
	return m
}()

// statusLine is an answer's Status: the code and its text.
func statusLine(status int) string {
	if s, ok := statusLines[status]; ok {
		return s
	}
	return strconv.Itoa(status) + " " + http.StatusText(status)
}

func textResponse(r *http.Request, status int, msg string) *http.Response {
	h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Length": {strconv.Itoa(len(msg))}}
	return &http.Response{
		StatusCode: status, Status: statusLine(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(msg)), ContentLength: int64(len(msg)), Request: r,
	}
}

// passAnswer hands upstream's answer to the caller untouched. Its body is
// watched as it streams: the event is finished when the body ends, with the
// bytes counted and the outcome bucketed (rules that look at the body see its
// first bucketing.MaxRuleBody bytes).
func (c *Call) passAnswer(r *http.Request, resp *http.Response) *http.Response {
	c.Event.Envelope = false
	if c.MCP != nil {
		if whole := c.MCP.HoldAnswer(r, resp); whole != nil {
			resp = whole
		}
	}
	pb := &PassBody{c: c, rc: resp.Body, status: resp.StatusCode, header: resp.Header, length: resp.ContentLength, stream: resp.ContentLength < 0}
	if c.Tool != nil && c.Tool.NeedsBody() {
		pb.capture = make([]byte, 0, 512)
		pb.capturing = true
	}
	if c.MCP != nil {
		pb.stream = c.MCP.Begin(resp) || pb.stream
	}
	resp.Body = pb
	return resp
}

// PassBody is upstream's body on its way to the caller.
type PassBody struct {
	c         *Call
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

func (b *PassBody) Read(p []byte) (int, error) {
	if b.done && b.length > 0 && b.n >= b.length {
		return 0, io.EOF // ended at its declared length
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.c.MCP != nil && n > 0 {
		b.c.MCP.Observe(p[:n])
		if b.stream && !b.recorded && b.c.MCP.Answered() {
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
	if b.c.Lost {
		// Its event was not kept (events.on_write_failure: refuse): the
		// caller does not get the rest of the answer, and the
		// connection is cut.
		if !b.cut {
			b.cut = true
			b.c.Host.EventsLost.WithLabelValues(eventsWithheld).Inc()
		}
		return 0, conf.ErrEventLost
	}
	return n, err
}

// Close ends the body. Closed before its end, the caller went away.
func (b *PassBody) Close() error {
	err := b.rc.Close()
	if !b.done {
		b.c.gone = true
		b.end(nil)
	}
	return err
}

func (b *PassBody) end(err error) {
	if b.done {
		return
	}
	b.done = true
	b.c.Cancel()
	b.record(err)
}

// record finishes the call's event, once: at the body's end, or earlier
// when an MCP response has passed in a stream.
func (b *PassBody) record(err error) {
	if b.recorded {
		return
	}
	b.recorded = true
	if b.c.MCP != nil && b.c.MCP.Answered() {
		// Once its response has passed, an MCP client may close the stream
		// (and the server end it) any way it likes.
		err, b.c.gone = nil, false
	}
	res := bucketing.Classify(bucketing.Outcome{Status: b.status, Header: b.header, Body: b.capture, Err: err}, b.c.rules(), time.Now())
	if b.c.MCP != nil {
		res = b.c.MCP.Settle(res)
	}
	b.c.Finish(res, b.status, b.n)
}

// WriteTo copies the body to w, flushing as it goes when the answer is a
// stream. It returns upstream's read error, or w's write error.
func (b *PassBody) WriteTo(w http.ResponseWriter) error {
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

func CopyBody(w io.Writer, r io.Reader) (int64, error) { return io.Copy(w, r) }

type MultiReadCloser struct {
	io.Reader
	io.Closer
}

func BytesBody(b []byte) io.Reader { return newBytesBody(b) }

// bytesBody is a body held in memory, a call's or an answer's:
// io.NopCloser of a bytes.Reader in one allocation, not two. Its WriteTo
// (the Reader's) is what io.Copy uses, as it used NopCloser's.
type bytesBody struct{ bytes.Reader }

func newBytesBody(b []byte) *bytesBody {
	bb := &bytesBody{}
	bb.Reset(b)
	return bb
}

// Close does nothing.
func (*bytesBody) Close() error { return nil }

// readCloserOf is body as the request body that goes upstream: a
// ReadCloser as it is (a held bytesBody among them), anything else under
// io.NopCloser.
func readCloserOf(body io.Reader) io.ReadCloser {
	if rc, ok := body.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(body)
}

// DropBodyHeaders removes from h (an answer's) the headers that describe a
// body toolgate replaced: its validators and ranges (Etag, Content-Md5,
// Digest, Content-Range, Accept-Ranges) and, with framing, its length,
// type and coding. It walks h, which holds a handful of names, rather than
// deleting each of the eight.
func DropBodyHeaders(h http.Header, framing bool) {
	for k := range h {
		switch k {
		case "Etag", "Content-Md5", "Digest", "Content-Range", "Accept-Ranges":
			delete(h, k)
		case "Content-Length", "Content-Type", "Content-Encoding":
			if framing {
				delete(h, k)
			}
		}
	}
}
