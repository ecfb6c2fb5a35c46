package adversarial_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
)

// The answer policies group: an upstream that wants a value past a Rego
// answer policy that reads a member by name. The policy withholds any
// answer whose body has an ssn (tool /w) and redacts the body's email
// (tool /r). Each attack spells the member so that the policy might not
// see it while a caller's reader still does: another letter case (Go's
// encoding/json matches names regardless of case), a name twice, a byte
// order mark, another charset, a compressed body, JSON served as text
// (many clients parse a body as JSON whatever its media type), JSON only a
// lenient parser reads, an error status. A legacy client (a proxy
// variable) takes each answer through toolgate, and the attack is judged by
// what the client received, decoded as a reader would (gzip, UTF-16): the
// attack leaked when the value is in it.

// polSSN and polEmail are the values the upstream tries to get past the
// policy.
const (
	polSSN   = "078-05-1120"
	polEmail = "ada.lovelace@example.org"
)

// polPolicy is the answer policy under attack.
const polPolicy = `package adversarial.answers

withhold contains "the answer holds a social security number" if input.answer.body.ssn

redact contains "/email" if input.answer.body.email
`

// polAttack is one answer the upstream gives.
type polAttack struct {
	name   string
	path   string // /w (withhold on ssn) or /r (redact email)
	status int
	header http.Header
	body   string
	secret string // what must not reach the caller
	// pass is true for the controls: answers the policy lets through,
	// which must reach the caller unchanged.
	pass bool
}

func polJSON(ct string) http.Header { return http.Header{"Content-Type": {ct}} }

