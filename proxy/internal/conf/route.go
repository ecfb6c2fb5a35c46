package conf

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/canonical"
)

// Tool is a compiled ToolConfig.
type Tool struct {
	Cfg     ToolConfig
	Host    string // lower-case, "" for any
	Port    string // "" for any
	Tmpl    *template
	Sources SourceSet // 0 means "by request"
	Schema  *policies.Schema
	MCP     *MCPRoute         // nil unless the protocol is mcp
	Inject  map[string]string // canonical header -> value
	// EnumFields are the observe section's enum_fields (nil: none).
	EnumFields map[string]bool
	// hostPort is Host and Port joined, when the match names both: the
	// authority of a call to them (Canon.URLInto), made once.
	hostPort string
}

// WantsEnvelope reports whether the caller gets the envelope for this call.
func (t *Tool) WantsEnvelope(r *http.Request) bool {
	switch t.Cfg.Envelope {
	case EnvelopeAlways:
		return true
	case EnvelopeNever:
		return false
	}
	return AskedForEnvelope(r)
}

// NeedsBody reports whether a rule needs upstream's body to decide.
func (t *Tool) NeedsBody() bool {
	for _, r := range t.Cfg.Rules {
		if r.BodyContains != "" || r.JSONField != "" {
			return true
		}
	}
	return false
}

type SourceSet uint8

const (
	BitQuery SourceSet = 1 << iota
	BitJSON
	BitForm
	BitPath
)

func sourceBit(s string) SourceSet {
	switch s {
	case SourceQuery:
		return BitQuery
	case SourceJSON:
		return BitJSON
	case SourceForm:
		return BitForm
	}
	return BitPath
}

// template is a compiled path template. Each segment is a literal, or a
// variable between an optional literal prefix and suffix.
type template struct {
	raw      string
	Segs     []segment
	trailing bool // the template ends in '/': calls go upstream with one
}

type segment struct {
	Lit            string // whole-segment literal when name == ""
	Name           string // variable name
	Prefix, Suffix string
}

func parseTemplate(s string) (*template, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("template %q must start with '/'", s)
	}
	t := &template{raw: s}
	names := map[string]bool{}
	body := s[1:]
	if len(body) > 0 && body[len(body)-1] == '/' {
		t.trailing, body = true, body[:len(body)-1]
	}
	for _, part := range strings.Split(body, "/") {
		if part == "" && body != "" {
			return nil, fmt.Errorf("template %q has an empty segment (\"//\"); calls are matched with repeated slashes merged", s)
		}
		if lit := strings.NewReplacer("{", "", "}", "").Replace(part); lit != "" {
			if c, _, ok := canonical.Path("/" + lit); !ok || c != "/"+lit {
				return nil, fmt.Errorf("template %q: segment %q is not in canonical form (no dot segments, escapes only of reserved characters, in upper-case hex; write %%74 as t); calls are matched in canonical form", s, part)
			}
		}
		open := strings.IndexByte(part, '{')
		if open < 0 {
			if strings.ContainsRune(part, '}') {
				return nil, fmt.Errorf("template %q: unbalanced '}' in segment %q", s, part)
			}
			t.Segs = append(t.Segs, segment{Lit: part})
			continue
		}
		closing := strings.IndexByte(part, '}')
		if closing < open {
			return nil, fmt.Errorf("template %q: unbalanced braces in segment %q", s, part)
		}
		name := part[open+1 : closing]
		rest := part[closing+1:]
		if strings.ContainsAny(rest, "{}") || strings.ContainsRune(part[:open], '}') {
			return nil, fmt.Errorf("template %q: segment %q may hold one variable only", s, part)
		}
		if !validVarName(name) {
			return nil, fmt.Errorf("template %q: %q is not a valid variable name", s, name)
		}
		if names[name] {
			return nil, fmt.Errorf("template %q: variable %q appears twice", s, name)
		}
		names[name] = true
		t.Segs = append(t.Segs, segment{Name: name, Prefix: part[:open], Suffix: rest})
	}
	return t, nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

