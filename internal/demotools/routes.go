package demotools

import (
	"net/http"
)

// route is one entry of the route table: its key (what [Server.Hits] and
// [Routes] use), the ServeMux pattern it is registered under (the same but
// for :batchUpdate), a description and the handler.
type route struct {
	key, mux, desc string
	h              http.HandlerFunc
}

// routeTable lists every route, in the order [Routes] and the index answer
// show them. It is filled by init because the index handler reads it.
var routeTable []route

// indexBody is the precomputed answer of GET /.
var indexBody fixed

func init() {
	routeTable = []route{
		{key: "GET /{$}", desc: "index: every route with a one-line description, as JSON", h: handleIndex},

		// Realistic upstream APIs.
		{key: "GET /esearch", desc: "literature search (PubMed E-utilities-like): term required, retmax, pmid repeated; no term: 400 text/plain", h: handleESearch},
		{key: "GET /v1/structure/{uniprot_id}", desc: "protein structure (AlphaFold-like); P00000: 404 JSON, Q99999: error hidden in a 200", h: handleStructure},
		{key: "POST /v1/targets/search", desc: "drug-target search (ChEMBL-like), JSON body; query \"quota\": 403 rateLimitExceeded", h: handleTargets},
		{key: "POST /v1/documents/{doc_id}:batchUpdate", mux: "POST /v1/documents/{doc}", desc: "document edits (Google Docs-like), JSON body; unknown fields silently ignored", h: handleBatchUpdate},
		{key: "POST /v1/documents/{doc_id}/edit", desc: "the same as :batchUpdate, without the colon", h: handleEdit},
		{key: "POST /v1/notes", desc: "create a note, form-encoded body (title, body, tags repeated): 201 JSON", h: handleNotes},
		{key: "GET /v1/accounts/{id}", desc: "an account record (CRM-like) whose answer holds an access token and a person's e-mail address", h: handleAccount},
		{key: "GET /v1/accounts/{id}/notes", desc: "an account's notes, text/plain, holding an injected instruction aimed at the model", h: handleAccountNotes},

		// Real faults.
		{key: "GET /faults/status/{code}", desc: "answers that status (200-599) with {\"status\":code}; 400 text/plain; 429/503 Retry-After: 2; 401 WWW-Authenticate: Bearer", h: handleStatus},
		{key: "GET /faults/slow", desc: "sleeps ms (default 5000, at most 120000) unless cancelled, then 200", h: handleSlow},
		{key: "GET /faults/reset", desc: "200 with Content-Length 1000, 100 bytes of body, then a TCP RST", h: handleReset},
		{key: "GET /faults/close", desc: "closes the connection before answering anything (rst=1: with a TCP RST)", h: handleClose},
		{key: "GET /faults/hidden-error", desc: "200 whose JSON body is an error", h: handleHiddenError},
		{key: "GET /faults/text", desc: "200 text/plain \"pong\\n\"", h: handleText},
		{key: "GET /faults/binary", desc: "200 application/octet-stream, 4 KiB of deterministic bytes", h: handleBinary},
		{key: "GET /faults/stream", desc: "text/event-stream: 3 events 50 ms apart, each flushed", h: handleStream},

		// Test helpers.
		{key: "GET /echo", desc: "echoes method, path, host, query, headers and body as JSON", h: handleEcho},
		{key: "POST /echo", desc: "the same as GET /echo", h: handleEcho},
		{key: "/echo", desc: "the same as GET /echo, for any other method", h: handleEcho},
		{key: "GET /bench", desc: "a fixed 200-byte JSON body, as cheaply as possible", h: handleBench},
		{key: "POST /bench", desc: "the same as GET /bench, after reading the request body", h: handleBench},
		{key: "POST /bench/{variant}", desc: "the same as POST /bench, so benchmarks can give each route its own path", h: handleBench},
	}
	for i := range routeTable {
		if routeTable[i].mux == "" {
			routeTable[i].mux = routeTable[i].key
		}
	}

	type entry struct {
		Pattern     string `json:"pattern"`
		Description string `json:"description"`
	}
	idx := struct {
		Service string  `json:"service"`
		Routes  []entry `json:"routes"`
	}{Service: "demotools"}
	for _, rt := range routeTable {
		idx.Routes = append(idx.Routes, entry{rt.key, rt.desc})
	}
	indexBody = mustJSON(idx)
}

func handleIndex(w http.ResponseWriter, _ *http.Request) {
	indexBody.write(w, http.StatusOK, ctJSON)
}
