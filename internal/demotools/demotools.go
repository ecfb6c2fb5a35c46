// Package demotools is a small, realistic fake of the upstream APIs that tool
// processes call: a literature search, a protein structure lookup, a
// drug-target database, a document editor and a form-encoded notes service,
// plus a set of real faults (statuses, slow answers, reset and closed
// connections, errors hidden in 200 bodies, non-JSON bodies, streams).
//
// It is used by `toolgate demo`, by end-to-end tests and by benchmarks. It
// stands where upstream stands: toolgate forwards tool calls to it. Every
// answer is deterministic and derived from the inputs; nothing is random.
//
// The server counts, lock-free, how many requests reached each route's
// handler ([Server.Hits]) and the server as a whole ([Server.TotalHits]), and
// keeps a copy of the last request it saw ([Server.LastRequest]), so tests can
// prove that a refused call never arrived and that a forwarded one arrived
// byte for byte with the injected headers.
//
// # Routes
//
// The route key (used by [Server.Hits]) is the pattern in the first column.
//
//	| route                                   | answer                                                                 |
//	|-----------------------------------------|------------------------------------------------------------------------|
//	| GET /{$}                                | 200 JSON index of every route                                          |
//	| GET /esearch                            | PubMed-like search: term (required), retmax, pmid (repeated);          |
//	|                                         | no term: 400 text/plain "Error: term is required"                      |
//	| GET /v1/structure/{uniprot_id}          | AlphaFold-like model; P00000: 404 {"detail":"not found"};              |
//	|                                         | Q99999: 200 {"error":"model not available","entry":null}              |
//	| POST /v1/targets/search                 | drug-target search (JSON); query "quota": 403 rateLimitExceeded        |
//	| POST /v1/documents/{doc_id}:batchUpdate | Docs-like edits (JSON); unknown fields are silently ignored            |
//	| POST /v1/documents/{doc_id}/edit        | the same as :batchUpdate                                               |
//	| POST /v1/notes                          | form-encoded note (title, body, tags repeated): 201 JSON               |
//	| GET /v1/accounts/{id}                   | account record holding an access token and an e-mail address           |
//	| GET /v1/accounts/{id}/notes             | text/plain notes holding an injected instruction for the model         |
//	| GET /faults/status/{code}               | that status, JSON {"status":code}; 400 is text/plain; 429 and 503 add  |
//	|                                         | Retry-After: 2; 401 adds WWW-Authenticate: Bearer                      |
//	| GET /faults/slow                        | sleeps ms (default 5000) unless the request is cancelled, then 200     |
//	| GET /faults/reset                       | 200, Content-Length 1000, 100 bytes, then a TCP RST                    |
//	| GET /faults/close                       | closes the connection before answering (rst=1: with a TCP RST)         |
//	| GET /faults/hidden-error                | 200 {"error":{"code":"INTERNAL","message":"backend unavailable"}}      |
//	| GET /faults/text                        | 200 text/plain "pong\n"                                                |
//	| GET /faults/binary                      | 200 application/octet-stream, 4 KiB of deterministic bytes             |
//	| GET /faults/stream                      | text/event-stream, 3 events 50 ms apart, each flushed                  |
//	| GET /echo                               | 200 JSON: method, path, host, query, headers, body as received         |
//	| POST /echo                              | the same                                                               |
//	| /echo                                   | the same, for any other method (PUT, PATCH, DELETE, ...)               |
//	| GET /bench                              | 200, a fixed 200-byte JSON body, as cheaply as possible                |
//	| POST /bench                             | the same, after reading the request body                               |
//	| POST /bench/{variant}                   | the same as POST /bench, one path per benchmarked route                |
//
// Requests that match no route get net/http's own 404 or 405; they count in
// [Server.TotalHits] but under no route. Request bodies above 8 MiB are
// refused with 413 before any route runs.
//
// The ServeMux pattern behind "POST /v1/documents/{doc_id}:batchUpdate" is
// "POST /v1/documents/{doc}", since a wildcard must fill a whole path
// segment; the handler answers 404 unless the segment ends in ":batchUpdate".
//
// Counting faults: net/http's client Transport retries an idempotent request
// (GET, HEAD, ...) once when a reused keep-alive connection dies before any
// answer, so GET /faults/close over a warm connection reaches the server
// twice. Tests that count hits on it use a client without keep-alives.
package demotools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// maxBodyBytes bounds every request body the server reads; a larger body is
// refused with 413 before any route runs.
const maxBodyBytes = 8 << 20

// Request is a copy of one request as the server saw it. Every field is the
// server's own copy; changing it changes nothing on the server.
type Request struct {
	// Method is the HTTP method, e.g. "POST".
	Method string
	// Path is the decoded URL path, e.g. "/v1/documents/d1:batchUpdate".
	Path string
	// RawQuery is the encoded query string without the '?', e.g. "term=tp53&retmax=5".
	RawQuery string
	// Host is the Host header (or the authority of an absolute request URI).
	Host string
	// Header holds the request headers as received (Host is not among them).
	Header http.Header
	// Body is the request body byte for byte; nil when there was none or it
	// was over the 8 MiB limit.
	Body []byte
}

