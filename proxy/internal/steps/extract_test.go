package steps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/internal/conf"
)

const extractSchema = `{
  "type": "object",
  "properties": {
    "term": {"type": "string"},
    "retmax": {"type": "integer"},
    "exact": {"type": "boolean"},
    "pmid": {"type": "array", "items": {"type": "string"}},
    "ids": {"type": "array", "items": {"type": "integer"}},
    "id": {"type": "string"},
    "filters": {"type": "object", "properties": {"n": {"type": "integer"}}}
  }
}`

func testTool(t testing.TB, path string, sources ...string) *conf.Tool {
	t.Helper()
	cfg := conf.Config{Tools: []conf.ToolConfig{{
		Name:  "t",
		Match: conf.MatchConfig{Path: path},
		Args:  sources,
	}}}
	var schema map[string]any
	if err := json.Unmarshal([]byte(extractSchema), &schema); err != nil {
		t.Fatal(err)
	}
	cfg.Tools[0].Schema = schema
	if err := cfg.Validate(""); err != nil {
		t.Fatal(err)
	}
	return cfg.Compiled[0]
}

func TestExtractArgs(t *testing.T) {
	const js, form = "application/json", "application/x-www-form-urlencoded"
	tests := []struct {
		name       string
		sources    []string
		url        string
		ctype      string
		body       string
		want       string   // arguments as JSON
		wantReason string   // refusal reason, "" for none
		wantPaths  []string // the refusal's violation paths, when given
		wantDetail string   // the refusal's detail, when given
	}{
		{name: "query strings coerced where the schema asks", url: "/s/x1?term=a&retmax=5&exact=true",
			want: `{"id":"x1","term":"a","retmax":5,"exact":true}`},
		{name: "repeated key becomes an array", url: "/s/x1?pmid=1&pmid=2",
			want: `{"id":"x1","pmid":["1","2"]}`},
		{name: "single value where an array is wanted", url: "/s/x1?ids=7",
			want: `{"id":"x1","ids":[7]}`},
		{name: "number that does not parse stays a string", url: "/s/x1?retmax=ten",
			want: `{"id":"x1","retmax":"ten"}`},
		{name: "JSON body keeps its types (no coercion)", url: "/s/x1", ctype: js, body: `{"retmax":"5","filters":{"n":1}}`,
			want: `{"id":"x1","retmax":"5","filters":{"n":1}}`},
		{name: "JSON content type with parameters", url: "/s/x1", ctype: "application/json; charset=utf-8", body: `{"term":"a"}`,
			want: `{"id":"x1","term":"a"}`},
		{name: "vendor +json type", url: "/s/x1", ctype: "application/vnd.api+json", body: `{"term":"a"}`,
			want: `{"id":"x1","term":"a"}`},
		{name: "form body", url: "/s/x1", ctype: form, body: "term=a&retmax=3&pmid=1&pmid=2",
			want: `{"id":"x1","term":"a","retmax":3,"pmid":["1","2"]}`},
		{name: "body of another type is not read as arguments", url: "/s/x1", ctype: "text/plain", body: "hello",
			want: `{"id":"x1"}`},
		{name: "explicit json source reads a body without a content type", sources: []string{"json"}, url: "/s/x1?term=ignored", body: `{"term":"b"}`,
			want: `{"term":"b"}`},
		{name: "duplicate name at the top", url: "/s/x1", ctype: js, body: `{"retmax":500,"retmax":5}`, wantReason: "duplicate_argument",
			wantPaths: []string{"/retmax"}},
		{name: "duplicate name deep inside", url: "/s/x1", ctype: js, body: `{"filters":{"n":1,"list":[{"a":1},{"b":2,"b":3}],"n":2}}`, wantReason: "duplicate_argument",
			wantPaths: []string{"/filters/list/1/b", "/filters/n"}},
		{name: "names equal up to case", url: "/s/x1", ctype: js, body: `{"retmax":5,"RetMax":500}`, wantReason: "duplicate_argument",
			wantPaths: []string{"/RetMax"}},
		{name: "names equal up to Unicode folding (Kelvin sign)", url: "/s/x1", ctype: js, body: `{"k":1,"\u212a":2}`, wantReason: "duplicate_argument",
			wantPaths: []string{"/\u212a"}},
		{name: "names that decode to the same string", url: "/s/x1", ctype: js, body: `{"a\ud800":1,"a\ufffd":2}`, wantReason: "duplicate_argument"},
		{name: "escaped and plain spelling of one name", url: "/s/x1", ctype: js, body: `{"term":"a","\u0074erm":"b"}`, wantReason: "duplicate_argument",
			wantPaths: []string{"/term"}},
		{name: "same name in different objects is fine", url: "/s/x1", ctype: js, body: `{"filters":{"n":1},"x":[{"n":2},{"n":3}]}`,
			want: `{"id":"x1","filters":{"n":1},"x":[{"n":2},{"n":3}]}`},
		{name: "colons inside strings are not members", url: "/s/x1", ctype: js, body: `{"term":"a:b:\"c:d"}`,
			want: `{"id":"x1","term":"a:b:\"c:d"}`},
		{name: "nesting at the limit", url: "/s/x1", ctype: js, body: `{"a":` + strings.Repeat("[", conf.DefaultMaxJSONDepth-1) + strings.Repeat("]", conf.DefaultMaxJSONDepth-1) + `}`,
			want: `{"id":"x1","a":` + strings.Repeat("[", conf.DefaultMaxJSONDepth-1) + strings.Repeat("]", conf.DefaultMaxJSONDepth-1) + `}`},
		{name: "nesting past the limit", url: "/s/x1", ctype: js, body: `{"a":` + strings.Repeat("[", conf.DefaultMaxJSONDepth) + strings.Repeat("]", conf.DefaultMaxJSONDepth) + `}`,
			wantReason: "malformed_body"},
		{name: "form body that is also JSON", url: "/s/x1", ctype: form, body: `{"retmax":500}`, wantReason: "unsupported_media_type"},
		{name: "empty JSON body is no arguments", sources: []string{"json"}, url: "/s/x1", ctype: js, body: "  ",
			want: `{}`},
		{name: "path variable is unescaped", url: "/s/a%20b",
			want: `{"id":"a b"}`},
		{name: "malformed JSON", url: "/s/x1", ctype: js, body: `{"term":`, wantReason: "malformed_body"},
		{name: "JSON with trailing data", url: "/s/x1", ctype: js, body: `{"term":"a"} {}`, wantReason: "malformed_body"},
		{name: "JSON array instead of object", url: "/s/x1", ctype: js, body: `[1,2]`, wantReason: "malformed_body"},
		{name: "malformed form", url: "/s/x1", ctype: form, body: "term=%zz", wantReason: "malformed_body"},
		{name: "malformed query", url: "/s/x1?term=%zz", wantReason: "malformed_query"},
		{name: "name from two sources", url: "/s/x1?term=a", ctype: js, body: `{"term":"b"}`, wantReason: "duplicate_argument",
			wantDetail: "Tool 't' got argument 'term' from both the query string and the JSON body"},
		{name: "path variable repeated in query", url: "/s/x1?id=x2", wantReason: "duplicate_argument",
			wantDetail: "Tool 't' got argument 'id' from both the path and the query string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := testTool(t, "/s/{id}", tc.sources...)
			r, err := http.NewRequest("POST", "http://h"+tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			vars, _, ok := tl.Tmpl.Match(r.URL.EscapedPath())
			if !ok {
				t.Fatalf("template did not match %s", r.URL.Path)
			}
			src, _ := bodySource(tl, r)
			args, depth, inRange, ref := extractArgs(tl, r, vars, []byte(tc.body), src, conf.DefaultMaxJSONDepth)
			if ref == nil && depth != valueDepth(args) {
				t.Errorf("depth = %d, want %d (the arguments' own)", depth, valueDepth(args))
			}
			if ref == nil && inRange && policies.HasHugeNumber(args) {
				t.Errorf("arguments %v said in range, and hold a number past policies.NumberInRange", args)
			}
			if tc.wantReason != "" {
				if ref == nil {
					t.Fatalf("args = %v, want refusal %s", args, tc.wantReason)
				}
				if ref.Reason != tc.wantReason || ref.Code != bucketing.CodeValidation {
					t.Errorf("refusal = %s/%s, want validation/%s", ref.Code, ref.Reason, tc.wantReason)
				}
				if tc.body != "" && len(tc.body) > 3 && strings.Contains(ref.Detail, tc.body) {
					t.Errorf("detail %q echoes the body", ref.Detail)
				}
				if tc.wantDetail != "" && ref.Detail != tc.wantDetail {
					t.Errorf("detail = %q, want %q", ref.Detail, tc.wantDetail)
				}
				if tc.wantPaths != nil {
					var paths []string
					for _, v := range ref.Violations {
						paths = append(paths, v.Path)
					}
					if !reflect.DeepEqual(paths, tc.wantPaths) {
						t.Errorf("violation paths = %q, want %q", paths, tc.wantPaths)
					}
				}
				return
			}
			if ref != nil {
				t.Fatalf("refused: %s %s", ref.Reason, ref.Detail)
			}
			var want map[string]any
			dec := json.NewDecoder(strings.NewReader(tc.want))
			dec.UseNumber()
			if err := dec.Decode(&want); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(args)
			wantJSON, _ := json.Marshal(want)
			if !testutil.JSONEqual(got, wantJSON) {
				t.Errorf("args = %s, want %s", got, wantJSON)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		declare int64 // Content-Length to declare; -1 for unknown
		wantErr error
	}{
		{"under the limit", "12345", 5, nil},
		{"exactly the limit", "1234567890", 10, nil},
		{"declared over the limit", "12345678901", 11, conf.ErrBodyTooLarge},
		{"unknown length over the limit", "12345678901", -1, conf.ErrBodyTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "http://h/", strings.NewReader(tc.body))
			r.ContentLength = tc.declare
			got, err := conf.ReadBody(r, 10)
			if err != tc.wantErr {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && string(got) != tc.body {
				t.Errorf("body = %q, want %q", got, tc.body)
			}
		})
	}
	// A declared length over the limit is refused without reading a byte.
	r, _ := http.NewRequest("POST", "http://h/", &countingReader{})
	r.ContentLength = 1 << 30
	if _, err := conf.ReadBody(r, 10); err != conf.ErrBodyTooLarge {
		t.Fatalf("err = %v", err)
	}
	if n := r.Body.(*countingReader).n; n != 0 {
		t.Errorf("read %d bytes of a body declared too large", n)
	}
}

// TestReadUpTo checks the bounded read behind a call's body and an
// answer's envelope: whatever the reads' sizes, it returns exactly the bytes
// up to limit+1, what it read before an error along with the error, and a
// body of a declared length in one allocation.
func TestReadUpTo(t *testing.T) {
	long := strings.Repeat("0123456789", 300) // 3,000 bytes: past the 512 a body of unknown length starts with
	errCut := errors.New("connection reset")
	for _, tc := range []struct {
		name    string
		r       func() io.Reader
		size    int64
		limit   int64
		want    string
		wantErr error
	}{
		{"declared length", func() io.Reader { return strings.NewReader("hello") }, 5, 10, "hello", nil},
		{"empty", func() io.Reader { return strings.NewReader("") }, 0, 10, "", nil},
		{"unknown length, grown", func() io.Reader { return strings.NewReader(long) }, -1, 5000, long, nil},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(strings.NewReader(long)) }, -1, 5000, long, nil},
		{"declared shorter than it is", func() io.Reader { return strings.NewReader(long) }, 3, 5000, long, nil},
		{"exactly the limit", func() io.Reader { return strings.NewReader(long[:100]) }, 100, 100, long[:100], nil},
		{"over the limit: limit+1 bytes, no more", func() io.Reader { return strings.NewReader(long) }, -1, 100, long[:101], nil},
		{"over a declared limit", func() io.Reader { return strings.NewReader(long) }, 3000, 700, long[:701], nil},
		{"error after some bytes", func() io.Reader { return io.MultiReader(strings.NewReader("part"), iotest.ErrReader(errCut)) }, 10, 100, "part", errCut},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(strings.NewReader(long[:50])) }, 50, 100, long[:50], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := conf.ReadUpTo(tc.r(), tc.size, tc.limit)
			if err != tc.wantErr {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if string(got) != tc.want {
				t.Errorf("read %d bytes %.20q..., want %d bytes %.20q...", len(got), got, len(tc.want), tc.want)
			}
		})
	}
	var src strings.Reader
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(long[:150])
		if b, err := conf.ReadUpTo(&src, 150, 1<<20); err != nil || len(b) != 150 {
			t.Fatalf("readUpTo = %d bytes, %v", len(b), err)
		}
	})
	if allocs != 1 {
		t.Errorf("a 150-byte body of a declared length took %v allocations, want 1", allocs)
	}
}

