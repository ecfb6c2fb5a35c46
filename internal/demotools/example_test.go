package demotools_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/toolgate/toolgate/internal/demotools"
)

// A tool calls the literature search without its required argument and gets
// the classic "400 with a string body"; the hit counter shows it arrived.
func ExampleStart() {
	s, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer s.Close()

	resp, err := http.Get(s.URL() + "/esearch?retmax=5")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	fmt.Println(string(body))
	fmt.Println(s.Hits("GET /esearch"), s.Hits("GET /v1/structure/{uniprot_id}"))
	// Output:
	// 400 text/plain; charset=utf-8
	// Error: term is required
	// 1 0
}

// The document editor drops a misspelled field and still answers 200.
func ExampleServer_Handler() {
	s := demotools.New()
	req, _ := http.NewRequest("POST", "/v1/documents/doc-1:batchUpdate",
		strings.NewReader(`{"requests":[{"insertText":{"txt":"hello","index":1}}]}`))
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// 200 {"documentId":"doc-1","replies":[{}],"applied":0,"writeControl":{"requiredRevisionId":"rev-1zcoah8a8jqug"}}
}