// Route describes one route of the server.
type Route struct {
	// Pattern is the route key, e.g. "GET /v1/structure/{uniprot_id}"; pass it
	// to [Server.Hits].
	Pattern string
	// Description is one line saying what the route answers.
	Description string
}

// Routes lists every route of the server with a one-line description, in a
// fixed order.
func Routes() []Route {
	out := make([]Route, len(routeTable))
	for i, rt := range routeTable {
		out[i] = Route{Pattern: rt.key, Description: rt.desc}
	}
	return out
}

// Server is the fake upstream. Build one with [Start] (listening) or [New]
// (handler only, for httptest). Its methods are safe for concurrent use.
type Server struct {
	handler http.Handler
	hits    map[string]*atomic.Int64 // route key -> counter; read-only after New
	total   atomic.Int64
	last    atomic.Pointer[recorded]

	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve returns
}

// New returns a server that does not listen; mount [Server.Handler] on an
// httptest server or any other listener. [Server.URL] and [Server.Addr]
// return "" and [Server.Close] does nothing.
func New() *Server {
	s := &Server{hits: make(map[string]*atomic.Int64, len(routeTable))}
	mux := http.NewServeMux()
	for _, rt := range routeTable {
		c := new(atomic.Int64)
		s.hits[rt.key] = c
		mux.Handle(rt.mux, counted(c, rt.h))
	}
	s.handler = s.record(mux)
	return s
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves until
// [Server.Close].
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demotools: listen %q: %w", addr, err)
	}
	s := New()
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // always non-nil; http.ErrServerClosed after Close
	}()
	return s, nil
}

// URL returns the base URL, e.g. "http://127.0.0.1:40123", or "" for a server
// built with [New].
func (s *Server) URL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Addr returns the listening address, e.g. "127.0.0.1:40123", or "" for a
// server built with [New].
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops the listener, closes every connection (cancelling the contexts
// of handlers still running, such as /faults/slow) and waits for the serve
// loop to end. It does nothing for a server built with [New].
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.Close()
	<-s.done
	if err != nil {
		return fmt.Errorf("demotools: close: %w", err)
	}
	return nil
}

// Handler returns the server's handler: routing, hit counting and request
// recording.
func (s *Server) Handler() http.Handler { return s.handler }

// Hits returns how many requests reached the handler of the route with the
// given key (a [Route.Pattern]); 0 for an unknown key.
func (s *Server) Hits(route string) int64 {
	c, ok := s.hits[route]
	if !ok {
		return 0
	}
	return c.Load()
}

// TotalHits returns how many requests reached the server at all, including
// those that matched no route and those refused for a too-large body.
func (s *Server) TotalHits() int64 { return s.total.Load() }

// LastRequest returns a copy of the last request the server saw, on any
// route; the zero Request before the first.
func (s *Server) LastRequest() Request {
	rec := s.last.Load()
	if rec == nil {
		return Request{}
	}
	return Request{
		Method:   rec.method,
		Path:     rec.path,
		RawQuery: rec.rawQuery,
		Host:     rec.host,
		Header:   rec.header.Clone(),
		Body:     bytes.Clone(rec.body),
	}
}

// recorded is one request as seen, and doubles as the request body handed to
// the route handler, so each request costs one allocation for both.
type recorded struct {
	method, path, rawQuery, host string
	header                       http.Header // the request's own map; never written after the handler starts
	body                         []byte
	rd                           bytes.Reader
}

func (r *recorded) Read(p []byte) (int, error) { return r.rd.Read(p) }
func (r *recorded) Close() error               { return nil }

// record counts the request, reads its body (bounded), records it as the
// last request, and hands it on with the body replaced by the recorded copy.
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.total.Add(1)
		rec := &recorded{
			method:   r.Method,
			path:     r.URL.Path,
			rawQuery: r.URL.RawQuery,
			host:     r.Host,
			header:   r.Header,
		}
		body, err := readBody(r)
		switch {
		case errors.Is(err, errBodyTooLarge):
			s.last.Store(rec)
			writeText(w, http.StatusRequestEntityTooLarge, "Error: request body too large")
			return
		case err != nil:
			return // the client went away mid-body; nobody is left to answer
		}
		rec.body = body
		rec.rd.Reset(body)
		s.last.Store(rec)
		r.Body = rec
		next.ServeHTTP(w, r)
	})
}

var errBodyTooLarge = errors.New("request body too large")

// readBody reads the whole body, at most maxBodyBytes; nil when there is none.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	if r.ContentLength > maxBodyBytes {
		return nil, errBodyTooLarge
	}
	if r.ContentLength > 0 {
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(buf) > maxBodyBytes {
		return nil, errBodyTooLarge
	}
	if len(buf) == 0 {
		return nil, nil
	}
	return buf, nil
}

// bodyOf returns the body recorded for r by [Server.record].
func bodyOf(r *http.Request) []byte {
	if rec, ok := r.Body.(*recorded); ok {
		return rec.body
	}
	return nil
}

// counted counts a request on c, then runs h.
func counted(c *atomic.Int64, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Add(1)
		h(w, r)
	})
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
