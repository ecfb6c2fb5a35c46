package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/demo"
)

// demoRow is one row of the demo's table.
type demoRow struct {
	via, sent, status, answer, code, reason, detail string
}

// cells splits a tabwriter row: cells are at least two spaces apart.
var cells = regexp.MustCompile(`\s{2,}`)

// TestDemo runs `toolgate demo` and reads its table: one row per scripted
// call, showing what the client got and the event recorded for it, and a
// footer counting calls and events.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--dir", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("demo = %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	out := stdout.String()
	script := demo.Script()

	rows := map[int]demoRow{}
	for _, line := range strings.Split(out, "\n") {
		c := cells.Split(strings.TrimRight(line, " "), 8)
		if len(c) < 7 {
			continue
		}
		n, err := strconv.Atoi(c[0])
		if err != nil {
			continue // the header
		}
		if _, dup := rows[n]; dup {
			t.Errorf("row %d appears twice", n)
		}
		r := demoRow{via: c[1], sent: c[2], status: c[3], answer: c[4], code: c[5], reason: c[6]}
		if len(c) == 8 {
			r.detail = c[7]
		}
		rows[n] = r
	}
	if len(rows) != len(script) {
		t.Errorf("%d rows, want one per scripted call (%d):\n%s", len(rows), len(script), out)
	}
	for i := range script {
		if _, ok := rows[i+1]; !ok {
			t.Errorf("no row %d", i+1)
		}
	}

	// rowOf finds a call's row by the call's method and path.
	rowOf := func(method, path string) (demoRow, bool) {
		for i, c := range script {
			if c.Method == method && c.Path == path {
				r, ok := rows[i+1]
				return r, ok
			}
		}
		return demoRow{}, false
	}
	tests := []struct {
		name         string
		method, path string
		want         demoRow // via, status, answer, code, reason are compared
	}{
		{"valid, raw for a legacy caller", "GET", "/esearch?term=crispr&retmax=5",
			demoRow{via: "proxy", status: "200", answer: "raw", code: "ok", reason: "-"}},
		{"typo", "GET", "/esearch?trem=crispr",
			demoRow{via: "proxy", status: "422", answer: "envelope", code: "validation", reason: "unknown_field"}},
		{"via base URL", "GET", "/v1/structure/P69905",
			demoRow{via: "base_url", status: "200", answer: "envelope", code: "ok", reason: "-"}},
		{"429", "GET", "/faults/status/429",
			demoRow{via: "proxy", status: "429", answer: "envelope", code: "rate_limit", reason: "status_429"}},
		{"legacy 503", "GET", "/faults/status/503",
			demoRow{via: "proxy", status: "503", answer: "raw", code: "upstream", reason: "status_5xx"}},
		{"binary", "GET", "/faults/binary",
			demoRow{via: "proxy", status: "200", answer: "raw", code: "ok", reason: "-"}},
		{"unmatched", "GET", "/echo?anything=goes",
			demoRow{via: "proxy", status: "200", answer: "raw", code: "ok", reason: "-"}},
	}
	for _, tc := range tests {
		r, ok := rowOf(tc.method, tc.path)
		if !ok {
			t.Errorf("%s: no row for %s %s", tc.name, tc.method, tc.path)
			continue
		}
		got := fmt.Sprintf("%s %s %s %s %s", r.via, r.status, r.answer, r.code, r.reason)
		want := fmt.Sprintf("%s %s %s %s %s", tc.want.via, tc.want.status, tc.want.answer, tc.want.code, tc.want.reason)
		if got != want {
			t.Errorf("%s: via status answer code reason = %q, want %q", tc.name, got, want)
		}
		if !strings.HasPrefix(r.sent, tc.method+" ") {
			t.Errorf("%s: SENT = %q, want it to start with %s", tc.name, r.sent, tc.method)
		}
	}

	events := filepath.Join(dir, "events.ndjson")
	n := len(script)
	for _, want := range []string{
		fmt.Sprintf("%d calls, %d events written to %s (dropped: 0)", n, n, events),
		"refused calls never reached it",
		"config used: " + filepath.Join(dir, "toolgate.yaml"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout does not contain %q:\n%s", want, out)
		}
	}
	if got := len(readEvents(t, events)); got != n {
		t.Errorf("%d events in %s, want %d", got, events, n)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}
}
