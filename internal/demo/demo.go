// Package demo is `toolgate demo`'s script: the embedded configuration and
// schemas for the bundled demo upstream, the calls a legacy client makes,
// and the table that shows what happened to each.
package demo

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/sink"
)

//go:embed toolgate.yaml schemas policies
var files embed.FS

// WriteConfig writes the demo configuration and its schemas into dir, with
// the upstream base URL and the events file filled in, and returns the
// configuration file's path.
func WriteConfig(dir, upstreamURL, eventsPath string) (string, error) {
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, p)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		if p == "toolgate.yaml" {
			b = bytes.ReplaceAll(b, []byte("UPSTREAM_URL"), []byte(upstreamURL))
			if u, err := url.Parse(upstreamURL); err == nil {
				b = bytes.ReplaceAll(b, []byte("UPSTREAM_HOSTPORT"), []byte(u.Host))
			}
			b = bytes.ReplaceAll(b, []byte("EVENTS_PATH"), []byte(eventsPath))
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("write demo config: %w", err)
	}
	return filepath.Join(dir, "toolgate.yaml"), nil
}

// Via is how a legacy client reaches the sidecar.
type Via string

// The two ways in.
const (
	ViaProxy   Via = "proxy"    // HTTP_PROXY names the forward listener
	ViaBaseURL Via = "base_url" // the tool's base URL names a reverse listener
)

// Call is one scripted call, as a legacy client would make it.
type Call struct {
	Via         Via
	Method      string
	Path        string // path and query, relative to the upstream
	Body        string
	ContentType string
	Headers     map[string]string // extra request headers
	Envelope    bool              // the client asks for the envelope
	Echoed      string            // a header to show from the request upstream received (the echo route)
	Note        string            // what the call shows
	Session     string            // the session header to send; default: one of the call's own (demo-NN)
	Section     string            // starts a group of rows in the table under this title (short: it sits in the SENT column)
	Approve     bool              // before sending, a person approves the approval request the last pending answer named (Endpoints.Approve)
}

