package sink

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// stdEncode is what appendEvent must match: encoding/json with HTML
// characters left as they are.
func stdEncode(t testing.TB, ev *Event) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(ev)
	return buf.Bytes(), err
}

// eventStrings are the strings the tests put in an event's fields: what
// JSON escapes, what it must not, and bytes that are not UTF-8.
var eventStrings = []string{
	"", "search_pubmed", "a\"b\\c", "line\nbreak\r\ttab", "\b\f\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "ünïcødé ✓ 𝄞", "\u2028\u2029", "bad \xff\xfe utf8 \xc3",
	"trunc \xe2\x80", strings.Repeat("x", 300),
}

// randomEvent fills every field of an Event, found by reflection so that
// a field added to Event is covered without a change here, from r.
func randomEvent(r *rand.Rand) Event { return randomEventOf(r, eventStrings) }

// randomEventOf is randomEvent with its strings drawn from strs.
func randomEventOf(r *rand.Rand, strs []string) Event {
	var ev Event
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(strs[r.IntN(len(strs))])
		case bool:
			f.SetBool(r.IntN(2) == 1)
		case int, int64:
			f.SetInt([]int64{0, 1, -1, 200, 1 << 40, -1 << 62}[r.IntN(6)])
		case []string:
			switch r.IntN(3) {
			case 0: // nil
			case 1:
				f.Set(reflect.ValueOf([]string{}))
			default:
				s := make([]string, 1+r.IntN(3))
				for j := range s {
					s[j] = strs[r.IntN(len(strs))]
				}
				f.Set(reflect.ValueOf(s))
			}
		case time.Time:
			zones := []*time.Location{time.UTC, time.FixedZone("", -7*3600-30*60), time.FixedZone("X", 14*3600)}
			t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)*int64(r.IntN(2))).In(zones[r.IntN(len(zones))])
			f.Set(reflect.ValueOf(t))
		default:
			panic("randomEvent: Event has a field of a new type, " + f.Type().String() + ": teach appendEvent and this test about it")
		}
	}
	return ev
}

func TestAppendEventMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		ev := randomEvent(r)
		want, err := stdEncode(t, &ev)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("kept")
		got, err := appendEvent(prefix, &ev, false)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.Equal(got[len(prefix):], want) || string(got[:len(prefix)]) != "kept" {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, want)
		}
		checkOmitZero(t, &ev, want)
	}
}

// checkOmitZero checks that ev written without its zero fields reads back
// as ev written in full (full) does: encoding/json's own round trip is the
// reference, since it turns bytes that are not UTF-8 into U+FFFD.
func checkOmitZero(t *testing.T, ev *Event, full []byte) {
	t.Helper()
	short, err := appendEvent(nil, ev, true)
	if err != nil {
		t.Fatal(err)
	}
	var fromShort, fromFull Event
	if err := json.Unmarshal(short, &fromShort); err != nil {
		t.Fatalf("%s does not decode: %v", short, err)
	}
	if err := json.Unmarshal(full, &fromFull); err != nil {
		t.Fatal(err)
	}
	got, _ := appendEvent(nil, &fromShort, false)
	want, _ := appendEvent(nil, &fromFull, false)
	if !bytes.Equal(got, want) {
		t.Fatalf("without zero fields %s reads back as\n%s\nwant %s", short, got, want)
	}
}

func TestAppendEventOmitsZeroFields(t *testing.T) {
	ev := Event{EventID: "e1", Time: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), Tool: "t", OK: true, UpstreamStatus: 200, ViolationPaths: []string{}}
	got, err := appendEvent(nil, &ev, true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event_id":"e1","time":"2026-11-24T10:00:00Z","tool":"t","upstream_status":200,"ok":true,"violation_paths":[]}` + "\n"
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Every key is there in full form, in Event's order (a field tagged
	// omitempty, as encoding/json has it, only when set).
	ev.ArgShape = `{"t":{"object":1}}`
	full, _ := appendEvent(nil, &ev, false)
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(full))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	typ := reflect.TypeFor[Event]()
	if len(keys) != typ.NumField() {
		t.Fatalf("full form has %d keys, Event %d fields", len(keys), typ.NumField())
	}
	for i, k := range keys {
		if tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); tag != k {
			t.Errorf("key %d is %q, field %s's tag says %q", i, k, typ.Field(i).Name, tag)
		}
	}
}

func TestAppendEventTimeOutOfRange(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)),
	} {
		ev := Event{EventID: "e", Time: tm}
		if _, err := stdEncode(t, &ev); err == nil {
			t.Fatalf("%v: encoding/json encodes it; the test's premise is wrong", tm)
		}
		got, err := appendEvent([]byte("kept"), &ev, false)
		if err == nil || string(got) != "kept" {
			t.Errorf("%v: appendEvent = %q, %v; want an error and the buffer as given", tm, got, err)
		}
		enc := newEventEncoder()
		if err := enc.encode(&ev); err == nil || len(enc.buf) != 0 {
			t.Errorf("%v: encode wrote %q, err %v; want nothing and an error", tm, enc.buf, err)
		}
	}
}

func FuzzAppendEvent(f *testing.F) {
	for _, s := range eventStrings {
		f.Add(s, s+"\x00", int64(len(s)), true, int64(0))
	}
	f.Fuzz(func(t *testing.T, a, b string, n int64, flag bool, unix int64) {
		ev := Event{
			EventID: a, Time: time.Unix(unix%(1<<35), n%1e9).UTC(), Tool: b, Agent: a + b,
			Detail: b, ViolationPaths: []string{a, b}, OK: flag, TotalUS: n, RPCID: a,
		}
		if flag {
			ev.DryRunViolations = []string{}
		}
		want, werr := stdEncode(t, &ev)
		got, gerr := appendEvent(nil, &ev, false)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("encoding/json error %v, appendEvent error %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		checkOmitZero(t, &ev, want)
	})
}

// validatedEvent is event i of a validated call as the benchmarks'
// sidecar records it.
func validatedEvent(i int) Event {
	e := ev(i)
	e.Listener, e.Method, e.Host = "forward", "POST", "127.0.0.1:38631"
	e.PathTemplate, e.UpstreamStatus, e.OK = "/bench/validated", 200, true
	e.TotalUS, e.UpstreamUS = 93, 71
	e.ConfigVersion = "6d790ac87213"
	return e
}

func BenchmarkAppendEvent(b *testing.B) {
	ev := validatedEvent(1)
	b.Run("encoding/json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc.Encode(&ev)
		}
		b.SetBytes(int64(buf.Len()))
	})
	for _, omit := range []bool{false, true} {
		name := "appendEvent"
		if omit {
			name += "/omitZero"
		}
		b.Run(name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = appendEvent(buf[:0], &ev, omit)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
