// Package openapiimport is the work of `toolgate tools import openapi`: it
// reads an OpenAPI 3.0 or 3.1 document (or a Swagger 2.0 one, converted to
// 3.0 first) and turns each operation into a toolgate tool entry: its name,
// its match (host, method, path template), the sources of its arguments
// and one JSON Schema 2020-12 for them (parameters and request body merged,
// $refs resolved, OpenAPI's own keywords translated). An operation it
// cannot turn into a checked tool is listed with the reason, never dropped
// without a word.
//
// The document is parsed by github.com/getkin/kin-openapi, whose types stay
// inside this package. External $refs are never followed: a document that
// names another file or URL is refused.
package openapiimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policies"
)

// Bounds on what an imported document may make the importer do.
const (
	// MaxDocumentBytes is the largest document read, from a file or a URL.
	MaxDocumentBytes = 8 << 20
	// MaxSchemaNodes bounds one operation's schema after its $refs are
	// inlined: a larger one refuses the operation.
	MaxSchemaNodes = 20000
	// MaxRefDepth bounds how many $refs deep inlining goes (a chain of
	// distinct schemas each naming the next); deeper refuses the operation.
	MaxRefDepth = 32
	// maxNameLen is toolgate's longest tool name.
	maxNameLen = 128
)

// ErrDocument is matched (errors.Is) by every error Import returns for a
// document it cannot read as OpenAPI.
var ErrDocument = errors.New("not a usable OpenAPI document")

// errPanic marks a panic recovered while importing: a bug (FuzzImport
// fails on it), answered as an error rather than a crash.
var errPanic = errors.New("internal error")

// Options says how a document becomes tools. The zero value imports every
// operation against the document's only server, with strict tools.
type Options struct {
	// Server picks the server the tools' hosts and base paths come from: ""
	// (the document's only server; an error when it lists several), an index
	// into the document's servers ("0", "1", ...), or an absolute http or
	// https URL used instead of the document's (such as a stand-in's
	// "http://127.0.0.1:8080/api/v3"). Default "".
	Server string
	// Prefix is put before every tool name, such as "petstore.". Default "".
	Prefix string
	// NotStrict writes strict: false on every tool: the schemas are then
	// used exactly as the document writes them, open wherever it does not
	// say additionalProperties: false. Default false: the tools keep
	// toolgate's default strict: true, which refuses an argument no schema
	// declares at every depth.
	NotStrict bool
}

// Tool is one imported operation, in the shape of a toolgate tools entry
// (proxy.ToolConfig's fields of the same names).
type Tool struct {
	// Name is the tool's name: the operation's operationId in toolgate's
	// spelling (lower case, '_' between words), or METHOD_PATH without one.
	Name string
	// Host is match.host: the server's host, with its port when it names one.
	Host string
	// Method is match.method, upper case.
	Method string
	// Path is match.path: the server's base path joined with the
	// operation's path template.
	Path string
	// Args is where the arguments come from: path, query, json or form.
	Args []string
	// Strict is false when Options.NotStrict is set; nil keeps the default.
	Strict *bool
	// Schema is the arguments' JSON Schema 2020-12, as decoded JSON.
	Schema map[string]any
	// Operation names the operation in the document, "GET /pet/{petId}".
	Operation string
	// OperationID is the operation's operationId, "" when it has none.
	OperationID string
	// Notes say what of the operation the tool does not check (header
	// parameters, media types other than the one read, patterns toolgate
	// cannot compile), one sentence each.
	Notes []string
}

// Refusal is an operation that became no tool, with why.
type Refusal struct {
	// Operation names it, "POST /pet/{petId}/uploadImage".
	Operation string
	// OperationID is its operationId, "" when it has none.
	OperationID string
	// Reason says why, one sentence.
	Reason string
}

// Result is what Import made of a document.
type Result struct {
	// Title and Version are the document's info.title and info.version.
	Title, Version string
	// OpenAPI is the document's version as written ("3.0.4", "3.1.1"; "2.0"
	// for a Swagger document, converted).
	OpenAPI string
	// Tools are the imported operations, in path then method order.
	Tools []Tool
	// Refused are the operations that became no tool.
	Refused []Refusal
}

