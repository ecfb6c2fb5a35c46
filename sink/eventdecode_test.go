package sink

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// checkDecodeEvent decodes line with decodeEvent, copying its strings and
// cutting them from a string of the line, and, when it takes the line,
// checks that both read what encoding/json reads from it; it reports
// whether decodeEvent took it. The two ways must take the same lines.
func checkDecodeEvent(t testing.TB, line []byte) bool {
	t.Helper()
	var got, cut Event
	took := decodeEvent(line, "", &got)
	if tookCut := decodeEvent(line, string(line), &cut); tookCut != took {
		t.Fatalf("%q: decodeEvent took it %v copying its strings, %v cutting them", line, took, tookCut)
	}
	if !took {
		return false
	}
	var want Event
	if err := json.Unmarshal(line, &want); err != nil {
		t.Fatalf("decodeEvent took %q, which encoding/json refuses: %v", line, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\ndecodeEvent   %+v\nencoding/json %+v", line, got, want)
	}
	if !reflect.DeepEqual(cut, want) {
		t.Fatalf("%q, strings cut from the line's:\ndecodeEvent   %+v\nencoding/json %+v", line, cut, want)
	}
	return true
}

// TestDecodeEventMatchesJSON decodes what appendEvent writes, in both
// forms, for events with every field set at random: decodeEvent takes
// every line and reads the Event encoding/json reads.
func TestDecodeEventMatchesJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		ev := randomEvent(r)
		for _, omit := range []bool{false, true} {
			line, err := appendEvent(nil, &ev, omit)
			if err != nil {
				t.Fatal(err)
			}
			if !checkDecodeEvent(t, line) {
				t.Fatalf("event %d (omitZero %v): decodeEvent leaves %q to encoding/json; it should take all that appendEvent writes", i, omit, line)
			}
			if !checkDecodeEvent(t, bytes.TrimSuffix(line, []byte("\n"))) {
				t.Fatalf("event %d: decodeEvent does not take the line without its line break", i)
			}
		}
	}
}

// TestDecodeEventTakesEveryField sets every field of an Event (found by
// reflection), so that a field added to Event and appendEvent but not to
// decodeEvent fails here.
func TestDecodeEventTakesEveryField(t *testing.T) {
	var ev Event
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Interface().(type) {
		case string:
			f.SetString(v.Type().Field(i).Name + " \"value\" ✓")
		case bool:
			f.SetBool(true)
		case int, int64:
			f.SetInt(int64(1000 + i))
		case []string:
			f.Set(reflect.ValueOf([]string{"a", "b\n"}))
		case time.Time:
			f.Set(reflect.ValueOf(time.Date(2026, 11, 25, 3, 4, 5, 6, time.UTC)))
		default:
			t.Fatalf("Event has a field of a new type, %s: teach appendEvent, decodeEvent and this test about it", f.Type())
		}
	}
	line, err := appendEvent(nil, &ev, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"", string(line)} {
		var got Event
		if !decodeEvent(line, text, &got) {
			t.Fatalf("decodeEvent does not take %s: is a field of Event missing from its switch?", line)
		}
		if !reflect.DeepEqual(got, ev) {
			t.Fatalf("decodeEvent read\n%+v\nwant\n%+v", got, ev)
		}
	}
}

// declinedLines are lines decodeEvent leaves to encoding/json: valid JSON
// that appendEvent does not write, and lines that are not JSON at all.
var declinedLines = []string{
	`{ "event_id":"a"}`,
	`{"event_id" :"a"}`,
	`{"EVENT_ID":"a"}`,
	`{"Tool":"a"}`,
	`{"tool":null}`,
	`{"extra":1}`,
	`{"total_us":1.5}`,
	`{"total_us":1e3}`,
	`{"total_us":01}`,
	`{"total_us":-}`,
	`{"total_us":99999999999999999999}`,
	`{"upstream_status":"200"}`,
	`{"ok":"true"}`,
	`{"ok":tru}`,
	`{"tool":"\ud834\udd1e"}`,
	`{"tool":"\ud834"}`,
	`{"tool":"a\qb"}`,
	`{"tool":"a\u12"}`,
	"{\"tool\":\"bad \xff\"}",
	"{\"tool\":\"tab\there\"}",
	`{"time":"2026-11-25T03:04:05\u005a"}`,
	`{"time":"yesterday"}`,
	`{"violation_paths":"a"}`,
	`{"violation_paths":[1]}`,
	`{"violation_paths":["a",]}`,
	`{"violation_paths":["a"}`,
	`{"tool":"a"}x`,
	`{"tool":"a"}` + "\n\n",
	`{"tool":"a",}`,
	`{"tool":"a"`,
	`{"tool":`,
	`[]`,
	``,
}

func TestDecodeEventLeavesTheRestToJSON(t *testing.T) {
	for _, line := range declinedLines {
		if checkDecodeEvent(t, []byte(line)) {
			t.Errorf("decodeEvent took %q; it should leave it to encoding/json", line)
		}
	}
	// Lines it takes that appendEvent would not write in this order, or
	// twice: encoding/json's reading of them, the last value winning.
	for _, line := range []string{
		`{}`,
		`{"tool":"a","tool":"b","violation_paths":["x"],"violation_paths":[]}`,
		`{"violation_paths":["x"],"violation_paths":null,"dry_run_violations":null}`,
		`{"total_us":-0,"upstream_status":-7,"ok":false,"time":"2026-11-25T03:04:05.5+01:30"}`,
		`{"detail":"\u00e9\u2028\/\b\f\n\r\t\"\\"}`,
	} {
		if !checkDecodeEvent(t, []byte(line)) {
			t.Errorf("decodeEvent leaves %q to encoding/json", line)
		}
	}
}

// TestDecodeRecordFallsBack checks that a record's line decodeEvent
// declines is still read, by encoding/json, and one that is not JSON still
// fails the record.
func TestDecodeRecordFallsBack(t *testing.T) {
	payload := []byte(`{"event_id":"a","tool":"x"}` + "\n" + `{ "event_id": "b", "tool": null, "Total_US": 5 }` + "\n")
	got, err := decodeRecord(payload, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].EventID != "a" || got[0].Tool != "x" || got[1].EventID != "b" || got[1].TotalUS != 5 {
		t.Fatalf("decodeRecord = %+v", got)
	}
	prev := []Event{{EventID: "kept"}}
	got, err = decodeRecord([]byte(`{"event_id":"c","tool":"y"}`+"\n"+`{"event_id":`+"\n"), "", prev)
	if err == nil || len(got) != 1 || got[0].EventID != "kept" {
		t.Fatalf("a damaged record: decodeRecord = %+v, %v; want the events given and an error", got, err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		ev := randomEvent(r)
		line, _ := appendEvent(nil, &ev, r.IntN(2) == 0)
		f.Add(line)
	}
	for _, l := range declinedLines {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodeEvent(t, line)
	})
}

func BenchmarkDecodeEvent(b *testing.B) {
	ev := validatedEvent(1)
	line, _ := appendEvent(nil, &ev, true)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e Event
			if err := json.Unmarshal(line, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeEvent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e Event
			if !decodeEvent(line, "", &e) {
				b.Fatal("declined")
			}
		}
	})
	// As a spool ships a segment: the strings cut from one string of the
	// whole segment, made once for many events (not counted here).
	text := string(line)
	b.Run("decodeEvent/cut", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e Event
			if !decodeEvent(line, text, &e) {
				b.Fatal("declined")
			}
		}
	})
}
