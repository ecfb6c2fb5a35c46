package demotools

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault parameters.
const (
	slowDefault     = 5000 * time.Millisecond
	slowMax         = 120 * time.Second
	resetDeclared   = 1000 // Content-Length /faults/reset announces
	resetSent       = 100  // bytes it sends before the RST
	binarySize      = 4 << 10
	streamEvents    = 3
	streamInterval  = 50 * time.Millisecond
	statusText400   = "Error: invalid argument"
	minFaultStatus  = 200
	maxFaultStatus  = 599
	benchBodyTarget = 200 // documented size of the /bench body
)

var (
	// statusBodies[code-minFaultStatus] is {"status":code}.
	statusBodies [maxFaultStatus - minFaultStatus + 1]fixed

	hiddenError = newFixed(`{"error":{"code":"INTERNAL","message":"backend unavailable"}}`)
	pong        = newFixed("pong\n")
	binaryBody  fixed
	resetBody   []byte
	resetCLen   = []string{strconv.Itoa(resetDeclared)}

	// benchBody is exactly benchBodyTarget bytes (a test checks it).
	benchBody = newFixed(`{"ok":true,"id":"b0001","items":[{"id":1,"name":"alpha","score":0.91},` +
		`{"id":2,"name":"beta","score":0.82},{"id":3,"name":"gamma","score":0.73}],` +
		`"meta":{"source":"demotools","cached":true,"took_ms":0}}`)
)

func init() {
	for i := range statusBodies {
		statusBodies[i] = newFixed(`{"status":` + strconv.Itoa(minFaultStatus+i) + `}`)
	}

	// A deterministic byte sequence (xorshift), covering every byte value.
	b := make([]byte, binarySize)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	binaryBody = fixed{body: b, clen: []string{strconv.Itoa(len(b))}}

	// The start of a JSON document that never ends.
	resetBody = []byte(`{"items":[` + strings.Repeat(`0,`, resetSent))[:resetSent]
}

// handleStatus answers the status in the path.
func handleStatus(w http.ResponseWriter, r *http.Request) {
	code, err := strconv.Atoi(r.PathValue("code"))
	if err != nil || code < minFaultStatus || code > maxFaultStatus {
		writeText(w, http.StatusBadRequest, "Error: status code must be an integer from 200 to 599")
		return
	}
	h := w.Header()
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		h["Retry-After"] = retry2
	case http.StatusUnauthorized:
		h["Www-Authenticate"] = bearer
	case http.StatusBadRequest:
		writeText(w, code, statusText400)
		return
	case http.StatusNoContent, http.StatusNotModified:
		w.WriteHeader(code) // no body allowed
		return
	}
	statusBodies[code-minFaultStatus].write(w, code, ctJSON)
}

// handleSlow sleeps ms milliseconds unless the request is cancelled first
// (the client went away, or the server closed).
func handleSlow(w http.ResponseWriter, r *http.Request) {
	d := slowDefault
	if s := r.URL.Query().Get("ms"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || time.Duration(n)*time.Millisecond > slowMax {
			writeText(w, http.StatusBadRequest, "Error: ms must be an integer from 0 to 120000")
			return
		}
		d = time.Duration(n) * time.Millisecond
	}
	if !sleep(r.Context(), d) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"slept_ms": d.Milliseconds()})
}

// handleReset sends a 200 announcing 1000 bytes, sends 100, then resets the
// TCP connection (SO_LINGER 0), so the client sees the status and then an
// error while reading the body.
func handleReset(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Content-Type"] = ctJSON
	h["Content-Length"] = resetCLen
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resetBody)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	abort(rc, true)
}

// handleClose drops the connection before answering anything: a plain close
// (the client reads EOF), or with rst=1 a TCP reset.
func handleClose(w http.ResponseWriter, r *http.Request) {
	abort(http.NewResponseController(w), r.URL.Query().Get("rst") == "1")
}

// abort hijacks the connection and closes it; with rst it first sets
// SO_LINGER to 0 so the close sends a RST instead of a FIN. Without hijack
// support (a ResponseRecorder) it does nothing.
func abort(rc *http.ResponseController, rst bool) {
	conn, _, err := rc.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func handleHiddenError(w http.ResponseWriter, _ *http.Request) {
	hiddenError.write(w, http.StatusOK, ctJSON)
}

func handleText(w http.ResponseWriter, _ *http.Request) {
	pong.write(w, http.StatusOK, ctText)
}

func handleBinary(w http.ResponseWriter, _ *http.Request) {
	binaryBody.write(w, http.StatusOK, ctBinary)
}

// handleStream sends three server-sent events 50 ms apart, flushing each,
// and stops early if the request is cancelled.
func handleStream(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Content-Type"] = ctSSE
	h["Cache-Control"] = noCache
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i := 1; i <= streamEvents; i++ {
		if i > 1 && !sleep(r.Context(), streamInterval) {
			return
		}
		n := strconv.Itoa(i)
		_, _ = w.Write([]byte("id: " + n + "\nevent: message\ndata: {\"seq\":" + n + ",\"of\":3}\n\n"))
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// echoAnswer is what /echo answers.
type echoAnswer struct {
	Method     string              `json:"method"`
	Path       string              `json:"path"`
	Host       string              `json:"host"`
	Query      map[string][]string `json:"query"`
	Headers    map[string]string   `json:"headers"`
	Body       string              `json:"body"`
	BodyLen    int                 `json:"body_len"`
	BodySHA256 string              `json:"body_sha256"`
}

// hopByHop are headers that belong to one connection, not to the request;
// /echo leaves them out.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// handleEcho answers what it received. Headers are every end-to-end header
// (values of a repeated header joined with ", "); body is the raw body as a
// string (invalid UTF-8 is replaced by JSON, so compare body_sha256 or
// [Server.LastRequest] for byte-exact checks).
func handleEcho(w http.ResponseWriter, r *http.Request) {
	body := bodyOf(r)
	sum := sha256.Sum256(body)
	a := echoAnswer{
		Method:     r.Method,
		Path:       r.URL.Path,
		Host:       r.Host,
		Query:      r.URL.Query(),
		Headers:    make(map[string]string, len(r.Header)),
		Body:       string(body),
		BodyLen:    len(body),
		BodySHA256: hex.EncodeToString(sum[:]),
	}
	for k, v := range r.Header {
		if !hopByHop[k] {
			a.Headers[k] = strings.Join(v, ", ")
		}
	}
	writeJSON(w, http.StatusOK, a)
}

// handleBench answers the fixed body; the request body, if any, was already
// read (and is dropped here).
func handleBench(w http.ResponseWriter, _ *http.Request) {
	benchBody.write(w, http.StatusOK, ctJSON)
}
