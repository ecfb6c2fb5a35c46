package demotools

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// apiCase is one request and what must come back. wantBody, when set, is
// compared byte for byte; check, when set, inspects the decoded JSON.
type apiCase struct {
	name        string
	method      string
	path        string
	contentType string
	body        string
	route       string // route key expected to count the hit
	wantStatus  int
	wantCT      string
	wantHeader  map[string]string
	wantBody    string
	check       func(t *testing.T, v map[string]any)
}

func runAPICases(t *testing.T, tests []apiCase) {
	t.Helper()
	s := startServer(t)
	c := testClient()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Hits(tt.route)
			status, h, body := do(t, c, tt.method, s.URL()+tt.path, tt.contentType, tt.body)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %q)", status, tt.wantStatus, body)
			}
			if got := h.Get("Content-Type"); got != tt.wantCT {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantCT)
			}
			for k, want := range tt.wantHeader {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if tt.wantBody != "" && string(body) != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
			if tt.check != nil {
				var v map[string]any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Fatalf("body is not a JSON object: %v: %q", err, body)
				}
				tt.check(t, v)
			}
			if tt.route != "" {
				if got := s.Hits(tt.route); got != before+1 {
					t.Errorf("Hits(%q) = %d, want %d", tt.route, got, before+1)
				}
			}
		})
	}
}

