package dashboard

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var at = time.Date(2026, 11, 20, 12, 0, 30, 0, time.UTC)

func TestParseFilter(t *testing.T) {
	tests := []struct {
		name    string
		query   string
		want    string // From To Bucket Tool Agent Code Widened
		wantErr string
	}{
		{name: "default", query: "", want: "2026-11-19T12:00:30Z 2026-11-20T12:00:31Z 5m0s    false"},
		{name: "last 15m auto", query: "last=15m", want: "2026-11-20T11:45:30Z 2026-11-20T12:00:31Z 1m0s    false"},
		{name: "last 30d", query: "last=30d", want: "2026-10-21T12:00:30Z 2026-11-20T12:00:31Z 3h0m0s    false"},
		{name: "bucket kept", query: "last=1h&bucket=5m", want: "2026-11-20T11:00:30Z 2026-11-20T12:00:31Z 5m0s    false"},
		{name: "bucket widened", query: "last=7d&bucket=1m", want: "2026-11-13T12:00:30Z 2026-11-20T12:00:31Z 1h0m0s    true"},
		{name: "absolute wins", query: "last=1h&from=2026-11-20T08:00&to=2026-11-20T09:30:00", want: "2026-11-20T08:00:00Z 2026-11-20T09:30:00Z 1m0s    false"},
		{name: "from only", query: "from=2026-11-20", want: "2026-11-20T00:00:00Z 2026-11-20T12:00:31Z 5m0s    false"},
		{name: "rfc3339 offset", query: "from=2026-11-20T10:00:00%2B02:00&to=2026-11-20T10:00:00Z", want: "2026-11-20T08:00:00Z 2026-11-20T10:00:00Z 1m0s    false"},
		{name: "names and code", query: "tool=docs_edit&agent=team%2Fbot-1%40x&error_code=rate_limit", want: "2026-11-19T12:00:30Z 2026-11-20T12:00:31Z 5m0s docs_edit team/bot-1@x rate_limit false"},
		{name: "unicode name", query: "agent=%D0%B0%D0%B3%D0%B5%D0%BD%D1%82", want: "2026-11-19T12:00:30Z 2026-11-20T12:00:31Z 5m0s  агент  false"},
		{name: "to without from", query: "to=2026-11-20T09:00", wantErr: "filter from: required"},
		{name: "bad code", query: "error_code=ok", wantErr: "filter error_code:"},
		{name: "bad bucket", query: "bucket=2m", wantErr: "filter bucket:"},
		{name: "bad name", query: "tool=a%20b", wantErr: "filter tool:"},
		{name: "unknown param", query: "sql=1", wantErr: "filter query: unknown parameter"},
		{name: "too long", query: "tool=" + strings.Repeat("a", maxQuery), wantErr: "filter query:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFilter(tc.query, at)
			if tc.wantErr != "" {
				var fe *FilterError
				if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join([]string{f.From.Format(time.RFC3339), f.To.Format(time.RFC3339), f.Bucket.String(), f.Tool, f.Agent, f.ErrorCode}, " ")
			if got += " " + map[bool]string{true: "true", false: "false"}[f.Widened]; got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// FuzzParseFilter: any query string either is refused with a FilterError or
// gives a filter whose every field is within bounds, whose chart has at most
// MaxBuckets+1 buckets, and whose shared link parses back to the same view.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "last=6h&tool=docs_edit", "from=2026-11-20T08:00&to=2026-11-20T09:00&bucket=1m",
		"tool=%27%20OR%201%3D1", "error_code=policy&agent=a-b", "last=99999d", "bucket=7d&last=400d", "tool=%ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		fl, err := ParseFilter(q, at)
		if err != nil {
			var fe *FilterError
			if !errors.As(err, &fe) {
				t.Fatalf("not a FilterError: %v", err)
			}
			return
		}
		if !fl.From.Before(fl.To) || fl.To.Sub(fl.From) > MaxRange+time.Second {
			t.Fatalf("range %v..%v", fl.From, fl.To)
		}
		if n := bucketCount(fl.To.Sub(fl.From), fl.Bucket); n > MaxBuckets+1 && fl.Bucket != Buckets[len(Buckets)-1].Width {
			t.Fatalf("%d buckets", n)
		}
		for _, s := range []string{fl.Tool, fl.Agent} {
			if s != "" && (len(s) > maxName || !nameRE.MatchString(s) || strings.ContainsAny(s, "'\\\"` \x00;")) {
				t.Fatalf("name %q passed", s)
			}
		}
		back, err := ParseFilter(fl.Query().Encode(), at)
		if err != nil || back != fl {
			t.Fatalf("link %q parses to %+v, %v; want %+v", fl.Query().Encode(), back, err, fl)
		}
	})
}

func ExampleParseFilter() {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	f, err := ParseFilter("last=6h&tool=docs_edit&error_code=rate_limit", now)
	fmt.Println(f.From.Format(time.RFC3339), f.To.Format(time.RFC3339), f.Bucket, f.Tool, f.ErrorCode, err)
	_, err = ParseFilter("tool=x'%20OR%201=1", now)
	fmt.Println(err)
	// Output:
	// 2026-11-20T06:00:00Z 2026-11-20T12:00:01Z 5m0s docs_edit rate_limit <nil>
	// filter tool: may hold only letters, digits and . _ - : / @ +
}