func utf16le(s string) string {
	var b bytes.Buffer
	for _, u := range utf16.Encode([]rune(s)) {
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	return b.String()
}

func polAttacks() []polAttack {
	j := polJSON("application/json")
	ssn := `{"name":"Ada","ssn":"` + polSSN + `"}`
	return []polAttack{
		{name: "control: an answer without ssn passes", path: "/w", header: j, body: `{"name":"Ada","note":"fine"}`, secret: `"note":"fine"`, pass: true},
		{name: "ssn as the policy spells it", path: "/w", header: j, body: ssn, secret: polSSN},
		{name: "SSN in upper case", path: "/w", header: j, body: `{"name":"Ada","SSN":"` + polSSN + `"}`, secret: polSSN},
		{name: "Ssn in mixed case", path: "/w", header: j, body: `{"Ssn":"` + polSSN + `"}`, secret: polSSN},
		{name: "ſsn with a long s (U+017F), which Go folds to s", path: "/w", header: j, body: `{"ſsn":"` + polSSN + `"}`, secret: polSSN},
		{name: "SSN spelled with escapes", path: "/w", header: j, body: `{"\u0053\u0053N":"` + polSSN + `"}`, secret: polSSN},
		{name: "SSN nested where the policy does not look", path: "/w", header: j, body: `{"record":{"ssn":"` + polSSN + `"}}`, secret: polSSN, pass: true},
		{name: "ssn twice, the second the secret", path: "/w", header: j, body: `{"ssn":false,"ssn":"` + polSSN + `"}`, secret: polSSN},
		{name: "ssn and SSN in one object", path: "/w", header: j, body: `{"ssn":false,"SSN":"` + polSSN + `"}`, secret: polSSN},
		{name: "two JSON values", path: "/w", header: j, body: `{"name":"Ada"}` + ssn, secret: polSSN},
		{name: "a byte order mark before JSON", path: "/w", header: j, body: "\ufeff" + ssn, secret: polSSN},
		{name: "JSON served as text/plain", path: "/w", header: polJSON("text/plain"), body: ssn, secret: polSSN},
		{name: "JSON served as text/plain after white space", path: "/w", header: polJSON("text/plain; charset=utf-8"), body: "\r\n  " + ssn, secret: polSSN},
		{name: "JSON with a byte order mark served as text/plain", path: "/w", header: polJSON("text/plain"), body: "\ufeff" + ssn, secret: polSSN},
		{name: "JSON only a lenient parser reads (NaN) served as text", path: "/w", header: polJSON("text/plain"), body: `{"ssn":"` + polSSN + `","score":NaN}`, secret: polSSN},
		{name: "JSON only a lenient parser reads (NaN)", path: "/w", header: j, body: `{"ssn":"` + polSSN + `","score":NaN}`, secret: polSSN},
		{name: "UTF-16 JSON declared by charset", path: "/w", header: polJSON("application/json; charset=utf-16le"), body: utf16le(ssn), secret: polSSN},
		{name: "UTF-16 text declared by charset", path: "/w", header: polJSON("text/plain; charset=utf-16le"), body: utf16le(ssn), secret: polSSN},
		{name: "latin-1 text declared by charset", path: "/w", header: polJSON("text/plain; charset=iso-8859-1"), body: ssn, secret: polSSN},
		{name: "gzip-compressed JSON", path: "/w", header: http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, body: gzipped(ssn), secret: polSSN},
		{name: "two Content-Type headers", path: "/w", header: http.Header{"Content-Type": {"text/html", "application/json"}}, body: ssn, secret: polSSN},
		{name: "no Content-Type", path: "/w", header: http.Header{"Content-Type": {""}}, body: ssn, secret: polSSN},
		{name: "an error status carrying ssn", path: "/w", status: http.StatusInternalServerError, header: j, body: ssn, secret: polSSN},
		{name: "a 206 partial answer carrying ssn", path: "/w", status: http.StatusPartialContent, header: j, body: ssn, secret: polSSN},
		{name: "nested deeper than limits.max_json_depth", path: "/w", header: j,
			body: `{"ssn":"` + polSSN + `","x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, secret: polSSN},
		{name: "control: email redacted", path: "/r", header: j, body: `{"name":"Ada","email":"` + polEmail + `"}`, secret: polEmail},
		{name: "EMAIL in upper case redacted", path: "/r", header: j, body: `{"name":"Ada","EMAIL":"` + polEmail + `"}`, secret: polEmail},
		{name: "Email twice", path: "/r", header: j, body: `{"email":"x","Email":"` + polEmail + `"}`, secret: polEmail},
		{name: "email in JSON served as text/plain", path: "/r", header: polJSON("text/plain"), body: `{"email":"` + polEmail + `"}`, secret: polEmail},
		{name: "email with escaped letters", path: "/r", header: j, body: `{"\u0045mail":"` + polEmail + `"}`, secret: polEmail},
	}
}

// polReceived is the body a client read, and that body as a reader decodes
// it: by its Content-Encoding, and from UTF-16 when it says so.
func polReceived(resp *http.Response, body []byte) string {
	out := string(body)
	dec := body
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		if zr, err := gzip.NewReader(bytes.NewReader(dec)); err == nil {
			if d, err := io.ReadAll(zr); err == nil {
				dec = d
				out += "\n" + string(d)
			}
		}
	}
	if strings.Contains(strings.ToLower(resp.Header.Get("Content-Type")), "utf-16") && len(dec)%2 == 0 {
		u := make([]uint16, len(dec)/2)
		for i := range u {
			u[i] = uint16(dec[2*i]) | uint16(dec[2*i+1])<<8
		}
		out += "\n" + string(utf16.Decode(u))
	}
	return out
}

// TestAdversarialAnswerPolicies runs the answer policies group through a
// real toolgate with a real Rego policy (the compiled engine, the
// default) and counts what reached the caller.
func TestAdversarialAnswerPolicies(t *testing.T) {
	// The answers group's upstream serves each answer, tagged by X-Attack.
	attacks := map[string]ansAttack{}
	for _, a := range polAttacks() {
		attacks[a.name] = ansAttack{status: a.status, header: a.header, body: a.body}
	}
	up := ansUpstream(t, attacks)
	u, _ := url.Parse(up.URL)
	pol, err := rego.Compile("answers", map[string][]byte{"answers.rego": []byte(polPolicy)})
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := pol.Compiled(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	set := func(tool string) proxy.AnswerChecker {
		return policies.NewSet(tool, []policies.Bound{{Policy: compiled, Mode: policies.ModeEnforce}}, 10*time.Second, false)
	}
	g, err := startGateSnap(t, fmt.Sprintf(`
listen: {forward: "127.0.0.1:0"}
limits: {max_json_depth: 64}
tools:
  - name: withhold
    match: {host: "127.0.0.1:%[1]s", path: /w}
    answer: {policies: [answers]}
  - name: redact
    match: {host: "127.0.0.1:%[1]s", path: /r}
    answer: {policies: [answers]}
`, u.Port()), proxy.Snapshot{AnswerCheckers: map[string]proxy.AnswerChecker{"withhold": set("withhold"), "redact": set("redact")}})
	if err != nil {
		t.Fatal(err)
	}
	// Go's default transport asks for gzip and decodes it; a client that
	// asks for nothing gets the body as upstream encoded it.
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableCompression: true,
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: g.srv.Addr("forward", 0)})}}
	tried, stopped, leaked := 0, 0, 0
	for _, a := range polAttacks() {
		t.Run(a.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, up.URL+a.path, nil)
			req.Header.Set("X-Attack", a.name)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("the call failed: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got := polReceived(resp, body)
			if a.pass {
				if !strings.Contains(got, a.secret) {
					t.Errorf("a control did not reach the caller: status %d, %s", resp.StatusCode, shorten(got, 300))
				}
				return
			}
			tried++
			if strings.Contains(got, a.secret) {
				leaked++
				if !reportOnly() {
					t.Errorf("the caller received %q: status %d, %s", a.secret, resp.StatusCode, shorten(got, 300))
				}
				return
			}
			stopped++
			if a.path == "/r" && resp.StatusCode == http.StatusOK {
				// A redaction keeps the rest of the answer.
				var v map[string]any
				if err := json.Unmarshal(body, &v); err != nil || !strings.Contains(string(body), "[redacted:policy:answers]") {
					t.Errorf("a redacted answer that is not JSON with the marker (%v): %s", err, body)
				}
			}
		})
	}
	t.Logf("answer policies group: %d tried, %d stopped, %d leaked", tried, stopped, leaked)
}
