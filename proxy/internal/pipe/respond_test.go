package pipe

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/canonical"
)

// envelopeDataBefore is envelopeData as it was before it left the JSON
// check to Envelope.Marshal: the oracle FuzzEnvelopeData holds it to.
func envelopeDataBefore(ct string, body []byte) (json.RawMessage, bool) {
	mt, _, _ := canonical.ParseMediaType(ct)
	if (mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "") && json.Valid(body) {
		return json.RawMessage(body), true
	}
	if !utf8.Valid(body) {
		return nil, false
	}
	return bucketing.TextData(body), true
}

// FuzzEnvelopeData: for any upstream answer and content type, the
// envelope a caller gets (or the raw pass-through) is byte for byte what
// it was when envelopeData checked the JSON itself.
func FuzzEnvelopeData(f *testing.F) {
	for _, seed := range []struct{ ct, body string }{
		{"application/json", `{"a": [1, 2, {"b": "c"}]}`},
		{"application/json", `{"a": 1`},
		{"application/json", ``},
		{"application/json", " \n\t "},
		{"application/json", `"text"`},
		{"application/json", "{\"a\":\"\xff\"}"},
		{"application/json", "\xff\xfe"},
		{"application/problem+json; charset=utf-8", `{"title":"x"}`},
		{"", `[1,2]`},
		{"", `plain words`},
		{"text/plain", `{"a":1}`},
		{"text/plain", "caf\xc3\xa9"},
		{"application/json", `{"a":1} {"b":2}`},
		{"application/json", `1e400`},
		{"application/json", `{"<tag>":"&amp;"}`},
		{"application/json", "{\"a\":\"\u2028\"}"},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		got, gotOK := envelopeData(ct, body)
		want, wantOK := envelopeDataBefore(ct, body)
		if gotOK != wantOK {
			t.Fatalf("ct %q body %q: ok %v, was %v", ct, body, gotOK, wantOK)
		}
		if !gotOK {
			return
		}
		g := bucketing.Envelope{OK: true, Data: got}.Marshal()
		w := bucketing.Envelope{OK: true, Data: want}.Marshal()
		if !bytes.Equal(g, w) {
			t.Fatalf("ct %q body %q: envelope\n%s\nwas\n%s", ct, body, g, w)
		}
		if !json.Valid(g) {
			t.Fatalf("ct %q body %q: the envelope is not JSON: %s", ct, body, g)
		}
	})
}

// BenchmarkEnvelopeData is an answer turned into the envelope's body, as
// envelopeAnswer does it, now and as it was before (a json.Valid pass
// first), on the external benchmark upstream's answer.
func BenchmarkEnvelopeData(b *testing.B) {
	body := []byte(`{"ok":true,"id":"b0001","items":[{"id":1,"name":"alpha","score":0.91},` +
		`{"id":2,"name":"beta","score":0.82},{"id":3,"name":"gamma","score":0.73}],` +
		`"meta":{"source":"demotools","cached":true,"took_ms":0}}`)
	for _, v := range []struct {
		name string
		fn   func(string, []byte) (json.RawMessage, bool)
	}{{"now", envelopeData}, {"before", envelopeDataBefore}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, _ := v.fn("application/json", body)
				_ = bucketing.Envelope{OK: true, Data: data}.Marshal()
			}
		})
	}
}

// TestDropBodyHeaders: a replaced body loses its validators and ranges,
// and its framing only when asked; every other header stays.
func TestDropBodyHeaders(t *testing.T) {
	full := func() http.Header {
		return http.Header{
			"Etag": {`"x"`}, "Content-Md5": {"m"}, "Digest": {"d"}, "Content-Range": {"bytes 0-1/2"}, "Accept-Ranges": {"bytes"},
			"Content-Length": {"2"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"},
			"Cache-Control": {"no-store"}, "X-Request-Id": {"r"}, "Date": {"now"},
		}
	}
	for _, tc := range []struct {
		framing bool
		want    []string
	}{
		{false, []string{"Cache-Control", "Content-Encoding", "Content-Length", "Content-Type", "Date", "X-Request-Id"}},
		{true, []string{"Cache-Control", "Date", "X-Request-Id"}},
	} {
		h := full()
		DropBodyHeaders(h, tc.framing)
		var got []string
		for k := range h {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("framing=%v: kept %v, want %v", tc.framing, got, tc.want)
		}
	}
}
