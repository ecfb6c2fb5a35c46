package adversarial_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf16"
)

// cell is one target of an attack: an upstream, the listener the attacker
// uses, and the gate's unmatched mode.
type cell struct {
	up       *upstream
	listener string // "forward" or "reverse"
	mode     string // "pass" or "deny"
	addr     string // the listener's address
}

func (c cell) String() string { return c.up.name + "/" + c.listener + "/" + c.mode }

// rawReq is a request written byte for byte. Placeholders in every field:
// {AUTH} is the upstream's authority as the tools name it (localhost:PORT),
// {PORT} its port, {LISTENER} the listener's address.
type rawReq struct {
	method string   // default POST
	target string   // origin-form target; on the forward listener it follows http://{AUTH}
	url    string   // an absolute-form target sent as is to either listener, instead of target
	host   string   // the Host header; "" for the default (the target's authority, or the reverse listener), "-" for none
	proto  string   // default HTTP/1.1
	hdr    []string // more header lines
	body   string
	noCL   bool // no Content-Length (a Transfer-Encoding line in hdr also suppresses it)
}

// attack is one named attempt to get a forbidden argument to a tool's
// handler. point is the issue 13 item it belongs to ("v" for a variant).
type attack struct {
	name    string
	point   string
	forward bool // only on the forward listener (the attack names a host)
	control bool // a valid call: it must reach the tool's handler, checked
	req     rawReq
}

// Bodies and headers the attacks share. Every bad body carries retmax=500
// (the schema allows at most 10) and the unknown argument evil.
const (
	ctJSON   = "Content-Type: application/json"
	ctForm   = "Content-Type: application/x-www-form-urlencoded"
	badJSON  = `{"retmax":500,"evil":1}`
	goodJSON = `{"term":"x","retmax":5}`
	badForm  = "retmax=500&evil=1"
	badQuery = "retmax=500&evil=1"
	boundary = "XBOUNDARYX"
)

var (
	multipartFields = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"retmax\"\r\n\r\n500\r\n" +
		"--" + boundary + "\r\nContent-Disposition: form-data; name=\"evil\"\r\n\r\n1\r\n--" + boundary + "--\r\n"
	multipartFile = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"retmax\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\n500\r\n--" + boundary + "--\r\n"
	ctMultipart   = "Content-Type: multipart/form-data; boundary=" + boundary
)

