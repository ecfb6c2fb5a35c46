package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// One reading of a JSON-RPC message: toolgate refuses a request body that a
// mainstream MCP server could read differently from toolgate, so what the
// checks saw is what the server executes. The servers whose rules are
// matched (proxy/adversarial/mcpreaders_test.go runs three of them):
//
//   - a hand-written Go server decoding with encoding/json into tagged
//     structs: a member matches a field up to Unicode case folding
//     ("Method", "ARGUMENTS", "paramſ" are method, arguments, params), the
//     last of two such members wins, and json.Decoder ignores what follows
//     the first value;
//   - the Python SDK (pydantic, MCPModel's alias_generator=to_camel with
//     populate_by_name): below the envelope a member is also read by its
//     snake_case field name ("request_state", "input_responses", "meta" for
//     "_meta");
//   - the Go SDK (case-sensitive segmentio decoder) and the TypeScript SDK
//     (JSON.parse, whose text decoding drops a byte-order mark and turns
//     invalid UTF-8 into U+FFFD, and which keeps a lone surrogate escape).
//
// So a request is refused when, at a level toolgate reads, a member's name
// is not one toolgate reads but equals one up to case folding and
// underscores; when its text is not valid UTF-8 or escapes a lone UTF-16
// surrogate; when its id is a number that is not an integer every reader
// holds exactly; or when its method differs from a method toolgate reads
// only in letter case. Names are compared after their escapes are decoded
// ("\u006dethod" is method to every reader and to toolgate). Duplicate
// names (exact or folded) are proxy's checkJSONNames'; a body toolgate
// cannot parse (a byte-order mark, data after the message) is ParseRPC's.

// Member names toolgate reads, by level of a request.
var (
	// namesMessage are a JSON-RPC message's members.
	namesMessage = newRPCNames("jsonrpc", "id", "method", "params", "result", "error")
	// namesParams are the params members toolgate reads of any method:
	// tools/call's, tools/list's cursor, initialize's, and the names
	// behind the 2026-07-28 Mcp-Name header.
	namesParams = newRPCNames("_meta", "name", "arguments", "task", ParamRequestState, ParamInputResponses,
		"cursor", "uri", "protocolVersion", "capabilities", "clientInfo")
	// namesMeta are the params._meta members toolgate reads.
	namesMeta = newRPCNames(MetaProtocolVersion, MetaTraceparent, MetaClientCapabilities, "progressToken")
	// namesError are a JSON-RPC error object's members.
	namesError = newRPCNames("code", "message", "data")
	// namesInputResponse are the members of one of params.inputResponses.
	namesInputResponse = newRPCNames("action", "content")
	// readMethods are the methods toolgate reads.
	readMethods = []string{MethodToolsCall, MethodToolsList, "initialize", "prompts/get", "resources/read"}
)

// rpcNames are the member names toolgate reads at one level, each with
// its underscores dropped (bare), as a snake_case reader compares them.
type rpcNames []struct {
	name string
	bare []byte
}

func newRPCNames(names ...string) rpcNames {
	out := make(rpcNames, len(names))
	for i, n := range names {
		out[i].name, out[i].bare = n, []byte(strings.ReplaceAll(n, "_", ""))
	}
	return out
}

// variant returns the name of ns that name spells another way so that
// some server reads it as that name: equal up to case folding
// (encoding/json's matching, bytes.EqualFold) once underscores are dropped
// (pydantic's snake_case field names, and "meta" for "_meta"). It returns
// "" for a name of ns itself and for any other.
func (ns rpcNames) variant(name []byte) string {
	for _, n := range ns {
		if string(name) == n.name {
			return ""
		}
	}
	bare := name
	if bytes.IndexByte(name, '_') >= 0 {
		bare = bytes.ReplaceAll(name, []byte("_"), nil)
	}
	for _, n := range ns {
		if bytes.EqualFold(bare, n.bare) {
			return n.name
		}
	}
	return ""
}

// maxExactID is the largest integer id every reader holds exactly
// (JavaScript's Number.MAX_SAFE_INTEGER).
const maxExactID = 1<<53 - 1

// checkRPCText refuses a request body that is not valid UTF-8 or whose
// strings escape a lone UTF-16 surrogate: encoding/json reads either as
// U+FFFD, JavaScript keeps a lone surrogate, and a name or value toolgate
// checked would not be the one a server reads.
func checkRPCText(body []byte) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: the message is not valid UTF-8", ErrNotRPC)
	}
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`\u`))
		if j < 0 {
			return nil
		}
		i += j
		// An escaped backslash before the u ("\\u") is no escape.
		k := i - 1
		for k >= 0 && body[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 1 {
			i += 2
			continue
		}
		r, ok := hex4(body, i+2)
		switch {
		case !ok:
			i += 2 // not JSON; the parser refuses it
		case r >= 0xD800 && r < 0xDC00:
			lo, ok := rune(0), false
			if i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
				lo, ok = hex4(body, i+8)
			}
			if !ok || lo < 0xDC00 || lo >= 0xE000 {
				return fmt.Errorf("%w: a string escapes a lone UTF-16 surrogate", ErrNotRPC)
			}
			i += 12
		case r >= 0xDC00 && r < 0xE000:
			return fmt.Errorf("%w: a string escapes a lone UTF-16 surrogate", ErrNotRPC)
		default:
			i += 6
		}
	}
}

