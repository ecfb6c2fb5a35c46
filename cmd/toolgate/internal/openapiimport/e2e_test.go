package openapiimport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/proxytest"
	"github.com/toolgate/toolgate/proxy"
)

// TestImportedPetstoreBehindProxy imports the Swagger Petstore against a
// Go stand-in of its API (--server the stand-in's URL), serves the
// imported tools with a real proxy, and sends calls through it as a
// service configured with HTTP_PROXY would: the valid ones reach the
// stand-in, the invalid ones are refused and never do, judged by what the
// stand-in received.
func TestImportedPetstoreBehindProxy(t *testing.T) {
	var mu sync.Mutex
	var got []string // "METHOD /path?query body"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(b)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	defer api.Close()

	dir := t.TempDir()
	out := filepath.Join(dir, "petstore-tools.yaml")
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), RunOptions{
		Source: "../../../../examples/openapi/petstore.yaml",
		Output: out,
		Import: Options{Server: api.URL + "/api/v3"},
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	tools, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ps := proxytest.Start(t, "listen:\n  forward: 127.0.0.1:0\n"+string(tools), dir, proxy.Options{})
	proxyURL, _ := url.Parse("http://" + ps.Addr("forward", 0))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}

	cases := []struct {
		name, method, path, ctype, body string
		forwarded                       bool
	}{
		{"add a pet", "POST", "/api/v3/pet", "application/json", `{"name":"doggie","photoUrls":["https://img.example/1"],"status":"sold","category":{"id":1,"name":"Dogs"}}`, true},
		{"a misspelt field", "POST", "/api/v3/pet", "application/json", `{"name":"doggie","photoUrls":[],"stauts":"sold"}`, false},
		{"a misspelt nested field", "POST", "/api/v3/pet", "application/json", `{"name":"doggie","photoUrls":[],"category":{"nmae":"Dogs"}}`, false},
		{"a required field missing", "POST", "/api/v3/pet", "application/json", `{"name":"doggie"}`, false},
		{"a status outside the enum", "POST", "/api/v3/pet", "application/json", `{"name":"doggie","photoUrls":[],"status":"lost"}`, false},
		{"an XML body", "POST", "/api/v3/pet", "application/xml", `<pet><name>doggie</name></pet>`, false},
		{"find by status", "GET", "/api/v3/pet/findByStatus?status=pending", "", "", true},
		{"find by a status outside the enum", "GET", "/api/v3/pet/findByStatus?status=lost", "", "", false},
		{"a pet by id", "GET", "/api/v3/pet/7", "", "", true},
		{"a pet id that is no integer", "GET", "/api/v3/pet/seven", "", "", false},
		{"a query the operation does not take", "GET", "/api/v3/store/inventory?debug=1", "", "", false},
		{"the inventory", "GET", "/api/v3/store/inventory", "", "", true},
		{"an operation the document does not have", "GET", "/api/v3/admin/users", "", "", false},
		{"an operation refused at import (octet-stream upload)", "POST", "/api/v3/pet/7/uploadImage", "application/octet-stream", "\x89PNG", false},
	}
	for _, c := range cases {
		mu.Lock()
		before := len(got)
		mu.Unlock()
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, err := http.NewRequest(c.method, api.URL+c.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		reached := len(got) > before
		mu.Unlock()
		switch {
		case c.forwarded && (!reached || resp.StatusCode != http.StatusOK):
			t.Errorf("%s: status %d, reached the API: %v; want it forwarded\n%s", c.name, resp.StatusCode, reached, answer)
		case !c.forwarded && reached:
			t.Errorf("%s: reached the API (status %d); want it refused", c.name, resp.StatusCode)
		case !c.forwarded && resp.StatusCode < 400:
			t.Errorf("%s: status %d; want a refusal", c.name, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 4 {
		t.Errorf("the API received %d calls, want the 4 valid ones: %q", len(got), got)
	}
}
