package adversarial_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/argshape"
)

// obsSecret is in every value of TestAdversarialObserve's calls: it must
// reach the upstream where the call goes, and never the events or logs.
const obsSecret = "sk-live-7f3a9c1e5b"

// obsCall is one call of TestAdversarialObserve, sent to each tool pair.
type obsCall struct {
	name   string
	method string
	path   string // after /{tool}; {S} is obsSecret
	ctype  string
	body   string // {S} is obsSecret
	// shape is a member the observing tool's event must show (a name and
	// type), or "" for a call whose shape is not asserted.
	shape string
	note  string // the shape's note, if any
}

var obsCalls = []obsCall{
	{name: "json", method: "POST", ctype: "application/json", body: `{"term":"{S}","retmax":5,"at":"2026-12-01T10:00:00Z","status":"open"}`, shape: `"term":{"t":{"string":1}}`},
	{name: "json-nested", method: "POST", ctype: "application/json", body: `{"filters":{"token":"{S}","ids":["{S}",3]}}`, shape: `"token":{"t":{"string":1}}`},
	{name: "json-secret-in-a-name", method: "POST", ctype: "application/json", body: `{"{S}{S}{S}{S}{S}{S}{S}":1,"ok":true}`, shape: `"u":1`},
	{name: "json-malformed", method: "POST", ctype: "application/json", body: `{"term":"{S}",}`},
	{name: "json-duplicate-name", method: "POST", ctype: "application/json", body: `{"term":"{S}","term":"x"}`},
	{name: "text-plain-body", method: "POST", ctype: "text/plain", body: `{"term":"{S}"}`, note: argshape.NoteBodyUnread},
	{name: "octet-stream-body", method: "POST", ctype: "application/octet-stream", body: "{S}\x00\x01", note: argshape.NoteBodyUnread},
	{name: "form", method: "POST", ctype: "application/x-www-form-urlencoded", body: `term={S}&tag=a&tag=b&retmax=7`, shape: `"retmax":{"t":{"string":1},"l":{"integer":1},"s":1}`},
	{name: "query", method: "GET", path: "?term={S}&retmax=5", shape: `"term":{"t":{"string":1},"s":1}`},
	{name: "query-undecodable", method: "GET", path: "?term=%zz{S}"},
	{name: "query-semicolon", method: "GET", path: "?term={S};retmax=5"},
	{name: "empty", method: "POST", ctype: "application/json", body: ``, shape: `{"t":{"object":1}}`},
}