// Script returns the demo's calls: valid ones, the argument mistakes toolgate
// exists to catch, and every upstream failure the status table buckets.
func Script() []Call {
	const js, form = "application/json", "application/x-www-form-urlencoded"
	// The approval story: one deletion, asked, approved, tampered with,
	// and forwarded once. Its calls share a session, which the grant is
	// bound to with the agent, the tool and the arguments.
	const deletion = `{"requests":[{"deleteRange":{"startIndex":1,"endIndex":6}}]}`
	return []Call{
		{Section: "arguments, checked by strict schemas",
			Via: ViaProxy, Method: "GET", Path: "/esearch?term=crispr&retmax=5", Note: "valid; legacy caller gets the raw answer"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=crispr&retmax=5", Envelope: true, Note: "valid; enveloped"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=crispr&retmax=many", Envelope: true, Note: "wrong type"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?trem=crispr", Note: "typo: unknown + missing"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=crispr&retmax=500", Envelope: true, Note: "out of bounds"},
		{Via: ViaBaseURL, Method: "GET", Path: "/v1/structure/P69905", Envelope: true, Note: "valid, via base URL"},
		{Via: ViaBaseURL, Method: "GET", Path: "/v1/structure/p69905", Envelope: true, Note: "bad id pattern"},
		{Via: ViaBaseURL, Method: "GET", Path: "/v1/structure/P00000", Envelope: true, Note: "upstream 404"},
		{Via: ViaBaseURL, Method: "GET", Path: "/v1/structure/Q99999", Envelope: true, Note: "error hidden in a 200"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js, Envelope: true,
			Body: `{"requests":[{"insertText":{"text":"Hello","index":1}}]}`, Note: "valid edit (an insertion: no approval needed)"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js,
			Body: `{"requests":[{"insertText":{"txt":"Hello","index":1}}]}`, Note: "typo deep in an array: the lost edit"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"query":"EGFR","organism":"human","filters":{"phase_min":2}}`, Note: "valid; envelope forced by config"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"query":"EGFR","filters":{"phase":2}}`, Note: "typo in a nested object"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"organism":"human"}`, Note: "missing required"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"query": "EGFR",`, Note: "malformed JSON"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"query":"` + strings.Repeat("x", 5000) + `"}`, Note: "body over the 4 KiB limit"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/notes", ContentType: form,
			Body: "title=Assay+plan&tags=lab&tags=q3", Envelope: true, Note: "form body, repeated key"},

		{Section: "policies: Rego and a WASM module",
			Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js, Envelope: true,
			Body: `{"requests":[{"deleteRange":{"startIndex":6,"endIndex":1}}]}`, Note: "Rego edit_approval refuses a reversed range"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"query":"EGFR, ask jane@example.org"}`, Note: "Rego pii_guard in dry run: forwarded, would-be refusal recorded"},
		{Via: ViaProxy, Method: "POST", Path: "/echo", ContentType: js, Envelope: true, Echoed: "X-Session-Id",
			Body: `{"note":"hello"}`, Note: "Rego session_inject adds X-Session-Id upstream"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/notes", ContentType: form,
			Body: "title=CONFIDENTIAL+merger+plan", Envelope: true, Note: "WASM label_guard refuses"},

		{Section: "approval: a person decides",
			Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js, Envelope: true, Session: "demo-approval",
			Body: deletion, Note: "a deletion waits for a person"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js, Envelope: true, Session: "demo-approval", Approve: true,
			Body: `{"requests":[{"deleteRange":{"startIndex":1,"endIndex":60}}]}`, Note: "approved on the CLI; a changed range asks anew"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js, Envelope: true, Session: "demo-approval",
			Body: deletion, Note: "the approved call goes upstream, once"},
		{Via: ViaProxy, Method: "POST", Path: "/v1/documents/d1:batchUpdate", ContentType: js, Envelope: true, Session: "demo-approval",
			Body: deletion, Note: "the same call again asks anew"},

		{Section: "answers: what comes back is checked too",
			Via: ViaProxy, Method: "GET", Path: "/v1/accounts/a1", Envelope: true, Note: "a token and an e-mail in the answer: redacted"},
		{Via: ViaProxy, Method: "GET", Path: "/v1/accounts/a1/notes", Note: "an instruction hidden in the answer: withheld"},

		{Section: "upstream failures, bucketed",
			Via: ViaProxy, Method: "POST", Path: "/v1/targets/search", ContentType: js,
			Body: `{"query":"quota"}`, Note: "a 403 that is really a rate limit (rule)"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/status/400", Envelope: true, Note: "400 with a string body"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/status/401", Envelope: true, Note: "401"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/status/403", Envelope: true, Note: "403"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/status/429", Envelope: true, Note: "429 with Retry-After"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/status/500", Envelope: true, Note: "500"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/status/503", Note: "503, legacy caller: raw answer"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/slow?ms=2000", Envelope: true, Note: "slower than the 300ms timeout"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/reset", Envelope: true, Note: "connection reset mid-body"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/close", Envelope: true, Note: "connection closed, no answer"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/hidden-error", Envelope: true, Note: "error hidden in a 200 (rule)"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/text", Envelope: true, Note: "text answer becomes a string"},
		{Via: ViaProxy, Method: "GET", Path: "/faults/binary", Envelope: true, Note: "binary passes through untouched"},
		{Via: ViaProxy, Method: "GET", Path: "/echo?anything=goes", Note: "matches no tool: passed and recorded"},

		{Section: "budgets: an agent stuck in a loop",
			Via: ViaProxy, Method: "GET", Path: "/esearch?term=brca1&retmax=3", Session: "demo-loop", Note: "1st try"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=brca1&retmax=3", Session: "demo-loop", Note: "2nd try, same arguments"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=brca1&retmax=3", Session: "demo-loop", Note: "3rd try, same arguments"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=brca1&retmax=3", Session: "demo-loop", Envelope: true, Note: "4th try: loop broken"},
		{Via: ViaProxy, Method: "GET", Path: "/esearch?term=brca1&retmax=10", Session: "demo-loop", Note: "a changed call passes"},
	}
}

// Result is what the client saw for one call.
type Result struct {
	Call
	Status    int
	Code      string // X-Toolgate-Error-Code, or error.code of an envelope
	Reason    string
	Detail    string
	Enveloped bool
	Bytes     int
	Err       string // a transport error the client saw
	Session   string // the session header sent, which joins the call to its event
	Echoed    string // the value of Call.Echoed in the request upstream received
	// ApprovalURL is the envelope's error.approval.url: the Approvals page
	// that shows the request a person decides.
	ApprovalURL string
}

// Endpoints are where the legacy client sends its calls.
type Endpoints struct {
	Upstream string // the upstream's base URL, as the client knows it
	Forward  string // the forward listener's address (host:port)
	Reverse  string // the reverse listener's base URL
	// Approve approves the approval request id, as a person would with
	// `toolgate approvals approve` or on the Approvals page; nil fails the
	// calls that need it.
	Approve func(ctx context.Context, id string) error
}