// shape is the template with variable names erased, for conflict detection.
func (t *template) shape() string {
	var b strings.Builder
	for _, s := range t.Segs {
		b.WriteByte('/')
		if s.Name == "" {
			b.WriteString(s.Lit)
		} else {
			b.WriteString(s.Prefix + "{}" + s.Suffix)
		}
	}
	return b.String()
}

// Match matches a canonical escaped URL path (without a trailing slash)
// against the template. It returns the
// variables (unescaped) and a specificity score (literal bytes matched), or
// ok false.
func (t *template) Match(path string) (vars map[string]string, score int, ok bool) {
	if len(path) == 0 || path[0] != '/' {
		return nil, 0, false
	}
	rest := path[1:]
	for i, s := range t.Segs {
		part := rest
		j := strings.IndexByte(rest, '/')
		last := i == len(t.Segs)-1
		switch {
		case last && j >= 0, !last && j < 0:
			return nil, 0, false // more or fewer segments than the template
		case !last:
			part, rest = rest[:j], rest[j+1:]
		}
		if s.Name == "" {
			if part != s.Lit {
				return nil, 0, false
			}
			score += len(s.Lit) + 1
			continue
		}
		if len(part) < len(s.Prefix)+len(s.Suffix)+1 || !strings.HasPrefix(part, s.Prefix) || !strings.HasSuffix(part, s.Suffix) {
			return nil, 0, false
		}
		v := part[len(s.Prefix) : len(part)-len(s.Suffix)]
		if uv, err := pathUnescape(v); err == nil {
			v = uv
		}
		if vars == nil {
			vars = make(map[string]string, 2)
		}
		vars[s.Name] = v
		score += len(s.Prefix) + len(s.Suffix)
	}
	return vars, score, true
}

// Route finds the tool for a call: the matching tool with the highest
// specificity (literal path bytes, then a named method, then a named host),
// the first in config order on a tie.
//
// method, host, port and path are the call's canonical form (canon).
func Route(tools []*Tool, method, host, port, path string) (*Tool, map[string]string) {
	var best *Tool
	var bestVars map[string]string
	bestScore := -1
	for _, t := range tools {
		if t.Host != "" && t.Host != host {
			continue
		}
		if t.Port != "" && t.Port != port {
			continue
		}
		if t.Cfg.Match.Method != "" && t.Cfg.Match.Method != method {
			continue
		}
		vars, score, ok := t.Tmpl.Match(path)
		if !ok {
			continue
		}
		score *= 4
		if t.Cfg.Match.Method != "" {
			score += 2
		}
		if t.Host != "" {
			score++
		}
		if score > bestScore {
			best, bestVars, bestScore = t, vars, score
		}
	}
	return best, bestVars
}

// AskedForEnvelope reports whether the request asks for the envelope, by the
// X-Toolgate-Envelope header or by naming the envelope media type in Accept.
func AskedForEnvelope(r *http.Request) bool {
	switch strings.ToLower(r.Header.Get(HeaderEnvelope)) {
	case "1", "true", "yes", "on":
		return true
	}
	for _, a := range r.Header.Values("Accept") {
		if strings.Contains(a, bucketing.EnvelopeMediaType) {
			return true
		}
	}
	return false
}

func canonicalHeader(k string) string { return textproto.CanonicalMIMEHeaderKey(k) }

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }

// JoinAuthority is host:port, without the port when it is the scheme's
// default.
func JoinAuthority(host, port, defaultPort string) string {
	if port == "" || port == defaultPort {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// HasRoutes reports whether any tool may match calls to host:port.
func HasRoutes(tools []*Tool, host, port string) bool {
	host = strings.ToLower(strings.Trim(host, "[]"))
	for _, t := range tools {
		if (t.Host == "" || t.Host == host) && (t.Port == "" || t.Port == port) {
			return true
		}
	}
	return false
}
