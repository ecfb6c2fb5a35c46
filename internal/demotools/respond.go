package demotools

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Shared header values. net/http only reads them, so one slice serves every
// response and setting a header costs no allocation.
var (
	ctJSON   = []string{"application/json"}
	ctText   = []string{"text/plain; charset=utf-8"}
	ctBinary = []string{"application/octet-stream"}
	ctSSE    = []string{"text/event-stream"}
	noCache  = []string{"no-cache"}
	nosniff  = []string{"nosniff"}
	retry2   = []string{"2"}
	bearer   = []string{"Bearer"}
)

// fixed is a response body computed once, with its Content-Length.
type fixed struct {
	body []byte
	clen []string
}

func newFixed(body string) fixed {
	return fixed{body: []byte(body), clen: []string{strconv.Itoa(len(body))}}
}

// mustJSON encodes v once at start-up; v is a literal, so an error is a bug.
func mustJSON(v any) fixed {
	b, err := json.Marshal(v)
	if err != nil {
		panic("demotools: encode fixed body: " + err.Error())
	}
	return fixed{body: b, clen: []string{strconv.Itoa(len(b))}}
}

// write answers status with the precomputed body and content type ct.
func (f fixed) write(w http.ResponseWriter, status int, ct []string) {
	h := w.Header()
	h["Content-Type"] = ct
	h["Content-Length"] = f.clen
	w.WriteHeader(status)
	_, _ = w.Write(f.body)
}

// writeJSON encodes v and answers it with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value passed here is built from plain types; this is a bug.
		writeText(w, http.StatusInternalServerError, "Error: encode response: "+err.Error())
		return
	}
	h := w.Header()
	h["Content-Type"] = ctJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeText answers status with a text/plain string body, as many real APIs
// do for their errors.
func writeText(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h["Content-Type"] = ctText
	h["X-Content-Type-Options"] = nosniff
	h["Content-Length"] = []string{strconv.Itoa(len(msg))}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg))
}

// hash64 is FNV-1a over s, without allocating; every "random-looking" value
// the server answers derives from it, so answers are deterministic.
func hash64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
