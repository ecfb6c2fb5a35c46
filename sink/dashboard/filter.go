package dashboard

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/bucketing"
)

// Bounds on what a filter may ask for.
const (
	// MaxBuckets is the most buckets a chart draws; a finer bucket is
	// widened to the next allowed width.
	MaxBuckets = 300
	// SparkBuckets is the most points a sparkline draws.
	SparkBuckets = 48
	// MaxRange is the widest time range a view may span.
	MaxRange = 400 * 24 * time.Hour
	// DefaultLast is the range shown when the URL names none.
	DefaultLast = 24 * time.Hour
	// maxQuery bounds the raw query string of a request.
	maxQuery = 2048
	// maxName bounds a tool or agent name, in bytes.
	maxName = 128
)

// Buckets are the bucket widths a view may use, narrowest first; a URL names
// one by its label ("5m"). Nothing else reaches the SQL.
var Buckets = []Bucket{
	{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"10m", 10 * time.Minute}, {"15m", 15 * time.Minute},
	{"30m", 30 * time.Minute}, {"1h", time.Hour}, {"3h", 3 * time.Hour}, {"6h", 6 * time.Hour},
	{"12h", 12 * time.Hour}, {"1d", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour},
}

// Bucket is one allowed bucket width.
type Bucket struct {
	Label string
	Width time.Duration
}

// ErrorCodes are the error codes a view may filter on: bucketing's codes,
// in bucketing's order.
var ErrorCodes = func() []string {
	var codes []string
	for _, c := range bucketing.Codes() {
		codes = append(codes, string(c))
	}
	return codes
}()

// Lasts are the relative ranges the form offers; the URL may name any
// "N" followed by m, h or d within MaxRange.
var Lasts = []string{"15m", "1h", "6h", "24h", "7d", "30d"}

// Filter is one view: a time range, a bucket width and optional equality
// filters. It is built only by ParseFilter, so every field is validated.
type Filter struct {
	// From and To bound the range, [From, To), in UTC, whole seconds.
	From, To time.Time
	// Last is the relative range the URL asked for ("24h"), or "" when it
	// named From and To.
	Last string
	// Bucket is the chart's bucket width; BucketLabel its label, or
	// "auto" when the URL named none.
	Bucket      time.Duration
	BucketLabel string
	// Widened is true when the asked bucket would have drawn more than
	// MaxBuckets buckets and a wider one was taken.
	Widened bool
	// Tool, Agent and ErrorCode are "" for all.
	Tool, Agent, ErrorCode string
}

// FilterError is a filter value the dashboard refuses; it answers 400 with
// Error() as the message.
type FilterError struct {
	Param string
	Msg   string
}

func (e *FilterError) Error() string { return "filter " + e.Param + ": " + e.Msg }

// nameRE is what a tool or agent name may hold: letters and digits of any
// script and . _ - : / @ +.
var nameRE = regexp.MustCompile(`^[\p{L}\p{N}._\-:/@+]+$`)

var lastRE = regexp.MustCompile(`^([1-9][0-9]{0,4})([mhd])$`)

// knownParams are the query parameters a view understands.
var knownParams = map[string]bool{"from": true, "to": true, "last": true, "bucket": true, "tool": true, "agent": true, "error_code": true}

// ParseFilter reads a view from a URL query. now ends relative ranges.
// Empty values mean "not set". from/to win over last; with neither, the
// view is the last 24 hours. Unknown or repeated parameters are refused.
func ParseFilter(rawQuery string, now time.Time) (Filter, error) {
	if len(rawQuery) > maxQuery {
		return Filter{}, &FilterError{"query", fmt.Sprintf("the query string is %d bytes; at most %d", len(rawQuery), maxQuery)}
	}
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Filter{}, &FilterError{"query", "not a valid URL query"}
	}
	get := func(k string) string { return strings.TrimSpace(vals.Get(k)) }
	for k, v := range vals {
		if !knownParams[k] {
			return Filter{}, &FilterError{"query", fmt.Sprintf("unknown parameter %q; known: from, to, last, bucket, tool, agent, error_code", clip(k))}
		}
		if len(v) > 1 {
			return Filter{}, &FilterError{k, "given more than once"}
		}
	}
	now = now.UTC().Truncate(time.Second)
	f := Filter{}
	from, to := get("from"), get("to")
	switch {
	case from != "" || to != "":
		if f.From, err = parseTime("from", from, time.Time{}); err != nil {
			return Filter{}, err
		}
		if f.To, err = parseTime("to", to, now.Add(time.Second)); err != nil {
			return Filter{}, err
		}
		if f.From.IsZero() {
			return Filter{}, &FilterError{"from", "required when to is set"}
		}
		if !f.From.Before(f.To) {
			return Filter{}, &FilterError{"from", "must be before to"}
		}
		if f.To.Sub(f.From) > MaxRange {
			return Filter{}, &FilterError{"from", fmt.Sprintf("the range spans more than %d days", int(MaxRange.Hours()/24))}
		}
	default:
		last := get("last")
		d := DefaultLast
		if last != "" {
			if d, err = parseLast(last); err != nil {
				return Filter{}, err
			}
		} else {
			last = "24h"
		}
		// To is exclusive: the current second is in the view.
		f.Last, f.To, f.From = last, now.Add(time.Second), now.Add(-d)
	}
	if err := f.setBucket(get("bucket")); err != nil {
		return Filter{}, err
	}
	if f.Tool, err = parseName("tool", get("tool")); err != nil {
		return Filter{}, err
	}
	if f.Agent, err = parseName("agent", get("agent")); err != nil {
		return Filter{}, err
	}
	if c := get("error_code"); c != "" {
		ok := false
		for _, k := range ErrorCodes {
			ok = ok || c == k
		}
		if !ok {
			return Filter{}, &FilterError{"error_code", fmt.Sprintf("%q is not an error code; expected one of: %s", clip(c), strings.Join(ErrorCodes, ", "))}
		}
		f.ErrorCode = c
	}
	return f, nil
}