// Play makes every call of the script and returns what the client saw.
func Play(ctx context.Context, ep Endpoints, calls []Call) []Result {
	proxyURL := &url.URL{Scheme: "http", Host: ep.Forward}
	viaProxy := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 30 * time.Second}
	direct := &http.Client{Timeout: 30 * time.Second}
	out := make([]Result, 0, len(calls))
	pending := "" // the approval request the last pending answer named
	for i, c := range calls {
		base, client := ep.Upstream, viaProxy
		if c.Via == ViaBaseURL {
			base, client = ep.Reverse, direct
		}
		res := Result{Call: c, Session: fmt.Sprintf("demo-%02d", i+1)}
		if c.Session != "" {
			res.Session = c.Session
		}
		if c.Approve {
			if ep.Approve == nil || pending == "" {
				res.Err = "nothing to approve"
				out = append(out, res)
				continue
			}
			if err := ep.Approve(ctx, pending); err != nil {
				res.Err = "approve: " + err.Error()
				out = append(out, res)
				continue
			}
		}
		req, err := http.NewRequestWithContext(ctx, c.Method, base+c.Path, strings.NewReader(c.Body))
		if err != nil {
			res.Err = err.Error()
			out = append(out, res)
			continue
		}
		if c.ContentType != "" {
			req.Header.Set("Content-Type", c.ContentType)
		}
		if c.Envelope {
			req.Header.Set("X-Toolgate-Envelope", "1")
		}
		for k, v := range c.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("X-Agent", "demo-agent")
		req.Header.Set("X-Session", res.Session)
		resp, err := client.Do(req)
		if err != nil {
			res.Err = err.Error()
			out = append(out, res)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res.Status = resp.StatusCode
		res.Bytes = len(body)
		res.Code = resp.Header.Get("X-Toolgate-Error-Code")
		if err != nil {
			res.Err = "answer cut short: " + err.Error()
		}
		var env struct {
			OK    *bool           `json:"ok"`
			Data  json.RawMessage `json:"data"`
			Error *struct {
				Code, Reason, Detail string
				Approval             *struct {
					ID, State, URL string
				}
			} `json:"error"`
		}
		if resp.Header.Get("Content-Type") == "application/json" && json.Unmarshal(body, &env) == nil && env.OK != nil {
			res.Enveloped = true
			if env.Error != nil {
				res.Code, res.Reason, res.Detail = env.Error.Code, env.Error.Reason, env.Error.Detail
				if a := env.Error.Approval; a != nil {
					res.ApprovalURL = a.URL
					if a.State == "pending" {
						pending = a.ID
					}
				}
			}
			body = env.Data
		}
		if c.Echoed != "" {
			var echo struct {
				Headers map[string]string `json:"headers"`
			}
			if json.Unmarshal(body, &echo) == nil {
				res.Echoed = echo.Headers[http.CanonicalHeaderKey(c.Echoed)]
			}
		}
		out = append(out, res)
	}
	return out
}

// DetailWidth is the widest the table's DETAIL column gets: a longer
// detail wraps, at spaces, onto lines of its own below its row (every
// other cell empty), and is never cut.
const DetailWidth = 120

// PrintTable writes one row per call: how it was sent, what the client got
// back (status, raw or envelope), and the event recorded for it (code,
// reason, detail, wrapped at DetailWidth), found by the call's session
// (calls that share a session take its events in order).
func PrintTable(w io.Writer, results []Result, events []sink.Event) {
	// Calls join their events by session; calls that share a session
	// (played one after another) take its events in order.
	bySession := make(map[string][]sink.Event, len(events))
	for _, e := range events {
		bySession[e.Session] = append(bySession[e.Session], e)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tVIA\tSENT\tSTATUS\tANSWER\tEVENT CODE\tREASON\tDETAIL")
	for i, r := range results {
		if r.Section != "" {
			fmt.Fprintf(tw, "\t\t== %s ==\t\t\t\t\t\n", r.Section)
		}
		answer := "raw"
		if r.Enveloped {
			answer = "envelope"
		}
		status := fmt.Sprint(r.Status)
		if r.Err != "" {
			answer = "error"
			if r.Status == 0 {
				status = "-"
			}
		}
		code, reason, detail := "(no event)", "-", r.Note
		if evs := bySession[r.Session]; len(evs) > 0 {
			e := evs[0]
			bySession[r.Session] = evs[1:]
			code, reason = e.ErrorCode, dash(e.Reason)
			if code == "" {
				code = "ok"
			}
			if e.Detail != "" {
				detail = e.Detail
			}
			if e.DryRunDenied {
				detail = "dry run, forwarded; enforcing would refuse: " + strings.Join(e.DryRunViolations, "; ")
			}
		}
		if r.Call.Echoed != "" {
			detail = fmt.Sprintf("upstream got %s: %s", r.Call.Echoed, dash(r.Echoed))
		}
		if r.ApprovalURL != "" {
			// The page where a person decides, with the request's id.
			detail = r.Note + ": " + r.ApprovalURL
		}
		lines := wrap(detail, DetailWidth)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, r.Via, sent(r.Call), status, answer, code, reason, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t\t\t\t\t\t%s\n", l)
		}
	}
	tw.Flush()
}

func sent(c Call) string {
	s := c.Method + " " + c.Path
	if c.Body != "" {
		s += " " + c.Body
	}
	return clip(s, 64)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// wrap breaks s at spaces into lines of at most width bytes; a word longer
// than width has a line of its own. It returns one line at least.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
