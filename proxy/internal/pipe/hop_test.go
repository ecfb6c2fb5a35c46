package pipe

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// TestRemoveAnswerHeaders checks every hop-by-hop header of RFC 9110
// section 7.6.1 goes, with the ones Connection headers name (in any case,
// with spaces and empty items) and toolgate's own (in any case), and
// nothing else does.
func TestRemoveAnswerHeaders(t *testing.T) {
	h := http.Header{
		"Connection":            {"x-drop-one , keep-alive", ",X-Drop-Two,,"},
		"Proxy-Connection":      {"keep-alive"},
		"Keep-Alive":            {"timeout=5"},
		"Proxy-Authenticate":    {"Basic"},
		"Proxy-Authorization":   {"Basic c2VjcmV0"},
		"Te":                    {"trailers"},
		"Trailer":               {"X-Sum"},
		"Transfer-Encoding":     {"chunked"},
		"Upgrade":               {"h2c"},
		"X-Drop-One":            {"1"},
		"X-Drop-Two":            {"2"},
		"X-Keep":                {"3"},
		"Authorization":         {"Bearer t"},
		"Content-Type":          {"application/json"},
		"Tea":                   {"not a hop header"},
		"X-Toolgate-Error-Code": {"upstream"},
		"x-toolgate-other":      {"1"},
		"X-Toolgate":            {"not toolgate's: no dash"},
	}
	removeAnswerHeaders(h)
	var got []string
	for k := range h {
		got = append(got, k)
	}
	slices.Sort(got)
	if want := []string{"Authorization", "Content-Type", "Tea", "X-Keep", "X-Toolgate"}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
}

// headerFromSpec reads lines "name:value" (split by NUL) into a header, the
// names as they are; a line "name" alone gives the name a nil value.
func headerFromSpec(spec string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(spec, "\x00") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if _, had := h[line]; !had {
				h[line] = nil
			}
			continue
		}
		h[k] = append(h[k], v)
	}
	return h
}

// FuzzUpstreamHeader holds upstreamHeader, the one-pass copy Dispatch
// makes of the caller's header, to what copying it and then cleaning it
// with CleanRequestHeaders gives: the same names with the same values
// (nil and empty ones alike), whatever the values' array; and
// cloneRequest to the same header, whether it copies (the caller's header
// left as it came) or cleans the caller's own (last).
func FuzzUpstreamHeader(f *testing.F) {
	f.Add("Connection:keep-alive, X-Drop\x00X-Drop:1\x00Accept:application/json, "+bucketing.EnvelopeMediaType+"\x00Accept-Encoding:gzip\x00X-Keep:2", true, 16)
	f.Add("Connection:accept,user-agent\x00Accept:*/*\x00User-Agent:curl\x00Proxy-Connection:close\x00Te:trailers", false, 2)
	f.Add("Accept:"+bucketing.EnvelopeMediaType+"\x00"+conf.HeaderEnvelope+":always\x00Upgrade:h2c\x00X-Nil\x00connection:x-lower\x00x-lower:1", true, 0)
	f.Add("Authorization:Bearer t\x00Content-Type:application/json\x00Connection:,,Authorization ,", false, -1)
	f.Fuzz(func(t *testing.T, spec string, decoded bool, nvals int) {
		h := headerFromSpec(spec)
		valsOf := func() []string {
			if nvals < 0 {
				return nil
			}
			return make([]string, nvals%64)
		}
		want, _ := cloneHeader(h, valsOf())
		CleanRequestHeaders(want, decoded)
		got, spare := upstreamHeader(h, valsOf(), decoded)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("header %q (decoded %v):\none pass %#v\ncopy, then clean %#v", spec, decoded, got, want)
		}
		for i := range spare {
			spare[i] = "spare"
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("writing the spare values changed the copy: %#v", got)
		}
		for k, vv := range got {
			if len(vv) > 0 && len(h[k]) > 0 && &vv[0] == &h[k][0] {
				t.Fatalf("%s shares the caller's array", k)
			}
		}
		// cloneRequest: a copy that leaves the caller's header as it
		// came, unless nothing reads it again (last), when the header
		// itself is cleaned; upstream gets the same header either way.
		before, _ := cloneHeader(h, nil)
		r := (&http.Request{Method: "POST", Header: h}).WithContext(context.Background())
		out, _ := cloneRequest(context.Background(), r, valsOf(), decoded, false)
		if !reflect.DeepEqual(out.Header, want) || !reflect.DeepEqual(r.Header, before) {
			t.Fatalf("header %q (decoded %v): cloneRequest sent %#v (want %#v) and left the call's %#v (was %#v)", spec, decoded, out.Header, want, r.Header, before)
		}
		out, spare = cloneRequest(context.Background(), r, valsOf(), decoded, true)
		for i := range spare {
			spare[i] = "spare"
		}
		if !reflect.DeepEqual(out.Header, want) {
			t.Fatalf("header %q (decoded %v): cloneRequest, last, sent %#v, want %#v", spec, decoded, out.Header, want)
		}
	})
}