// minTime and maxTime bound absolute times to what ClickHouse's DateTime holds.
var (
	minTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// timeLayouts are the absolute time forms accepted, all read as UTC unless
// they carry an offset: the form's datetime-local value, and RFC 3339.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02", time.RFC3339}

func parseTime(param, s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if len(s) > 40 {
		return time.Time{}, &FilterError{param, "too long for a time"}
	}
	for _, l := range timeLayouts {
		t, err := time.ParseInLocation(l, s, time.UTC)
		if err != nil {
			continue
		}
		t = t.UTC().Truncate(time.Second)
		if t.Before(minTime) || !t.Before(maxTime) {
			return time.Time{}, &FilterError{param, "outside 2000-01-01 .. 2100-01-01"}
		}
		return t, nil
	}
	return time.Time{}, &FilterError{param, fmt.Sprintf("%q is not a time; use 2026-11-20T14:00 (UTC) or RFC 3339", clip(s))}
}

func parseLast(s string) (time.Duration, error) {
	m := lastRE.FindStringSubmatch(s)
	if m == nil {
		return 0, &FilterError{"last", fmt.Sprintf("%q is not a range; use a number and m, h or d, such as 15m, 6h or 7d", clip(s))}
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
	d := time.Duration(n) * unit
	if d > MaxRange {
		return 0, &FilterError{"last", fmt.Sprintf("more than %d days", int(MaxRange.Hours()/24))}
	}
	return d, nil
}

// setBucket takes the named bucket, or picks one, and widens it until the
// range holds at most MaxBuckets.
func (f *Filter) setBucket(label string) error {
	i := 0
	if label == "" || label == "auto" {
		f.BucketLabel = "auto"
	} else {
		i = -1
		for j, b := range Buckets {
			if b.Label == label {
				i = j
			}
		}
		if i < 0 {
			labels := make([]string, len(Buckets))
			for j, b := range Buckets {
				labels[j] = b.Label
			}
			return &FilterError{"bucket", fmt.Sprintf("%q is not a bucket; expected auto or one of: %s", clip(label), strings.Join(labels, ", "))}
		}
		f.BucketLabel = label
	}
	j := pickBucket(f.To.Sub(f.From), MaxBuckets, i)
	f.Widened = f.BucketLabel != "auto" && j != i
	f.Bucket = Buckets[j].Width
	return nil
}

// pickBucket returns the index of the narrowest bucket, from index start on,
// that splits span into at most n buckets.
func pickBucket(span time.Duration, n, start int) int {
	for j := start; j < len(Buckets); j++ {
		if nb := bucketCount(span, Buckets[j].Width); nb <= n {
			return j
		}
	}
	return len(Buckets) - 1
}

// bucketCount is how many aligned buckets of width w a span touches, at most.
func bucketCount(span, w time.Duration) int { return int(span/w) + 1 }

func parseName(param, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if len(s) > maxName {
		return "", &FilterError{param, fmt.Sprintf("%d bytes long; at most %d", len(s), maxName)}
	}
	if !utf8.ValidString(s) || !nameRE.MatchString(s) {
		return "", &FilterError{param, "may hold only letters, digits and . _ - : / @ +"}
	}
	return s, nil
}

// clip shortens a refused value before it is echoed in a message.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "..."
	}
	return s
}

// Query returns the filter as a URL query, the form a shared link takes:
// the relative range when the view has one, else from and to.
func (f Filter) Query() url.Values {
	v := url.Values{}
	if f.Last != "" {
		v.Set("last", f.Last)
	} else {
		v.Set("from", f.From.Format("2006-01-02T15:04:05"))
		v.Set("to", f.To.Format("2006-01-02T15:04:05"))
	}
	if f.BucketLabel != "" && f.BucketLabel != "auto" {
		v.Set("bucket", f.BucketLabel)
	}
	for k, s := range map[string]string{"tool": f.Tool, "agent": f.Agent, "error_code": f.ErrorCode} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}