type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) { c.n += len(p); return len(p), nil }

func (c *countingReader) Close() error { return nil }

// FuzzExtractArgs feeds arbitrary queries, bodies and content types through
// extraction and validation: nothing panics, a refusal is always a
// validation refusal with a reason, and arguments always validate or yield
// violations with a reason and a path.
func FuzzExtractArgs(f *testing.F) {
	f.Add("term=a&retmax=5", "application/json", []byte(`{"filters":{"n":1}}`))
	f.Add("pmid=1&pmid=2&ids=3", "application/x-www-form-urlencoded", []byte("term=a&exact=yes"))
	f.Add("%zz", "text/plain", []byte{0xff, 0xfe})
	f.Add("", "application/json", []byte(`{"a":[{"b":{"c":[1e400]}}]}`))
	f.Add("id=dup", "application/json", []byte(`{"id":"x"}`))
	f.Add("retmax=99999999999999999999999", "application/json; charset=utf-8", []byte(`{"term":null}`))
	f.Add("", "application/json; x", []byte(`{"retmax":500,"retmax":5}`))
	f.Add("", "application/x-www-form-urlencoded", []byte(`{"retmax":500}`))
	f.Add("", "multipart/form-data; boundary=X", []byte("--X\r\nContent-Disposition: form-data; name=\"retmax\"\r\n\r\n500\r\n--X--"))
	f.Add("", "text/json", []byte(`{"filters":{"n":1,"N":2}}`))
	tl := testTool(f, "/s/{id}")
	f.Fuzz(func(t *testing.T, query, ctype string, body []byte) {
		u := &url.URL{Scheme: "http", Host: "h", Path: "/s/x", RawQuery: query}
		r := &http.Request{Method: "POST", URL: u, Header: http.Header{"Content-Type": {ctype}},
			Body: http.NoBody, ContentLength: int64(len(body))}
		src, _ := bodySource(tl, r)
		args, depth, inRange, ref := extractArgs(tl, r, map[string]string{"id": "x"}, body, src, conf.DefaultMaxJSONDepth)
		if ref == nil && depth != valueDepth(args) {
			// The depth the policies trust (policies.Input.ArgsDepth)
			// is the arguments' own.
			t.Fatalf("depth %d reported for arguments %v nested %d deep", depth, args, valueDepth(args))
		}
		if ref == nil && inRange && policies.HasHugeNumber(args) {
			// The schema step trusts it (Schema.ValidateInRange) and
			// does not look again.
			t.Fatalf("arguments %v said in range, and hold a number past policies.NumberInRange", args)
		}
		if src == 0 && ref == nil {
			// An unreadable body gives no arguments; handle refuses it
			// when it is not empty. Only the query and path count.
			if mt, _, err := mime.ParseMediaType(ctype); err == nil && (mt == "application/json" || mt == "application/x-www-form-urlencoded") && !strings.Contains(ctype, "charset") {
				t.Fatalf("media type %q (parsed as %q) was not read", ctype, mt)
			}
		}
		if ref != nil {
			if ref.Code != bucketing.CodeValidation || ref.Reason == "" || ref.Detail == "" {
				t.Fatalf("refusal without code, reason or detail: %+v", ref)
			}
			return
		}
		for _, v := range tl.Schema.Validate(args) {
			if v.Reason == "" || !strings.HasPrefix(v.Path, "/") && v.Path != "" {
				t.Fatalf("violation without reason or pointer path: %+v", v)
			}
		}
		if d := policies.Detail("t", tl.Schema.Validate(args)); strings.Contains(d, "\n") {
			t.Fatalf("detail is not one sentence: %q", d)
		}
	})
}

