package pipe

import (
	"net/http"
	"slices"
	"testing"
)

// TestRemoveHopHeaders checks every hop-by-hop header of RFC 9110 section
// 7.6.1 goes, with the ones Connection headers name (in any case, with
// spaces and empty items), and nothing else does.
func TestRemoveHopHeaders(t *testing.T) {
	h := http.Header{
		"Connection":          {"x-drop-one , keep-alive", ",X-Drop-Two,,"},
		"Proxy-Connection":    {"keep-alive"},
		"Keep-Alive":          {"timeout=5"},
		"Proxy-Authenticate":  {"Basic"},
		"Proxy-Authorization": {"Basic c2VjcmV0"},
		"Te":                  {"trailers"},
		"Trailer":             {"X-Sum"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"h2c"},
		"X-Drop-One":          {"1"},
		"X-Drop-Two":          {"2"},
		"X-Keep":              {"3"},
		"Authorization":       {"Bearer t"},
		"Content-Type":        {"application/json"},
		"Tea":                 {"not a hop header"},
	}
	removeHopHeaders(h)
	var got []string
	for k := range h {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := []string{"Authorization", "Content-Type", "Tea", "X-Keep"}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}