// Import turns an OpenAPI document (YAML or JSON) into tools.
func Import(ctx context.Context, data []byte, opts Options) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w: %w in the importer: %v", ErrDocument, errPanic, r)
		}
	}()
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrDocument, MaxDocumentBytes)
	}
	if opts.Prefix != "" && (!toolNameRE.MatchString(opts.Prefix) || len(opts.Prefix) > maxNameLen/2) {
		return nil, fmt.Errorf("%w: --prefix %q: lower-case letters, digits, '_', '-' and '.', starting with a letter or digit, at most %d characters", ErrServer, opts.Prefix, maxNameLen/2)
	}
	doc, version, err := load(ctx, data)
	if err != nil {
		return nil, err
	}
	im, err := newImporter(doc, opts)
	if err != nil {
		return nil, err
	}
	res = &Result{OpenAPI: version}
	if doc.Info != nil {
		res.Title, res.Version = doc.Info.Title, doc.Info.Version
	}
	used := map[string]bool{}
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, p := range keys {
		item := paths[p]
		if item == nil {
			continue
		}
		if item.Ref != "" {
			res.Refused = append(res.Refused, Refusal{Operation: p, Reason: "a path item given by $ref is not supported"})
			continue
		}
		for _, m := range methodOrder {
			op := item.GetOperation(m)
			if op == nil {
				continue
			}
			opName := m + " " + p
			t, err := im.operation(p, m, item, op)
			if err != nil {
				res.Refused = append(res.Refused, Refusal{Operation: opName, OperationID: op.OperationID, Reason: err.Error()})
				continue
			}
			t.Operation, t.OperationID = opName, op.OperationID
			t.Name = uniqueName(opts.Prefix, op.OperationID, m, p, used)
			if opts.NotStrict {
				f := false
				t.Strict = &f
			}
			if err := im.compile(t); err != nil {
				delete(used, t.Name)
				res.Refused = append(res.Refused, Refusal{Operation: opName, OperationID: op.OperationID, Reason: err.Error()})
				continue
			}
			res.Tools = append(res.Tools, *t)
		}
	}
	if err := validateTools(res); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	return res, nil
}

// methodOrder is the order operations of one path are imported in.
var methodOrder = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