// decodeOnly is decodeObject as it was before duplicate names and depth
// were checked: the baseline of BenchmarkDecodeObject.
func decodeOnly(body []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	if _, extra := dec.Token(); extra != io.EOF {
		return nil, false
	}
	obj, ok := v.(map[string]any)
	return obj, ok
}

// benchBodies are argument bodies of the sizes tools get: a search's few
// members, a document edit's nested list, and a 64 KiB batch.
func benchBodies() map[string][]byte {
	var big strings.Builder
	big.WriteString(`{"doc_id":"d-1","requests":[`)
	for i := 0; big.Len() < 64<<10; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"insertText":{"text":"line %d: a:b \"quoted\"","location":{"index":%d}}}`, i, i+1)
	}
	big.WriteString(`]}`)
	return map[string][]byte{
		"small":  []byte(`{"term":"crispr cas9","retmax":20,"sort":"relevance","mindate":"2020/01/01"}`),
		"nested": []byte(`{"doc_id":"d-1","requests":[{"insertText":{"text":"hello","location":{"index":1}}},{"deleteContentRange":{"range":{"startIndex":3,"endIndex":9}}},{"replaceAllText":{"containsText":{"text":"a","matchCase":true},"replaceText":"b"}}]}`),
		"64KiB":  []byte(big.String()),
	}
}

// BenchmarkDecodeObject compares decoding a JSON body of arguments as it
// was (decode) with decoding it and checking duplicate names and depth
// (decode+check), side by side in one run; check-only is the added scan and
// walk alone.
func BenchmarkDecodeObject(b *testing.B) {
	bodies := benchBodies()
	for _, name := range []string{"small", "nested", "64KiB"} {
		body := bodies[name]
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := decodeOnly(body); !ok {
					b.Fatal("not decoded")
				}
			}
		})
		obj, _ := decodeOnly(body)
		b.Run(name+"/check-only", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				members, _ := jsonShape(body)
				if n, folds := countMembers(obj); n != members || folds {
					b.Fatal("duplicates found")
				}
			}
		})
		b.Run(name+"/decode+check", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ref := decodeObject("t", body, conf.DefaultMaxJSONDepth); ref != nil {
					b.Fatal(ref.Detail)
				}
			}
		})
	}
}

// firstWins decodes a JSON text the way a parser that keeps the first of
// two equal names reads it (encoding/json keeps the last): the other half
// of FuzzDecodeObject's differential.
func firstWins(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := firstWins(dec)
			if err != nil {
				return nil, err
			}
			if _, seen := m[k]; !seen {
				m[k] = v
			}
		}
		_, err = dec.Token()
		return m, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := firstWins(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err = dec.Token()
		return a, err
	}
	return tok, nil
}

// FuzzDecodeObject checks the duplicate-name rule as a differential: every
// JSON body toolgate accepts reads the same to a parser that keeps the first
// of two names as to one that keeps the last, has no two names equal up to
// case in one object, and nests within the limit; every body it refuses as
// duplicate_argument has such names, each violation a JSON pointer.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		`{"retmax":500,"retmax":5}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"x":1},{"x":2,"x":3}]}`,
		`{"n":1,"N":2}`, `{"k":1,"\u212a":2}`, `{"a\ud800":1,"a\ufffd":2}`, `{"t":"a:b\"c:","u":1}`,
		`{"x":"\\","y":"\\\""}`, `{"a":[[[[1]]]]}`, `{}`, `{"a":1} {"a":2}`, `[1]`, `{"a":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, ref := decodeObject("t", body, 8)
		if ref != nil {
			if ref.Reason == bucketing.ReasonDuplicateArgument {
				if len(ref.Violations) == 0 {
					t.Fatalf("duplicate_argument without violations")
				}
				for _, v := range ref.Violations {
					if !strings.HasPrefix(v.Path, "/") {
						t.Fatalf("violation path %q is not a JSON pointer", v.Path)
					}
				}
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		first, err := firstWins(dec)
		if err != nil {
			t.Fatalf("accepted a body the first-wins parser cannot read: %v", err)
		}
		got, _ := json.Marshal(obj)
		want, _ := json.Marshal(first)
		if !bytes.Equal(got, want) {
			t.Fatalf("accepted body reads %s to encoding/json and %s to a first-wins parser", got, want)
		}
		if vs := duplicateNames(body); len(vs) > 0 {
			t.Fatalf("accepted a body with duplicate names: %+v", vs)
		}
		if _, depth := jsonShape(body); depth > 8 {
			t.Fatalf("accepted a body nested %d deep", depth)
		}
	})
}

// TestBodySourceSaysWhatToSend checks that a body of a type a tool does not
// read is refused with a reason that says which type to send.
func TestBodySourceSaysWhatToSend(t *testing.T) {
	tests := []struct {
		name    string
		sources []string
		want    string
	}{
		{"JSON tool", []string{"json"}, "media type text/plain is not read as arguments; send JSON arguments as application/json"},
		{"form tool", []string{"form"}, "media type text/plain is not read as arguments; send a form as application/x-www-form-urlencoded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := testTool(t, "/s/{id}", tc.sources...)
			r, err := http.NewRequest("POST", "http://h/s/x1", strings.NewReader(`{"term":"a"}`))
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Content-Type", "text/plain")
			if src, why := bodySource(tl, r); src != 0 || why != tc.want {
				t.Errorf("bodySource = %d, %q; want 0, %q", src, why, tc.want)
			}
		})
	}
}