// hex4 decodes the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// checkRPCReading refuses a request message (its members decoded in obj,
// its envelope in m) that a server could read differently from toolgate.
// Below the message, names are scanned from the text (rpcMembers) rather
// than decoded into maps: this runs on every MCP message.
func checkRPCReading(obj map[string]json.RawMessage, m *Message) error {
	for k := range obj {
		if n := namesMessage.variant([]byte(k)); n != "" {
			return spellingError("the message's", []byte(k), n)
		}
	}
	if err := checkID(m.ID); err != nil {
		return err
	}
	for _, known := range readMethods {
		if m.Method != known && strings.EqualFold(m.Method, known) {
			return fmt.Errorf("%w: method %q is %q in another letter case", ErrNotRPC, m.Method, known)
		}
	}
	if err := checkSpelling("error's", obj["error"], namesError); err != nil {
		return err
	}
	if err := checkSpelling("params'", m.Params, namesParams); err != nil {
		return err
	}
	var err error
	rpcMembers(m.Params, func(name, value []byte) bool {
		switch string(name) {
		case "_meta":
			err = checkSpelling("params._meta's", value, namesMeta)
		case ParamInputResponses:
			rpcMembers(value, func(_, response []byte) bool {
				err = checkSpelling("an input response's", response, namesInputResponse)
				return err == nil
			})
		}
		return err == nil
	})
	return err
}

// checkSpelling refuses a member of the object raw (nothing when raw is
// not an object) whose name is a variant of one of names.
func checkSpelling(where string, raw []byte, names rpcNames) error {
	var err error
	rpcMembers(raw, func(name, _ []byte) bool {
		if n := names.variant(name); n != "" {
			err = spellingError(where, name, n)
		}
		return err == nil
	})
	return err
}

func spellingError(where string, name []byte, n string) error {
	return fmt.Errorf("%w: %s member %q is %q in another letter case or with underscores; some servers read it as %q, toolgate does not",
		ErrNotRPC, where, name, n, n)
}

// rpcMembers calls fn with each member of the JSON object raw, its name
// decoded and its value's text, until fn returns false. raw is a value
// json.Unmarshal accepted (its escapes and nesting are valid); one that
// is not an object calls nothing.
func rpcMembers(raw []byte, fn func(name, value []byte) bool) {
	i := skipJSONSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	for i++; ; {
		i = skipJSONSpace(raw, i)
		if i < len(raw) && raw[i] == ',' {
			i = skipJSONSpace(raw, i+1)
		}
		if i >= len(raw) || raw[i] != '"' {
			return
		}
		end := jsonValueEnd(raw, i)
		name := raw[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(raw[i:end], &s) != nil {
				return
			}
			name = []byte(s)
		}
		i = skipJSONSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return
		}
		start := skipJSONSpace(raw, i+1)
		i = jsonValueEnd(raw, start)
		if !fn(name, raw[start:i]) {
			return
		}
	}
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// jsonValueEnd returns the index just past the JSON value that starts at
// b[i] (valid JSON).
func jsonValueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i
			}
		case ',', ' ', '\t', '\r', '\n', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// checkID refuses a numeric id that is not an integer every reader holds
// exactly: a fraction or an exponent (the Python SDK refuses 1.0, Go
// readers take it as 1), or beyond 2^53-1 (JavaScript rounds it).
func checkID(id json.RawMessage) error {
	if len(id) == 0 || id[0] == '"' || id[0] == 'n' {
		return nil
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil || n > maxExactID || n < -maxExactID || (len(id) > 1 && (id[0] == '0' || bytes.HasPrefix(id, []byte("-0")))) {
		return fmt.Errorf("%w: id %s is not an integer of at most 2^53-1 in plain form", ErrNotRPC, shortID(id))
	}
	return nil
}

// shortID is an id as quoted in an error: its first 32 bytes.
func shortID(id json.RawMessage) string {
	if len(id) > 32 {
		return string(id[:32]) + "..."
	}
	return string(id)
}

// TrimJSONSpace drops the whitespace JSON allows around a value (space,
// tab, CR, LF) and nothing else: bytes.TrimSpace would also drop Unicode
// spaces (U+0085, U+00A0) that every JSON reader refuses, and toolgate
// would forward a body no server reads as it did.
func TrimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// Bodyless reports whether a request that is not a POST comes without a
// body, and returns the body to send on (http.NoBody). A body of unknown
// length is read for its first byte to tell. err is the caller's when it
// went away while that byte was read.
func Bodyless(r *http.Request) (body io.ReadCloser, ok bool, err error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return http.NoBody, true, nil
	}
	if r.ContentLength > 0 {
		return nil, false, nil
	}
	var one [1]byte
	n, err := io.ReadFull(r.Body, one[:])
	switch {
	case n > 0:
		return nil, false, nil
	case err == io.EOF:
		return http.NoBody, true, nil
	}
	return nil, false, err
}
