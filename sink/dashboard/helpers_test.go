package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink/dashboard/internal/dashtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// The shared fixtures, under the short names the tests use (see dashtest).
var (
	now      = dashtest.Now
	tools    = dashtest.Tools
	agents   = dashtest.Agents
	sidecars = dashtest.Sidecars
)

const readerUser = dashtest.ReaderUser

var (
	genEvents = dashtest.GenEvents
	seed      = dashtest.Seed
	addReader = dashtest.AddReader
	asReader  = dashtest.AsReader
	serve     = dashtest.Serve
)

// getJSON fetches url and decodes a JSON answer into v; it returns the status.
func getJSON(t testing.TB, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	} else if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %s: not JSON: %s", url, resp.Status, b)
	}
	return resp.StatusCode
}

// pageHas fetches the page at url and checks that it holds each of want.
func pageHas(t testing.TB, url string, want ...string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range want {
		if !strings.Contains(string(page), s) {
			t.Errorf("the page lacks %s", s)
		}
	}
}

func atoi(t testing.TB, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