// load parses the document: Swagger 2.0 is converted to OpenAPI 3.0, then
// the document is validated and its (internal) $refs resolved.
func load(ctx context.Context, data []byte) (doc *openapi3.T, version string, err error) {
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("%w: %w in the OpenAPI parser: %v", ErrDocument, errPanic, r)
		}
	}()
	var head struct {
		Swagger string `yaml:"swagger" json:"swagger"`
		OpenAPI string `yaml:"openapi" json:"openapi"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
	}
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = false
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		return nil, fmt.Errorf("external $ref to %q: toolgate never follows a document's references to other files or URLs", u.Redacted())
	}
	switch {
	case head.Swagger != "":
		if head.Swagger != "2.0" {
			return nil, "", fmt.Errorf("%w: swagger %q: only 2.0 is read", ErrDocument, head.Swagger)
		}
		var raw any
		if err := yaml.Unmarshal(data, &raw); err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
		}
		js, err := json.Marshal(stringKeys(raw, 0))
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
		}
		var d2 openapi2.T
		if err := json.Unmarshal(js, &d2); err != nil {
			return nil, "", fmt.Errorf("%w: swagger 2.0: %v", ErrDocument, err)
		}
		d3, err := openapi2conv.ToV3(&d2)
		if err != nil {
			return nil, "", fmt.Errorf("%w: converting swagger 2.0: %v", ErrDocument, err)
		}
		// Round-trip the converted document through the loader, so its
		// $refs are resolved as a 3.0 document's are.
		js, err = json.Marshal(d3)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
		}
		doc, err = loader.LoadFromData(js)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
		}
		version = "2.0"
	case strings.HasPrefix(head.OpenAPI, "3.0.") || strings.HasPrefix(head.OpenAPI, "3.1."):
		if strings.HasPrefix(head.OpenAPI, "3.1.") {
			if data, err = internalizeIDs(data); err != nil {
				return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
			}
		}
		doc, err = loader.LoadFromData(data)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", ErrDocument, err)
		}
		version = head.OpenAPI
	default:
		return nil, "", fmt.Errorf("%w: no \"openapi: 3.0.x\", \"openapi: 3.1.x\" or \"swagger: 2.0\" field", ErrDocument)
	}
	// The document is not put through kin-openapi's Validate: it refuses
	// documents for what does not matter here (an unknown keyword beside a
	// schema's others, which JSON Schema 2020-12 allows). What the import
	// reads it checks itself, and every schema it writes is compiled by
	// toolgate's own schema compiler.
	if doc.Paths == nil {
		return nil, "", fmt.Errorf("%w: no paths", ErrDocument)
	}
	return doc, version, nil
}

// importer holds what every operation of one document shares.
type importer struct {
	doc    *openapi3.T
	is31   bool
	raw    any // the whole document as decoded JSON, for $ref lookups
	server *server
	opts   Options
	// queryKeys are the query parameters API-key security schemes name.
	queryKeys map[string]bool
}

// server is where the tools' calls go: a host (with a port when the server
// names one) and a base path.
type server struct {
	host, base string
}

func newImporter(doc *openapi3.T, opts Options) (*importer, error) {
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	var raw any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDocument, err)
	}
	im := &importer{doc: doc, is31: doc.IsOpenAPI31OrLater(), raw: raw, opts: opts, queryKeys: map[string]bool{}}
	s, err := pickServer(doc.Servers, opts.Server)
	if err != nil {
		return nil, err
	}
	im.server = s
	if doc.Components != nil {
		for _, sr := range doc.Components.SecuritySchemes {
			if sr != nil && sr.Value != nil && sr.Value.Type == "apiKey" && sr.Value.In == "query" && sr.Value.Name != "" {
				im.queryKeys[sr.Value.Name] = true
			}
		}
	}
	return im, nil
}

// ErrServer is matched by the errors of choosing a server.
var ErrServer = errors.New("server")

// pickServer chooses the server by Options.Server.
func pickServer(servers openapi3.Servers, choice string) (*server, error) {
	if strings.HasPrefix(choice, "http://") || strings.HasPrefix(choice, "https://") {
		return parseServer(choice)
	}
	if choice != "" {
		i, err := strconv.Atoi(choice)
		if err != nil || i < 0 || i >= len(servers) {
			return nil, fmt.Errorf("%w: --server %q: want an index below %d or an http(s) URL", ErrServer, choice, len(servers))
		}
		return serverOf(servers[i])
	}
	switch len(servers) {
	case 0:
		return nil, fmt.Errorf("%w: the document lists no servers: give --server URL", ErrServer)
	case 1:
		return serverOf(servers[0])
	}
	var b strings.Builder
	for i, s := range servers {
		if s != nil {
			fmt.Fprintf(&b, "; %d: %s", i, s.URL)
		}
	}
	return nil, fmt.Errorf("%w: the document lists %d servers, choose one with --server INDEX or --server URL%s", ErrServer, len(servers), b.String())
}

// serverOf expands a server's variables to their defaults.
func serverOf(s *openapi3.Server) (*server, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: empty server entry", ErrServer)
	}
	u := s.URL
	for name, v := range s.Variables {
		if v != nil {
			u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
		}
	}
	return parseServer(u)
}

func parseServer(s string) (*server, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrServer, s, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %q names no host: give --server with an absolute URL, such as https://api.example.org%s", ErrServer, s, u.Path)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: %q: only http and https servers", ErrServer, s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %q: a server URL with credentials, a query or a fragment", ErrServer, s)
	}
	return &server{host: strings.ToLower(u.Host), base: strings.TrimSuffix(u.EscapedPath(), "/")}, nil
}

// opError is why an operation is refused.
func opError(format string, args ...any) error { return fmt.Errorf(format, args...) }

// operation builds one tool, or says why the operation cannot be one.
func (im *importer) operation(p, method string, item *openapi3.PathItem, op *openapi3.Operation) (*Tool, error) {
	srv := im.server
	if im.opts.Server == "" || !strings.Contains(im.opts.Server, "://") {
		// Servers given at the operation or path level win over the
		// document's, unless --server named a URL.
		for _, ss := range []openapi3.Servers{derefServers(op.Servers), item.Servers} {
			if len(ss) == 0 {
				continue
			}
			if len(ss) > 1 {
				return nil, opError("it lists %d servers of its own; toolgate matches one host per tool", len(ss))
			}
			s, err := serverOf(ss[0])
			if err != nil {
				return nil, opError("its own server: %v", err)
			}
			srv = s
			break
		}
	}
	t := &Tool{Host: srv.host, Method: method}
	tmpl, renames, err := template(srv.base, p)
	if err != nil {
		return nil, err
	}
	t.Path = tmpl
	cv := &converter{im: im}
	root := map[string]any{"type": "object"}
	props := map[string]any{}
	var required []string
	sources := map[string]string{} // argument name -> where it comes from
	var hasPath, hasQuery bool
	for _, pr := range mergeParams(item.Parameters, op.Parameters) {
		prm := pr.Value
		if prm == nil {
			continue
		}
		name := prm.Name
		switch prm.In {
		case "header", "cookie":
			t.Notes = append(t.Notes, fmt.Sprintf("%s parameter %q: toolgate checks path, query and body arguments, not %ss", prm.In, prm.Name, prm.In))
			continue
		case "path":
			r, ok := renames[name]
			if !ok {
				return nil, opError("path parameter %q is not in the path %s", prm.Name, p)
			}
			name = r
			hasPath = true
		case "query":
			hasQuery = true
		default:
			return nil, opError("parameter %q is in %q", prm.Name, prm.In)
		}
		sch, err := im.paramSchema(cv, prm)
		if err != nil {
			return nil, err
		}
		if prev, dup := sources[name]; dup {
			return nil, opError("argument %q is both a %s and a %s parameter", name, prev, prm.In)
		}
		sources[name] = prm.In + " parameter"
		props[name] = sch
		if prm.Required || prm.In == "path" {
			required = append(required, name)
		}
	}
	for k := range renames {
		if _, ok := sources[renames[k]]; !ok {
			// A template variable the document does not declare: any one
			// segment.
			props[renames[k]] = map[string]any{"type": "string"}
			required = append(required, renames[k])
			sources[renames[k]] = "path parameter"
			hasPath = true
		}
	}
	// API keys sent in the query string are arguments a strict schema must
	// let through.
	if im.operationUsesQueryKey(op) {
		for k := range im.queryKeys {
			if _, dup := sources[k]; !dup {
				props[k] = map[string]any{"type": "string"}
				sources[k] = "query API key"
				hasQuery = true
				t.Notes = append(t.Notes, fmt.Sprintf("query API key %q is declared (type string) so strict checks let it through", k))
			}
		}
	}
	if hasPath {
		t.Args = append(t.Args, "path")
	}
	if hasQuery {
		t.Args = append(t.Args, "query")
	}
	if op.RequestBody != nil && op.RequestBody.Value != nil && len(op.RequestBody.Value.Content) > 0 {
		src, body, notes, err := im.body(cv, op.RequestBody.Value)
		if err != nil {
			return nil, err
		}
		t.Notes = append(t.Notes, notes...)
		t.Args = append(t.Args, src)
		if err := mergeBody(root, props, &required, sources, body, op.RequestBody.Value.Required); err != nil {
			return nil, err
		}
	}
	if len(t.Args) == 0 {
		// Without a source listed the default (every source) applies: say
		// none instead, so every argument is refused.
		t.Args = []string{"query"}
	}
	root["properties"] = props
	if len(required) > 0 {
		slices.Sort(required)
		root["required"] = toAny(slices.Compact(required))
	}
	if len(props) == 0 && root["allOf"] == nil && root["anyOf"] == nil {
		// The operation takes no arguments: say so, so that none is let
		// through even with strict: false.
		root["additionalProperties"] = false
	}
	if len(cv.defs) > 0 {
		root["$defs"] = cv.defs
	}
	if cv.nodes > MaxSchemaNodes {
		return nil, opError("its schema has more than %d nodes once its $refs are inlined", MaxSchemaNodes)
	}
	t.Schema = root
	t.Notes = append(t.Notes, cv.notes...)
	return t, nil
}

func derefServers(s *openapi3.Servers) openapi3.Servers {
	if s == nil {
		return nil
	}
	return *s
}

// operationUsesQueryKey reports whether the operation's security (its own,
// or the document's) names an API key sent in the query string.
func (im *importer) operationUsesQueryKey(op *openapi3.Operation) bool {
	if len(im.queryKeys) == 0 {
		return false
	}
	reqs := im.doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	for _, r := range reqs {
		for name := range r {
			if im.doc.Components == nil {
				continue
			}
			if sr := im.doc.Components.SecuritySchemes[name]; sr != nil && sr.Value != nil && sr.Value.Type == "apiKey" && sr.Value.In == "query" {
				return true
			}
		}
	}
	return false
}

// mergeParams applies the operation's parameters over the path item's
// (the same name and location replaces), in the document's order.
func mergeParams(pathLevel, opLevel openapi3.Parameters) openapi3.Parameters {
	var out openapi3.Parameters
	seen := map[string]bool{}
	for _, p := range opLevel {
		if p != nil && p.Value != nil {
			seen[p.Value.In+"\x00"+p.Value.Name] = true
		}
	}
	for _, p := range pathLevel {
		if p != nil && p.Value != nil && !seen[p.Value.In+"\x00"+p.Value.Name] {
			out = append(out, p)
		}
	}
	return append(out, opLevel...)
}

var varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// template joins the server's base path and the operation's path, checks
// the result is a toolgate path template (one variable per segment, with a
// literal prefix and suffix), and renames variables toolgate cannot name
// ("pet-id" becomes "pet_id"; renames maps the document's name to the
// template's for every variable).
func template(base, p string) (string, map[string]string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", nil, opError("path %q does not start with '/'", p)
	}
	full := base + p
	if p == "/" && base != "" {
		full = base // the server's root, without a trailing slash
	}
	renames := map[string]string{}
	taken := map[string]bool{}
	segs := strings.Split(full, "/")
	for i, seg := range segs {
		open := strings.Count(seg, "{")
		if open == 0 && !strings.Contains(seg, "}") {
			continue
		}
		if open != 1 || strings.Count(seg, "}") != 1 {
			return "", nil, opError("path segment %q holds more than one variable; toolgate's templates hold one per segment", seg)
		}
		a, b := strings.Index(seg, "{"), strings.Index(seg, "}")
		if b < a {
			return "", nil, opError("path segment %q is not a template", seg)
		}
		name := seg[a+1 : b]
		if name == "" {
			return "", nil, opError("path segment %q has an empty variable", seg)
		}
		nn := name
		if !varNameRE.MatchString(nn) {
			nn = strings.Map(func(r rune) rune {
				if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') {
					return r
				}
				return '_'
			}, nn)
			if nn[0] >= '0' && nn[0] <= '9' {
				nn = "_" + nn
			}
		}
		for taken[nn] {
			nn += "_"
		}
		taken[nn] = true
		renames[name] = nn
		segs[i] = seg[:a] + "{" + nn + "}" + seg[b+1:]
	}
	return strings.Join(segs, "/"), renames, nil
}

// paramSchema converts one path or query parameter's schema, refusing the
// serialisations toolgate does not read.
func (im *importer) paramSchema(cv *converter, prm *openapi3.Parameter) (any, error) {
	sr := prm.Schema
	if sr == nil {
		for mt, m := range prm.Content {
			if !isJSON(mt) || m == nil {
				return nil, opError("%s parameter %q is described as %s content; toolgate reads parameters as strings", prm.In, prm.Name, mt)
			}
			return nil, opError("%s parameter %q is JSON text; toolgate reads parameters as strings", prm.In, prm.Name)
		}
		return map[string]any{"type": "string"}, nil
	}
	sch, err := cv.schemaRef(sr)
	if err != nil {
		return nil, opError("%s parameter %q: %v", prm.In, prm.Name, err)
	}
	types := typesOf(sch)
	structured := types["array"] || types["object"]
	if prm.In == "path" && structured {
		return nil, opError("path parameter %q is an %s; toolgate reads a path variable as one string", prm.Name, firstOf(types, "array", "object"))
	}
	if prm.In == "query" {
		if types["object"] {
			return nil, opError("query parameter %q is an object (style %s); toolgate reads query keys as strings or arrays", prm.Name, orDefault(prm.Style, "form"))
		}
		if types["array"] {
			style := orDefault(prm.Style, "form")
			explode := prm.Explode == nil || *prm.Explode
			if style != "form" || !explode {
				return nil, opError("query parameter %q is an array in style %s, explode %v (one key holding several values); toolgate reads a repeated key as an array", prm.Name, style, explode)
			}
		}
	}
	return sch, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func firstOf(set map[string]bool, names ...string) string {
	for _, n := range names {
		if set[n] {
			return n
		}
	}
	return ""
}

// typesOf is the set of JSON types a converted schema's type keyword names.
func typesOf(s any) map[string]bool {
	out := map[string]bool{}
	m, _ := s.(map[string]any)
	switch t := m["type"].(type) {
	case string:
		out[t] = true
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

// isJSON reports whether a media type is application/json or
// application/*+json.
func isJSON(mt string) bool {
	base := mediaBase(mt)
	return base == "application/json" || (strings.HasPrefix(base, "application/") && strings.HasSuffix(base, "+json"))
}

func mediaBase(mt string) string {
	base, _, _ := strings.Cut(mt, ";")
	return strings.ToLower(strings.TrimSpace(base))
}

// body chooses the request body's media type toolgate reads and converts
// its schema: JSON first, then a form; multipart and other types alone
// refuse the operation.
func (im *importer) body(cv *converter, rb *openapi3.RequestBody) (src string, sch map[string]any, notes []string, err error) {
	types := make([]string, 0, len(rb.Content))
	for mt := range rb.Content {
		types = append(types, mt)
	}
	slices.Sort(types)
	var chosen string
	for _, mt := range types {
		if isJSON(mt) {
			chosen, src = mt, "json"
			break
		}
	}
	if chosen == "" {
		for _, mt := range types {
			if mediaBase(mt) == "application/x-www-form-urlencoded" {
				chosen, src = mt, "form"
				break
			}
		}
	}
	if chosen == "" {
		return "", nil, nil, opError("its request body is %s only; toolgate reads JSON and application/x-www-form-urlencoded bodies (a multipart or other body is refused as unsupported_media_type)", strings.Join(types, ", "))
	}
	var others []string
	for _, mt := range types {
		if mt != chosen {
			others = append(others, mt)
		}
	}
	if len(others) > 0 {
		notes = append(notes, fmt.Sprintf("request body %s is refused as unsupported_media_type: toolgate reads %s", strings.Join(others, ", "), chosen))
	}
	mtObj := rb.Content[chosen]
	if mtObj == nil || mtObj.Schema == nil {
		return src, map[string]any{}, notes, nil
	}
	s, err := cv.schemaRef(mtObj.Schema)
	if err != nil {
		return "", nil, nil, opError("request body: %v", err)
	}
	m, ok := s.(map[string]any)
	if !ok {
		if s == true {
			return src, map[string]any{}, notes, nil
		}
		return "", nil, nil, opError("request body schema is false: no body is valid")
	}
	if ts := typesOf(m); len(ts) > 0 && !ts["object"] {
		return "", nil, nil, opError("its request body is %s; toolgate's arguments are the members of one JSON object", firstOf(ts, "array", "string", "integer", "number", "boolean", "null"))
	}
	if src == "form" {
		if props, ok := m["properties"].(map[string]any); ok {
			for name, p := range props {
				if typesOf(p)["object"] {
					return "", nil, nil, opError("form field %q is an object; toolgate reads form fields as strings or arrays", name)
				}
			}
		}
	}
	return src, m, notes, nil
}

// objectKeys are the keywords of a body schema that is a plain object, one
// whose keywords can move to the arguments' root.
var objectKeys = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"minProperties": true, "maxProperties": true, "patternProperties": true,
	"propertyNames": true, "dependentRequired": true,
}

// mergeBody puts the body's schema into the arguments' root beside the
// parameters: a plain object's keywords move to the root; any other schema
// is applied in place (allOf, or anyOf with "no body" when the body is
// optional).
func mergeBody(root, props map[string]any, required *[]string, sources map[string]string, body map[string]any, bodyRequired bool) error {
	declared := declaredNames(body, 0)
	for _, n := range declared {
		if prev, dup := sources[n]; dup {
			return opError("argument %q is both a %s and a body member", n, prev)
		}
	}
	plain := true
	for k := range body {
		if !objectKeys[k] {
			plain = false
		}
	}
	var bodyReq []any
	if r, ok := body["required"].([]any); ok {
		bodyReq = r
	}
	// absent says "no member of the body is present": an optional body
	// may be left out.
	absent := func() map[string]any {
		var any_ []any
		for _, n := range declared {
			any_ = append(any_, map[string]any{"required": []any{n}})
		}
		if len(any_) == 0 {
			return map[string]any{"maxProperties": len(props)}
		}
		return map[string]any{"not": map[string]any{"anyOf": any_}}
	}
	if plain {
		if bp, ok := body["properties"].(map[string]any); ok {
			for k, v := range bp {
				props[k] = v
				sources[k] = "body member"
			}
		}
		for k, v := range body {
			switch k {
			case "type", "properties", "required":
			default:
				if len(props) > len(declared) && (k == "minProperties" || k == "maxProperties" || k == "propertyNames") {
					// They would count the parameters too.
					return opError("its request body sets %s, which would also count the %d parameters", k, len(props)-len(declared))
				}
				root[k] = v
			}
		}
		if len(bodyReq) > 0 {
			if bodyRequired {
				for _, r := range bodyReq {
					if s, ok := r.(string); ok {
						*required = append(*required, s)
					}
				}
			} else {
				root["anyOf"] = []any{map[string]any{"required": bodyReq}, absent()}
			}
		}
		return nil
	}
	if len(props) > 0 && closesTop(body, 0) {
		return opError("its request body's schema closes its top level (additionalProperties or unevaluatedProperties) inside a composition, so the %d parameters cannot join it", len(props))
	}
	if bodyRequired {
		root["allOf"] = []any{body}
	} else {
		root["anyOf"] = []any{body, absent()}
	}
	return nil
}

// declaredNames lists the property names a schema declares at its own
// place, through the keywords that apply in place.
func declaredNames(s any, depth int) []string {
	m, ok := s.(map[string]any)
	if !ok || depth > 16 {
		return nil
	}
	var out []string
	if p, ok := m["properties"].(map[string]any); ok {
		for k := range p {
			out = append(out, k)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if l, ok := m[k].([]any); ok {
			for _, x := range l {
				out = append(out, declaredNames(x, depth+1)...)
			}
		}
	}
	for _, k := range []string{"then", "else"} {
		out = append(out, declaredNames(m[k], depth+1)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// closesTop reports whether a schema closes the names of its own place
// anywhere it applies in place.
func closesTop(s any, depth int) bool {
	m, ok := s.(map[string]any)
	if !ok || depth > 16 {
		return false
	}
	if _, ok := m["additionalProperties"]; ok {
		return true
	}
	if _, ok := m["unevaluatedProperties"]; ok {
		return true
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if l, ok := m[k].([]any); ok {
			for _, x := range l {
				if closesTop(x, depth+1) {
					return true
				}
			}
		}
	}
	return false
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// compile checks the tool's schema with toolgate's own compiler, as the
// configuration loader will: a pattern toolgate cannot compile is dropped
// (and noted); any other error refuses the operation.
func (im *importer) compile(t *Tool) error {
	for range 32 {
		js, err := json.Marshal(t.Schema)
		if err != nil {
			return opError("its schema does not encode: %v", err)
		}
		_, err = policies.CompileSchema(js, policies.SchemaOptions{Tool: t.Name, Strict: t.Strict == nil || *t.Strict, Limits: policies.FileSchemaLimits})
		if err == nil {
			return nil
		}
		var se *policies.SchemaError
		if errors.As(err, &se) && strings.HasSuffix(se.Pointer, "/pattern") {
			if dropAt(t.Schema, se.Pointer) {
				t.Notes = append(t.Notes, fmt.Sprintf("pattern at %s is not checked: %s", strings.TrimSuffix(se.Pointer, "/pattern"), se.Msg))
				continue
			}
		}
		return opError("toolgate cannot compile its schema: %v", err)
	}
	return opError("toolgate cannot compile its schema: too many patterns it cannot read")
}

// dropAt deletes the member a JSON pointer names in a decoded document.
func dropAt(doc map[string]any, ptr string) bool {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var cur any = doc
	for i, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if _, ok := c[p]; !ok {
					return false
				}
				delete(c, p)
				return true
			}
			cur = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n >= len(c) || last {
				return false
			}
			cur = c[n]
		default:
			return false
		}
	}
	return false
}

// toolNameRE is toolgate's rule for tool names (proxy's config.go).
var toolNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,127}$`)