// TestAdversarialObserve checks observe mode against its promises, judged
// by what a real upstream received and by the bytes of the events file and
// the logs:
//   - a call to an observing tool is forwarded, or refused, exactly as the
//     same call to the same tool without observe (upstream received the
//     same bytes, the caller the same status), for tools with no schema
//     and with one;
//   - an observing tool's event carries the arguments' shape (names and
//     types), a body it did not read is noted, never refused;
//   - no argument value (obsSecret, in every value and in one name) is in
//     any event or log line; only an enum field's values are, for the
//     fields listed.
func TestAdversarialObserve(t *testing.T) {
	up := newRecordingUpstream(t)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := up.authority()
	tool := func(name, extra string) string {
		return fmt.Sprintf("  - {name: %s, match: {host: %q, path: /%s}%s}\n", name, a, name, extra)
	}
	schema := `, schema: {type: object, properties: {term: {type: string}, retmax: {type: integer}}}, strict: false`
	cfg := "listen:\n  forward: 127.0.0.1:0\nmax_body_bytes: 4096\ntools:\n" +
		tool("plain", "") + tool("plain_obs", ", observe: {enum_fields: [status]}") +
		tool("checked", schema) + tool("checked_obs", schema+", observe: true")
	g, err := startGate(t, cfg, func(o *proxy.Options) { o.Logger = logger })
	if err != nil {
		t.Fatal(err)
	}
	fwd := g.srv.Addr("forward", 0)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: fwd}), DisableKeepAlives: true}}
	send := func(t *testing.T, c obsCall, toolName string) (status int, trace string) {
		expand := strings.NewReplacer("{S}", obsSecret).Replace
		var body io.Reader
		if c.body != "" || c.method == "POST" {
			body = strings.NewReader(expand(c.body))
		}
		req, err := http.NewRequest(c.method, "http://"+a+"/"+toolName+expand(c.path), body)
		if err != nil {
			t.Fatal(err)
		}
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		trace, tp := newTrace()
		req.Header.Set("Traceparent", tp)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", toolName, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, trace
	}
	for _, c := range obsCalls {
		t.Run(c.name, func(t *testing.T) {
			for _, pair := range [][2]string{{"plain", "plain_obs"}, {"checked", "checked_obs"}} {
				st0, tr0 := send(t, c, pair[0])
				st1, tr1 := send(t, c, pair[1])
				got0, got1 := up.receivedWithQuery(tr0), up.receivedWithQuery(tr1)
				if st0 != st1 || len(got0) != len(got1) || len(got0) == 1 && got0[0] != got1[0] {
					t.Errorf("%s: status %d, upstream received %q; without observe (%s) %d, %q: observe must change nothing",
						pair[1], st1, got1, pair[0], st0, got0)
				}
				g.read(t)
				evs := g.byTrace(tr1)
				if len(evs) != 1 {
					t.Fatalf("%s: %d events, want 1", pair[1], len(evs))
				}
				shape := evs[0].ArgShape
				if ev0 := g.byTrace(tr0); len(ev0) != 1 || ev0[0].ArgShape != "" {
					t.Errorf("%s (not observing): events %+v, want one without arg_shape", pair[0], ev0)
				}
				if evs[0].Refused && evs[0].Reason != "" && shape == "" {
					continue // refused in extraction, as without observe: nothing extracted to shape
				}
				if shape == "" {
					t.Errorf("%s: no arg_shape on an observing tool's forwarded call", pair[1])
					continue
				}
				if _, err := argshape.Parse(shape); err != nil {
					t.Errorf("%s: arg_shape %s: %v", pair[1], shape, err)
				}
				if pair[0] == "plain" && c.shape != "" && !strings.Contains(shape, c.shape) {
					t.Errorf("%s: arg_shape %s, want it to hold %s", pair[1], shape, c.shape)
				}
				if c.note != "" && !strings.Contains(shape, `"n":"`+c.note+`"`) {
					t.Errorf("%s: arg_shape %s, want the note %q", pair[1], shape, c.note)
				}
			}
		})
	}
	// The one value recorded is the listed enum field's.
	g.read(t)
	var enumSeen bool
	for _, ev := range g.events {
		if ev.Tool == "plain_obs" && strings.Contains(ev.ArgShape, `"status":{"t":{"string":1},"e":{"\"open\"":1}}`) {
			enumSeen = true
		}
		if ev.Tool == "checked_obs" && strings.Contains(ev.ArgShape, `"e":`) {
			t.Errorf("checked_obs lists no enum field, yet its shape holds values: %s", ev.ArgShape)
		}
	}
	if !enumSeen {
		t.Error("plain_obs: no event holds the enum candidate of status")
	}
	// Everything toolgate wrote: the events file and the logs.
	g.read(t)
	file, err := os.ReadFile(g.path)
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"the events file": file, "the logs": logs.Bytes()} {
		if bytes.Contains(b, []byte(obsSecret)) || bytes.Contains(b, []byte(obsSecret[:10])) {
			i := bytes.Index(b, []byte(obsSecret[:10]))
			t.Errorf("%s holds an argument value: ...%s...", what, b[max(0, i-200):min(len(b), i+100)])
		}
	}
	if !bytes.Contains(file, []byte(`"arg_shape"`)) {
		t.Error("the events file holds no arg_shape: the search proves nothing")
	}
	up.mu.Lock()
	reached := 0
	for _, calls := range up.gq {
		for _, c := range calls {
			if strings.Contains(c, obsSecret) {
				reached++
			}
		}
	}
	up.mu.Unlock()
	if reached < len(obsCalls) {
		t.Errorf("the secret reached the upstream in %d calls; the controls send it in more", reached)
	}
	for _, ev := range g.events {
		if ev.Tool == "plain_obs" && strings.Contains(ev.ArgShape, `"filters"`) {
			t.Logf("a shape: %s", ev.ArgShape)
			break
		}
	}
}

// TestAdversarialObserveConfig checks the observe section's errors.
func TestAdversarialObserveConfig(t *testing.T) {
	for _, tc := range []struct{ name, tool, want string }{
		{"mcp-route", `{name: a, match: {path: /mcp}, protocol: mcp, observe: true}`, "tools[0].observe: an mcp route's calls are checked against the schemas its server lists"},
		{"bad-enum-path", `{name: a, match: {path: /a}, observe: {enum_fields: ["a..b"]}}`, `tools[0].observe.enum_fields[0]: "a..b" is not an argument path`},
		{"unknown-option", `{name: a, match: {path: /a}, observe: {enum_field: [a]}}`, "enum_field not found"},
		{"not-a-bool", `{name: a, match: {path: /a}, observe: yes please}`, "cannot unmarshal !!str"}, // the loader names it: tools[0].observe: expected a mapping
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := startGate(t, "tools:\n  - "+tc.tool+"\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{`observe: true`, `observe: false`, `observe: {}`, `observe: {enum_fields: [status, "filters.modality", "items[].kind"]}`} {
		if _, err := startGate(t, "listen: {forward: 127.0.0.1:0}\ntools:\n  - {name: a, match: {path: /a}, "+ok+"}\n"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}