// chunked encodes parts as a chunked body, with trailer lines at the end.
func chunked(trailers []string, parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	b.WriteString("0\r\n")
	for _, t := range trailers {
		b.WriteString(t + "\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// utf16LE encodes s as UTF-16LE with a byte order mark.
func utf16LE(s string) string {
	b := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return string(b)
}

// bodyAttack posts body with the given header lines to the tool's path.
func bodyAttack(name, point string, body string, hdr ...string) attack {
	return attack{name: name, point: point, req: rawReq{target: "/v1/tools?term=x", hdr: hdr, body: body}}
}

// pathAttack posts a bad query and a JSON body to another spelling of the
// tool's path.
func pathAttack(name, point, path string) attack {
	return attack{name: name, point: point, req: rawReq{target: path + "?" + badQuery, hdr: []string{ctJSON}, body: `{"term":"x"}`}}
}

// hostAttack posts a bad body to the tool's path on another name for its host.
func hostAttack(name, point, authority string) attack {
	return attack{name: name, point: point, forward: true, req: rawReq{url: "http://" + authority + "/v1/tools?" + badQuery,
		hdr: []string{ctJSON}, body: badJSON}}
}

// attacks is the table: the points 1-7 and the variants.
var attacks = []attack{
	// Controls: a valid call is forwarded and checked; a bad one is refused.
	{name: "control-valid-post-json", point: "control", control: true, req: rawReq{target: "/v1/tools", hdr: []string{ctJSON}, body: goodJSON}},
	{name: "control-valid-get-query", point: "control", control: true, req: rawReq{method: "GET", target: "/v1/tools?term=x&retmax=5"}},
	{name: "control-valid-post-form", point: "control", control: true, req: rawReq{target: "/v1/tools", hdr: []string{ctForm}, body: "term=x&retmax=5"}},
	bodyAttack("control-bad-json", "control", badJSON, ctJSON),
	{name: "control-bad-query", point: "control", req: rawReq{method: "GET", target: "/v1/tools?" + badQuery}},

	// 1. Bodies toolgate does not read.
	bodyAttack("ct-json-bad-param", "1", badJSON, "Content-Type: application/json; x"),
	bodyAttack("ct-text-json", "1", badJSON, "Content-Type: text/json"),
	bodyAttack("ct-application-x-json", "1", badJSON, "Content-Type: application/x-json"),
	bodyAttack("ct-text-plain", "1", badJSON, "Content-Type: text/plain"),
	bodyAttack("ct-none", "1", badJSON),
	bodyAttack("ct-octet-stream", "1", badJSON, "Content-Type: application/octet-stream"),
	bodyAttack("ct-empty", "1", badJSON, "Content-Type:"),
	bodyAttack("ct-multipart-fields", "1", multipartFields, ctMultipart),
	bodyAttack("ct-multipart-file", "1", multipartFile, ctMultipart),
	bodyAttack("ct-multipart-no-boundary", "1", multipartFields, "Content-Type: multipart/form-data"),
	bodyAttack("ct-json-upper-case", "v", badJSON, "Content-Type: APPLICATION/JSON"),
	bodyAttack("ct-json-charset", "v", badJSON, "Content-Type: application/json; charset=utf-8"),
	bodyAttack("ct-json-charset-latin1", "v", badJSON, "Content-Type: application/json; charset=latin1"),
	bodyAttack("ct-json-utf16-body", "v", utf16LE(badJSON), "Content-Type: application/json; charset=utf-16"),
	bodyAttack("ct-text-plain-utf16-body", "v", utf16LE(badJSON), "Content-Type: text/plain; charset=utf-16"),
	bodyAttack("ct-json-suffix", "v", badJSON, "Content-Type: application/problem+json"),
	bodyAttack("ct-duplicate-json-then-text", "v", badJSON, ctJSON, "Content-Type: text/plain"),
	bodyAttack("ct-duplicate-text-then-json", "v", badJSON, "Content-Type: text/plain", ctJSON),
	bodyAttack("ct-form-with-json-body", "v", badJSON, ctForm),
	bodyAttack("ct-json-with-form-body", "v", badForm, ctJSON),
	bodyAttack("ct-form-charset", "v", badForm, "Content-Type: application/x-www-form-urlencoded; charset=utf-8"),
	bodyAttack("ct-form-upper-case", "v", badForm, "Content-Type: Application/X-WWW-Form-Urlencoded"),
	bodyAttack("ct-form-semicolon-separator", "v", "term=x;retmax=500", ctForm),
	bodyAttack("ct-text-plain-form-body", "v", badForm, "Content-Type: text/plain"),
	bodyAttack("ct-none-form-body", "v", badForm),
	bodyAttack("content-encoding-gzip-claimed", "v", badJSON, ctJSON, "Content-Encoding: identity, gzip"),
	{name: "get-with-json-body", point: "1", req: rawReq{method: "GET", target: "/v1/tools?term=x", hdr: []string{ctJSON}, body: badJSON}},
	{name: "get-with-text-body", point: "1", req: rawReq{method: "GET", target: "/v1/tools?term=x", hdr: []string{"Content-Type: text/plain"}, body: badJSON}},
	{name: "get-with-form-body", point: "1", req: rawReq{method: "GET", target: "/v1/tools?term=x", hdr: []string{ctForm}, body: badForm}},

	// JSON the parsers read differently.
	bodyAttack("json-duplicate-name", "4", `{"retmax":500,"retmax":5}`, ctJSON),
	bodyAttack("json-duplicate-name-last-bad", "4", `{"retmax":5,"retmax":500}`, ctJSON),
	bodyAttack("json-duplicate-name-escaped", "4", `{"retmax":500,"ret\u006dax":5}`, ctJSON),
	bodyAttack("json-name-case", "v", `{"retmax":5,"RETMAX":500}`, ctJSON),
	bodyAttack("json-utf8-bom", "v", "\xef\xbb\xbf"+badJSON, ctJSON),
	bodyAttack("json-utf16-bom", "v", utf16LE(badJSON), ctJSON),
	bodyAttack("json-comment", "v", `{"term":"x" /*, "retmax":500 */}`, ctJSON),
	bodyAttack("json-trailing-object", "v", `{"term":"x"} {"retmax":500}`, ctJSON),
	bodyAttack("json-trailing-garbage", "v", `{"term":"x"}garbage`, ctJSON),
	bodyAttack("json-leading-whitespace", "v", "\r\n\t "+badJSON, ctJSON),
	bodyAttack("json-nan", "v", `{"retmax":NaN}`, ctJSON),
	bodyAttack("json-big-exponent", "v", `{"retmax":5e2}`, ctJSON),
	bodyAttack("json-fraction", "v", `{"retmax":5.5}`, ctJSON),
	bodyAttack("json-string-number", "v", `{"retmax":"500"}`, ctJSON),
	bodyAttack("json-array-top", "v", `[{"retmax":500}]`, ctJSON),
	bodyAttack("json-invalid-utf8", "v", "{\"term\":\"\xff\",\"retmax\":500}", ctJSON),
	bodyAttack("json-nul-in-name", "v", `{"retmax\u0000":500}`, ctJSON),

	// Query strings.
	{name: "query-duplicate-key", point: "v", req: rawReq{method: "GET", target: "/v1/tools?retmax=5&retmax=500"}},
	{name: "query-duplicate-key-bad-first", point: "v", req: rawReq{method: "GET", target: "/v1/tools?retmax=500&retmax=5"}},
	{name: "query-encoded-key", point: "v", req: rawReq{method: "GET", target: "/v1/tools?ret%6Dax=500"}},
	{name: "query-semicolon", point: "v", req: rawReq{method: "GET", target: "/v1/tools?term=x;retmax=500"}},
	{name: "query-fragment", point: "v", req: rawReq{method: "GET", target: "/v1/tools?term=x#&retmax=500"}},
	{name: "query-plus-space", point: "v", req: rawReq{method: "GET", target: "/v1/tools?retmax=+500"}},
	{name: "query-nul", point: "v", req: rawReq{method: "GET", target: "/v1/tools?term=x%00&retmax=500"}},
	{name: "query-and-json-body", point: "v", req: rawReq{target: "/v1/tools?retmax=5", hdr: []string{ctJSON}, body: `{"retmax":500}`}},
	{name: "query-and-form-body", point: "v", req: rawReq{target: "/v1/tools?retmax=5", hdr: []string{ctForm}, body: "retmax=500"}},
	{name: "query-bad-json-body-good", point: "v", req: rawReq{target: "/v1/tools?retmax=500", hdr: []string{ctJSON}, body: goodJSON}},

	// 2. Non-canonical paths.
	pathAttack("path-pct-lower", "2", "/v1/%74ools"),
	pathAttack("path-pct-upper-hex", "2", "/v1/tool%73"),
	pathAttack("path-pct-all", "2", "/%76%31/%74%6f%6f%6c%73"),
	pathAttack("path-double-slash-lead", "2", "//v1/tools"),
	pathAttack("path-double-slash-mid", "2", "/v1//tools"),
	pathAttack("path-dot", "2", "/v1/./tools"),
	pathAttack("path-dot-lead", "2", "/./v1/tools"),
	pathAttack("path-dotdot", "2", "/v1/x/../tools"),
	pathAttack("path-pct-dot", "2", "/v1/%2e/tools"),
	pathAttack("path-pct-dot-upper", "2", "/v1/%2E/tools"),
	pathAttack("path-pct-dotdot", "2", "/v1/x/%2e%2e/tools"),
	pathAttack("path-trailing-slash", "2", "/v1/tools/"),
	pathAttack("path-trailing-dot", "2", "/v1/tools/."),
	pathAttack("path-pct-slash", "v", "/v1%2ftools"),
	pathAttack("path-pct-slash-upper", "v", "/v1%2Ftools"),
	pathAttack("path-pct-backslash", "v", "/v1%5ctools"),
	pathAttack("path-backslash", "v", `/v1\tools`),
	pathAttack("path-semicolon-param", "v", "/v1/tools;x=1"),
	pathAttack("path-semicolon-segment", "v", "/v1;x/tools"),
	pathAttack("path-pct-semicolon", "v", "/v1/tools%3bx"),
	pathAttack("path-nul", "v", "/v1/tools%00"),
	pathAttack("path-space", "v", "/v1/tools%20"),
	pathAttack("path-upper-case", "v", "/v1/Tools"),
	pathAttack("path-crlf-encoded", "v", "/v1/tools%0d%0aX-Injected:%201"),
	pathAttack("path-tab", "v", "/v1/tools%09"),
	pathAttack("path-double-encoded-slash", "v", "/v1%252ftools"),
	pathAttack("path-non-ascii", "v", "/v1/t%D0%BEols"),
	pathAttack("path-dotdot-above-root", "v", "/../v1/tools"),
	pathAttack("path-overlong-utf8-slash", "v", "/v1%c0%aftools"),
	{name: "path-fragment", point: "v", req: rawReq{target: "/v1/tools#frag?" + badQuery, hdr: []string{ctJSON}, body: badJSON}},
	{name: "path-asterisk", point: "v", req: rawReq{method: "OPTIONS", url: "*", hdr: []string{ctJSON}, body: badJSON}},

	// 2. Methods.
	{name: "method-lower-case", point: "2", req: rawReq{method: "post", target: "/v1/tools?" + badQuery, hdr: []string{ctForm}, body: badForm}},
	{name: "method-mixed-case", point: "2", req: rawReq{method: "Post", target: "/v1/tools?" + badQuery, hdr: []string{ctForm}, body: badForm}},
	{name: "method-lower-get", point: "2", req: rawReq{method: "get", target: "/v1/tools?" + badQuery}},
	{name: "method-put", point: "v", req: rawReq{method: "PUT", target: "/v1/tools?" + badQuery, hdr: []string{ctForm}, body: badForm}},
	{name: "method-patch", point: "v", req: rawReq{method: "PATCH", target: "/v1/tools?" + badQuery, hdr: []string{ctForm}, body: badForm}},
	{name: "method-delete", point: "v", req: rawReq{method: "DELETE", target: "/v1/tools?" + badQuery}},
	{name: "method-head", point: "v", req: rawReq{method: "HEAD", target: "/v1/tools?" + badQuery}},
	{name: "method-options", point: "v", req: rawReq{method: "OPTIONS", target: "/v1/tools?" + badQuery}},
	{name: "method-override-header", point: "v", req: rawReq{method: "GET", target: "/v1/tools?term=x", hdr: []string{"X-HTTP-Method-Override: POST", ctForm}, body: badForm}},
	{name: "method-override-query", point: "v", req: rawReq{method: "GET", target: "/v1/tools?_method=POST&" + badQuery}},

	// 3. Other names for the tool's host (forward listener).
	hostAttack("host-ipv4", "3", "127.0.0.1:{PORT}"),
	hostAttack("host-ipv4-short", "3", "127.1:{PORT}"),
	hostAttack("host-ipv4-hex", "3", "0x7f000001:{PORT}"),
	hostAttack("host-ipv4-decimal", "3", "2130706433:{PORT}"),
	hostAttack("host-ipv4-octal", "3", "0177.0.0.1:{PORT}"),
	hostAttack("host-ipv4-mapped-ipv6", "3", "[::ffff:127.0.0.1]:{PORT}"),
	hostAttack("host-trailing-dot", "v", "localhost.:{PORT}"),
	hostAttack("host-upper-case", "v", "LOCALHOST:{PORT}"),
	hostAttack("host-port-leading-zero", "v", "localhost:0{PORT}"),
	hostAttack("host-userinfo", "v", "user:pw@localhost:{PORT}"),
	hostAttack("host-userinfo-alias", "v", "localhost:{PORT}@127.0.0.1:{PORT}"),
	hostAttack("host-pct-encoded", "v", "%6cocalhost:{PORT}"),
	{name: "host-header-mismatch-absolute", point: "v", forward: true, req: rawReq{url: "http://127.0.0.1:{PORT}/v1/tools?" + badQuery,
		host: "{AUTH}", hdr: []string{ctJSON}, body: badJSON}},
	{name: "host-header-duplicate", point: "v", forward: true, req: rawReq{url: "http://127.0.0.1:{PORT}/v1/tools?" + badQuery,
		host: "{AUTH}\r\nHost: 127.0.0.1:{PORT}", hdr: []string{ctJSON}, body: badJSON}},
	{name: "absolute-form-https-scheme", point: "v", forward: true, req: rawReq{url: "https://{AUTH}/v1/tools?" + badQuery, hdr: []string{ctJSON}, body: badJSON}},
	{name: "absolute-form-upper-scheme", point: "v", forward: true, req: rawReq{url: "HTTP://{AUTH}/v1/tools?" + badQuery, hdr: []string{ctJSON}, body: badJSON}},
	{name: "absolute-form-other-scheme", point: "v", forward: true, req: rawReq{url: "ftp://{AUTH}/v1/tools?" + badQuery, hdr: []string{ctJSON}, body: badJSON}},
	{name: "absolute-form-no-scheme", point: "v", forward: true, req: rawReq{url: "//{AUTH}/v1/tools?" + badQuery, host: "{AUTH}", hdr: []string{ctJSON}, body: badJSON}},
	{name: "origin-form-to-forward", point: "v", forward: true, req: rawReq{url: "/v1/tools?" + badQuery, host: "{AUTH}", hdr: []string{ctJSON}, body: badJSON}},
	{name: "absolute-form-ip-alias", point: "v", req: rawReq{url: "http://127.0.0.1:{PORT}/v1/tools?" + badQuery, hdr: []string{ctJSON}, body: badJSON}},
	{name: "reverse-host-header-alias", point: "v", req: rawReq{target: "/v1/tools?" + badQuery, host: "127.0.0.1:{PORT}", hdr: []string{ctJSON}, body: badJSON}},

	// Framing.
	bodyAttack("chunked-json", "v", chunked(nil, `{"retm`, `ax":500,"evil":1}`), ctJSON, "Transfer-Encoding: chunked"),
	bodyAttack("chunked-text-plain", "1", chunked(nil, `{"retm`, `ax":500,"evil":1}`), "Content-Type: text/plain", "Transfer-Encoding: chunked"),
	bodyAttack("chunked-trailers", "v", chunked([]string{"Content-Type: text/plain", "X-Retmax: 500"}, goodJSON), ctJSON, "Transfer-Encoding: chunked", "Trailer: Content-Type, X-Retmax"),
	bodyAttack("chunked-extension", "v", "5;ext=1\r\n{\"ret\r\n12\r\nmax\":500,\"evil\":1}\r\n0\r\n\r\n", ctJSON, "Transfer-Encoding: chunked"),
	{name: "cl-and-te", point: "v", req: rawReq{target: "/v1/tools?term=x", hdr: []string{ctJSON, "Content-Length: 23", "Transfer-Encoding: chunked"},
		body: chunked(nil, goodJSON) + badJSON}},
	{name: "te-identity", point: "v", req: rawReq{target: "/v1/tools?term=x", hdr: []string{ctJSON, "Transfer-Encoding: identity"}, body: badJSON}},
	{name: "te-chunked-upper", point: "v", req: rawReq{target: "/v1/tools?term=x", hdr: []string{ctJSON, "Transfer-Encoding: CHUNKED"}, body: chunked(nil, badJSON)}},
	{name: "content-length-duplicate", point: "v", req: rawReq{target: "/v1/tools?term=x", hdr: []string{ctJSON, "Content-Length: 23", "Content-Length: 23"}, body: badJSON, noCL: true}},
	bodyAttack("expect-100-continue", "v", badJSON, ctJSON, "Expect: 100-continue"),
	bodyAttack("expect-100-continue-text", "1", badJSON, "Content-Type: text/plain", "Expect: 100-continue"),
	{name: "http-1.0", point: "v", req: rawReq{proto: "HTTP/1.0", target: "/v1/tools?term=x", hdr: []string{ctJSON}, body: badJSON}},
	{name: "http-1.0-text-plain", point: "1", req: rawReq{proto: "HTTP/1.0", target: "/v1/tools?term=x", hdr: []string{"Content-Type: text/plain"}, body: badJSON}},
	{name: "header-obs-fold-content-type", point: "v", req: rawReq{target: "/v1/tools?term=x", hdr: []string{"Content-Type: text/plain;\r\n application/json"}, body: badJSON}},
	{name: "header-space-before-colon", point: "v", req: rawReq{target: "/v1/tools?term=x", hdr: []string{"Content-Type : text/plain"}, body: badJSON}},

	// 7. The caller's headers and the upstream's.
	{name: "agent-header-huge", point: "7", control: true, req: rawReq{method: "GET", target: "/v1/tools?term=x&retmax=5",
		hdr: []string{"X-Toolgate-Agent: " + strings.Repeat("a", 6000), "X-Toolgate-Session: " + strings.Repeat("s", 6000)}}},
	{name: "upstream-forged-toolgate-header", point: "7", control: true, req: rawReq{method: "GET", target: "/v1/tools?term=x"}},
	{name: "envelope-header-off", point: "v", control: true, req: rawReq{method: "GET", target: "/v1/tools?term=x", hdr: []string{"X-Toolgate-Envelope: 0"}}},
}

// render writes the request for one cell, with traceparent tp.
func (r rawReq) render(c cell, tp string) (raw []byte, method string) {
	expand := strings.NewReplacer("{AUTH}", c.up.authority(), "{PORT}", c.up.port, "{LISTENER}", c.addr).Replace
	method = r.method
	if method == "" {
		method = http.MethodPost
	}
	proto := r.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	target := expand(r.url)
	host := expand(r.host)
	switch {
	case r.url != "":
		if host == "" {
			if u, err := url.Parse(target); err == nil && u.Host != "" {
				host = u.Host
			} else {
				host = c.up.authority()
			}
		}
	case c.listener == "forward":
		target = "http://" + c.up.authority() + expand(r.target)
	default:
		target = expand(r.target)
	}
	if host == "" {
		host = c.up.authority()
		if c.listener == "reverse" {
			host = c.addr
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\r\n", method, target, proto)
	if host != "-" {
		fmt.Fprintf(&b, "Host: %s\r\n", host)
	}
	fmt.Fprintf(&b, "Traceparent: %s\r\n", tp)
	te := false
	for _, h := range r.hdr {
		b.WriteString(expand(h) + "\r\n")
		if strings.HasPrefix(strings.ToLower(h), "transfer-encoding") {
			te = true
		}
	}
	if r.body != "" && !r.noCL && !te {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(r.body)
	return []byte(b.String()), method
}