var (
	camelRE   = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	acronymRE = regexp.MustCompile(`([A-Z]+)([A-Z][a-z])`)
	badRE     = regexp.MustCompile(`[^a-z0-9_.-]+`)
)

// ToolName spells an operationId as a toolgate tool name: words split at
// case changes and joined by '_', lower case, other characters as '_'.
// It returns "" when nothing is left.
func ToolName(id string) string {
	s := acronymRE.ReplaceAllString(id, "${1}_${2}")
	s = camelRE.ReplaceAllString(s, "${1}_${2}")
	s = strings.ToLower(s)
	s = badRE.ReplaceAllString(s, "_")
	for strings.Contains(s, "__") {
		s = strings.ReplaceAll(s, "__", "_")
	}
	s = strings.TrimLeft(s, "_.-")
	s = strings.TrimRight(s, "_")
	if len(s) > maxNameLen {
		s = strings.TrimRight(s[:maxNameLen], "_")
	}
	return s
}

// uniqueName names a tool: the prefix and the operationId in toolgate's
// spelling, or the method and path without one; a name already taken gets
// _2, _3, ...
func uniqueName(prefix, id, method, p string, used map[string]bool) string {
	base := ToolName(id)
	if base == "" {
		base = ToolName(strings.ToLower(method) + "_" + strings.NewReplacer("{", "", "}", "").Replace(p))
	}
	if base == "" {
		base = strings.ToLower(method)
	}
	limit := maxNameLen - len(prefix) - 4
	if limit < 1 {
		limit = 1
	}
	if len(base) > limit {
		base = strings.TrimRight(base[:limit], "_.-")
	}
	name := prefix + base
	for n := 2; used[name]; n++ {
		name = prefix + base + "_" + strconv.Itoa(n)
	}
	used[name] = true
	return name
}

// jsonPointerGet returns the value a JSON pointer fragment ("#/a/b")
// names in doc.
func jsonPointerGet(doc any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if frag == "" {
		return doc, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	cur := doc
	for _, p := range strings.Split(frag[1:], "/") {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n >= len(c) {
				return nil, false
			}
			cur = c[n]
		default:
			return nil, false
		}
	}
	return cur, true
}

// refName is the last segment of a $ref, for $defs and discriminator
// values.
func refName(ref string) string {
	_, frag, _ := strings.Cut(ref, "#")
	return path.Base(frag)
}

// marshalSchema is a kin-openapi schema reference as decoded JSON.
func marshalSchema(sr *openapi3.SchemaRef) (any, error) {
	js, err := json.Marshal(sr)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	return v, nil
}