// path walks v along keys (object keys, or decimal indexes into arrays).
func path(v any, keys ...string) any {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := 0
			for _, c := range k {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// expect returns a check that compares values found by path, as their JSON
// text.
func expect(pairs ...any) func(t *testing.T, v map[string]any) {
	return func(t *testing.T, v map[string]any) {
		t.Helper()
		for i := 0; i < len(pairs); i += 2 {
			p := pairs[i].(string)
			want, _ := json.Marshal(pairs[i+1])
			got, _ := json.Marshal(path(v, strings.Split(p, ".")...))
			if !bytes.Equal(got, want) {
				t.Errorf("%s = %s, want %s", p, got, want)
			}
		}
	}
}

func TestESearch(t *testing.T) {
	const route = "GET /esearch"
	runAPICases(t, []apiCase{
		{
			name: "term", method: "GET", path: "/esearch?term=tp53+cancer&retmax=3", route: route,
			wantStatus: 200, wantCT: "application/json",
			check: func(t *testing.T, v map[string]any) {
				expect("esearchresult.term", "tp53 cancer", "esearchresult.retmax", "3",
					"esearchresult.retstart", "0", "header.type", "esearch")(t, v)
				ids, _ := path(v, "esearchresult", "idlist").([]any)
				if len(ids) != 3 {
					t.Errorf("idlist has %d ids, want 3", len(ids))
				}
				if c, _ := path(v, "esearchresult", "count").(string); c == "" {
					t.Errorf("count missing")
				}
			},
		},
		{
			name: "default retmax is 20", method: "GET", path: "/esearch?term=protein", route: route,
			wantStatus: 200, wantCT: "application/json",
			check: func(t *testing.T, v map[string]any) {
				if ids, _ := path(v, "esearchresult", "idlist").([]any); len(ids) != 20 {
					t.Errorf("idlist has %d ids, want 20", len(ids))
				}
			},
		},
		{
			name: "pmid repeated", method: "GET", path: "/esearch?term=x&pmid=123&pmid=456", route: route,
			wantStatus: 200, wantCT: "application/json",
			check: expect("esearchresult.idlist", []string{"123", "456"}, "esearchresult.count", "2"),
		},
		{
			name: "retmax 0", method: "GET", path: "/esearch?term=x&retmax=0", route: route,
			wantStatus: 200, wantCT: "application/json",
			check: expect("esearchresult.idlist", []string{}, "esearchresult.retmax", "0"),
		},
		{
			name: "term missing", method: "GET", path: "/esearch?retmax=5", route: route,
			wantStatus: 400, wantCT: "text/plain; charset=utf-8", wantBody: "Error: term is required",
		},
		{
			name: "term blank", method: "GET", path: "/esearch?term=%20", route: route,
			wantStatus: 400, wantCT: "text/plain; charset=utf-8", wantBody: "Error: term is required",
		},
		{
			name: "retmax wrong type", method: "GET", path: "/esearch?term=x&retmax=ten", route: route,
			wantStatus: 400, wantCT: "text/plain; charset=utf-8", wantBody: "Error: retmax must be a non-negative integer",
		},
		{
			name: "pmid wrong type", method: "GET", path: "/esearch?term=x&pmid=abc", route: route,
			wantStatus: 400, wantCT: "text/plain; charset=utf-8", wantBody: "Error: pmid must be a positive integer",
		},
	})
}

func TestStructure(t *testing.T) {
	const route = "GET /v1/structure/{uniprot_id}"
	runAPICases(t, []apiCase{
		{
			name: "found", method: "GET", path: "/v1/structure/P69905", route: route,
			wantStatus: 200, wantCT: "application/json",
			check: func(t *testing.T, v map[string]any) {
				expect("uniprot_id", "P69905", "entry_id", "AF-P69905-F1",
					"pdb_url", "https://alphafold.ebi.ac.uk/files/AF-P69905-F1-model_v4.pdb")(t, v)
				if n, _ := v["sequence_length"].(float64); n < 50 || n >= 2000 {
					t.Errorf("sequence_length = %v, want 50..1999", v["sequence_length"])
				}
			},
		},
		{
			name: "ten-character accession", method: "GET", path: "/v1/structure/A0A024RBG1", route: route,
			wantStatus: 200, wantCT: "application/json", check: expect("uniprot_id", "A0A024RBG1"),
		},
		{
			name: "not found", method: "GET", path: "/v1/structure/P00000", route: route,
			wantStatus: 404, wantCT: "application/json", wantBody: `{"detail":"not found"}`,
		},
		{
			name: "error hidden in a 200", method: "GET", path: "/v1/structure/Q99999", route: route,
			wantStatus: 200, wantCT: "application/json", wantBody: `{"error":"model not available","entry":null}`,
		},
		{
			name: "not an accession", method: "GET", path: "/v1/structure/hemoglobin", route: route,
			wantStatus: 400, wantCT: "application/json", wantBody: `{"detail":"invalid UniProt accession"}`,
		},
	})
}

func TestTargets(t *testing.T) {
	const route, ct = "POST /v1/targets/search", "application/json"
	runAPICases(t, []apiCase{
		{
			name: "exact symbol first", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"EGFR","limit":3}`,
			wantStatus: 200, wantCT: ct,
			check: expect("query", "EGFR", "organism", "Homo sapiens", "count", 3,
				"targets.0.symbol", "EGFR", "targets.0.target_chembl_id", "CHEMBL203", "targets.0.score", 1),
		},
		{
			name: "filters", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"kinase","organism":"Mus musculus","filters":{"phase_min":2,"modality":"antibody"}}`,
			wantStatus: 200, wantCT: ct,
			check: func(t *testing.T, v map[string]any) {
				ts, _ := v["targets"].([]any)
				if len(ts) == 0 {
					t.Fatalf("no targets")
				}
				for i := range ts {
					p := "targets." + strconv.Itoa(i)
					expect(p+".modality", "antibody", p+".organism", "Mus musculus")(t, v)
				}
			},
		},
		{
			name: "phase filter leaves only phase 4", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"tau","limit":100,"filters":{"phase_min":4}}`,
			wantStatus: 200, wantCT: ct,
			check: func(t *testing.T, v map[string]any) {
				for _, x := range v["targets"].([]any) {
					if p := x.(map[string]any)["max_phase"].(float64); p != 4 {
						t.Errorf("max_phase %v passed phase_min 4", p)
					}
				}
			},
		},
		{
			name: "unknown fields ignored", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"BRAF","lmit":1}`,
			wantStatus: 200, wantCT: ct, check: expect("count", 10, "targets.0.symbol", "BRAF"),
		},
		{
			name: "403 that is a rate limit", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"quota"}`,
			wantStatus: 403, wantCT: ct,
			wantBody: `{"error":{"reason":"rateLimitExceeded","message":"Daily quota exhausted"}}`,
		},
		{
			name: "query missing", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"organism":"Homo sapiens"}`,
			wantStatus: 400, wantCT: ct,
			wantBody: `{"error":{"reason":"required","message":"query is required"}}`,
		},
		{
			name: "wrong type", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"EGFR","limit":"ten"}`,
			wantStatus: 400, wantCT: ct, check: expect("error.reason", "parseError"),
		},
		{
			name: "malformed", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":`,
			wantStatus: 400, wantCT: ct, check: expect("error.reason", "parseError"),
		},
		{
			name: "limit too large", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"EGFR","limit":1000}`,
			wantStatus: 400, wantCT: ct, check: expect("error.reason", "invalidParameter"),
		},
		{
			name: "unknown modality", method: "POST", path: "/v1/targets/search", contentType: ct, route: route,
			body:       `{"query":"EGFR","filters":{"modality":"vaccine"}}`,
			wantStatus: 400, wantCT: ct, check: expect("error.reason", "invalidParameter"),
		},
	})
}

func TestDocuments(t *testing.T) {
	const colon, edit, ct = "POST /v1/documents/{doc_id}:batchUpdate", "POST /v1/documents/{doc_id}/edit", "application/json"
	runAPICases(t, []apiCase{
		{
			name: "insert and delete", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"requests":[{"insertText":{"text":"héllo","index":1}},{"deleteRange":{"startIndex":2,"endIndex":4}}]}`,
			wantStatus: 200, wantCT: ct,
			check: expect("documentId", "doc-1", "applied", 2,
				"replies.0.insertText", map[string]int{"startIndex": 1, "endIndex": 6},
				"replies.1.deleteRange", map[string]int{"startIndex": 2, "endIndex": 4}),
		},
		{
			name: "typo txt is silently ignored", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"requests":[{"insertText":{"txt":"hello","index":1}}]}`,
			wantStatus: 200, wantCT: ct,
			check: expect("documentId", "doc-1", "applied", 0, "replies", []map[string]any{{}}),
		},
		{
			name: "unknown operation is silently ignored", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"requests":[{"insertTxt":{"text":"hello","index":1}},{"insertText":{"text":"ok"}}]}`,
			wantStatus: 200, wantCT: ct, check: expect("applied", 1, "replies.0", map[string]any{}),
		},
		{
			name: "misspelled requests key", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"edit_requests":[{"insertText":{"text":"hello","index":1}}]}`,
			wantStatus: 200, wantCT: ct, check: expect("applied", 0, "replies", []any{}),
		},
		{
			name: "edit alias", method: "POST", path: "/v1/documents/doc-2/edit", contentType: ct, route: edit,
			body:       `{"requests":[{"insertText":{"text":"x","index":3}}]}`,
			wantStatus: 200, wantCT: ct, check: expect("documentId", "doc-2", "applied", 1),
		},
		{
			name: "wrong type", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"requests":[{"insertText":{"text":"x","index":"one"}}]}`,
			wantStatus: 400, wantCT: ct, check: expect("error.status", "INVALID_ARGUMENT", "error.code", 400),
		},
		{
			name: "empty range", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"requests":[{"deleteRange":{"startIndex":5,"endIndex":2}}]}`,
			wantStatus: 400, wantCT: ct, check: expect("error.status", "INVALID_ARGUMENT"),
		},
		{
			name: "two kinds in one request", method: "POST", path: "/v1/documents/doc-1:batchUpdate", contentType: ct, route: colon,
			body:       `{"requests":[{"insertText":{"text":"x"},"deleteRange":{"startIndex":1,"endIndex":2}}]}`,
			wantStatus: 400, wantCT: ct, check: expect("error.status", "INVALID_ARGUMENT"),
		},
		{
			name: "other verb", method: "POST", path: "/v1/documents/doc-1:get", contentType: ct, route: colon,
			body:       `{}`,
			wantStatus: 404, wantCT: ct, check: expect("error.status", "NOT_FOUND"),
		},
	})
}

func TestNotes(t *testing.T) {
	const route, form = "POST /v1/notes", "application/x-www-form-urlencoded"
	runAPICases(t, []apiCase{
		{
			name: "created", method: "POST", path: "/v1/notes", contentType: form, route: route,
			body:       url.Values{"title": {"Assay plan"}, "body": {"run 3 & 4"}, "tags": {"lab", "q3"}}.Encode(),
			wantStatus: 201, wantCT: "application/json",
			check: func(t *testing.T, v map[string]any) {
				expect("title", "Assay plan", "body", "run 3 & 4", "tags", []string{"lab", "q3"})(t, v)
				if id, _ := v["id"].(string); !strings.HasPrefix(id, "note-") {
					t.Errorf("id = %q, want note-...", id)
				}
			},
		},
		{
			name: "charset parameter", method: "POST", path: "/v1/notes", contentType: form + "; charset=utf-8", route: route,
			body:       "title=t",
			wantStatus: 201, wantCT: "application/json", check: expect("tags", []string{}),
		},
		{
			name: "title missing", method: "POST", path: "/v1/notes", contentType: form, route: route,
			body:       "body=x",
			wantStatus: 400, wantCT: "application/json", wantBody: `{"error":"title is required"}`,
		},
		{
			name: "JSON instead of a form", method: "POST", path: "/v1/notes", contentType: "application/json", route: route,
			body:       `{"title":"x"}`,
			wantStatus: 415, wantCT: "application/json",
		},
	})
}

func TestNotesLocation(t *testing.T) {
	s := startServer(t)
	status, h, body := do(t, testClient(), "POST", s.URL()+"/v1/notes", "application/x-www-form-urlencoded", "title=a")
	var n struct{ ID string }
	if err := json.Unmarshal(body, &n); err != nil || status != http.StatusCreated {
		t.Fatalf("POST /v1/notes = %d %q", status, body)
	}
	if got, want := h.Get("Location"), "/v1/notes/"+n.ID; got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
}

// TestDeterministic asks each API twice and wants the same bytes.
func TestDeterministic(t *testing.T) {
	s := startServer(t)
	c := testClient()
	tests := []struct{ name, method, path, ct, body string }{
		{"esearch", "GET", "/esearch?term=brca1&retmax=50", "", ""},
		{"structure", "GET", "/v1/structure/P04637", "", ""},
		{"targets", "POST", "/v1/targets/search", "application/json", `{"query":"inflammation","limit":20}`},
		{"documents", "POST", "/v1/documents/d:batchUpdate", "application/json", `{"requests":[{"insertText":{"text":"a","index":1}}]}`},
		{"notes", "POST", "/v1/notes", "application/x-www-form-urlencoded", "title=a&tags=x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, a := do(t, c, tt.method, s.URL()+tt.path, tt.ct, tt.body)
			_, _, b := do(t, c, tt.method, s.URL()+tt.path, tt.ct, tt.body)
			if !bytes.Equal(a, b) {
				t.Errorf("two answers differ:\n%s\n%s", a, b)
			}
		})
	}
}
