package policies

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The JSON-Schema-Test-Suite (json-schema-org, MIT licence) is read from
// the Go module cache, where github.com/google/jsonschema-go ships a copy
// of its draft2020-12 and draft7 test files in its module zip, taken at
// suite commit 83e866b46c9f9e7082fd51e83a61c5f2145a1ab7 (see the README.md
// beside them; that copy leaves out draft2020-12's content.json,
// format.json and vocabulary.json, and the optional directories). The
// module is pinned by go.sum (it is already in the module graph through
// the MCP SDK), so nothing third-party is committed here; `go mod download`
// fetches it where the cache lacks it.
const (
	suiteModule  = "github.com/google/jsonschema-go"
	suiteVersion = "v0.4.3"
)

// suiteDir returns the directory holding the suite's draft folders.
func suiteDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", suiteModule+"@"+suiteVersion).Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v (the JSON-Schema-Test-Suite comes from that module)", suiteModule, suiteVersion, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s@%s: %s %v", suiteModule, suiteVersion, m.Error, err)
	}
	return filepath.Join(m.Dir, "jsonschema", "testdata")
}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// suiteCase is one object-shaped test of the suite.
type suiteCase struct {
	file, group, test string
	schema            []byte
	dir               string // SchemaOptions.Dir: the suite's remotes, for cases that use them
	data              map[string]any
	valid             bool
}

func (c suiteCase) name() string { return c.file + ": " + c.group + ": " + c.test }

// remoteBase is where the suite's schemas find its remote documents.
const remoteBase = "http://localhost:1234/"

// localRemotes copies the suite's remote documents into a temporary
// folder, with every remoteBase URL turned into a file URL there, and
// returns the folder and its file URL. toolgate never fetches a network
// reference; a $ref to a file under the schema folder is what it serves.
func localRemotes(t *testing.T, root string) (dir, base string) {
	t.Helper()
	dir = t.TempDir()
	base = (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir) + "/"}).String()
	src := filepath.Join(root, "remotes")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, bytes.ReplaceAll(b, []byte(remoteBase), []byte(base)), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, base
}

// loadSuite returns the object-shaped cases of a draft folder. A schema
// that refers to the suite's remote documents (remoteBase) gets file URLs
// into the local copy made by localRemotes instead.
func loadSuite(t *testing.T, dir, remotes, remotesURL string) (cases []suiteCase) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite files in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(b, &groups); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range groups {
			for _, tc := range g.Tests {
				dec := json.NewDecoder(bytes.NewReader(tc.Data))
				dec.UseNumber()
				var data any
				if err := dec.Decode(&data); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				obj, ok := data.(map[string]any)
				if !ok {
					continue
				}
				c := suiteCase{file: filepath.Base(f), group: g.Description, test: tc.Description,
					schema: withDraft(g.Schema, filepath.Base(dir)), data: obj, valid: tc.Valid}
				if bytes.Contains(c.schema, []byte(remoteBase)) {
					c.schema = bytes.ReplaceAll(c.schema, []byte(remoteBase), []byte(remotesURL))
					c.dir = remotes
				}
				cases = append(cases, c)
			}
		}
	}
	return cases
}

// withDraft names the folder's draft in $schema when the schema does not:
// this copy of the suite leaves $schema out of its draft7 schemas, and
// toolgate's default draft is 2020-12.
func withDraft(schema []byte, folder string) []byte {
	if folder != "draft7" || !bytes.HasPrefix(bytes.TrimSpace(schema), []byte("{")) || bytes.Contains(schema, []byte(`"$schema"`)) {
		return schema
	}
	rest := bytes.TrimPrefix(bytes.TrimSpace(schema), []byte("{"))
	sep := ","
	if bytes.HasPrefix(bytes.TrimSpace(rest), []byte("}")) {
		sep = ""
	}
	return []byte(`{"$schema": "http://json-schema.org/draft-07/schema#"` + sep + string(rest))
}

// runCase compiles and validates one case through CompileSchema and
// Validate, the path every call takes. It reports whether the arguments
// were accepted, or the compile error.
func runCase(c suiteCase, strict bool) (bool, error) {
	s, err := CompileSchema(c.schema, SchemaOptions{Tool: "suite", Strict: strict, UnknownFormats: FormatsIgnore, Dir: c.dir})
	if err != nil {
		return false, err
	}
	return s.Validate(c.data) == nil, nil
}

// declaredNames lists every name a schema document declares: the keys of
// its properties objects, and its patternProperties regexps.
func declaredNames(doc []byte) (names map[string]bool, patterns []*regexp.Regexp) {
	var v any
	_ = json.Unmarshal(doc, &v)
	names = map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if p, ok := e.(map[string]any); ok && (k == "properties" || k == "patternProperties") {
					for n := range p {
						if k == "properties" {
							names[n] = true
						} else if re, err := regexp.Compile(n); err == nil {
							patterns = append(patterns, re)
						}
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return names, patterns
}

// namesOnlyDeclared reports whether every property name in data, at every
// depth, is declared somewhere in the schema document.
func namesOnlyDeclared(doc []byte, data any) bool {
	names, patterns := declaredNames(doc)
	var ok func(v any) bool
	ok = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !names[k] && !slices.ContainsFunc(patterns, func(re *regexp.Regexp) bool { return re.MatchString(k) }) {
					return false
				}
				if !ok(e) {
					return false
				}
			}
		case []any:
			for _, e := range x {
				if !ok(e) {
					return false
				}
			}
		}
		return true
	}
	return ok(data)
}

// TestJSONSchemaTestSuite runs the JSON-Schema-Test-Suite's draft2020-12
// and draft7 object-shaped cases through CompileSchema and Validate, in
// both modes. Non-strict must agree with the suite on every case. Strict
// must refuse every case the suite calls invalid, and accept every valid
// case whose data names only properties the schema declares.
func TestJSONSchemaTestSuite(t *testing.T) {
	root := suiteDir(t)
	remotes, remotesURL := localRemotes(t, root)
	for _, draft := range []string{"draft2020-12", "draft7"} {
		t.Run(draft, func(t *testing.T) {
			cases := loadSuite(t, filepath.Join(root, draft), remotes, remotesURL)
			var loosePass, strictRefused, strictInvalid, strictMust, strictAccepted int
			for _, c := range cases {
				got, err := runCase(c, false)
				if err != nil {
					t.Errorf("non-strict: %s: compile: %v", c.name(), err)
				} else if got != c.valid {
					t.Errorf("non-strict: %s: accepted=%v, suite says valid=%v", c.name(), got, c.valid)
				} else {
					loosePass++
				}
				got, err = runCase(c, true)
				if err != nil {
					t.Errorf("strict: %s: compile: %v", c.name(), err)
					continue
				}
				if !c.valid {
					strictInvalid++
					if got {
						t.Errorf("strict: %s: accepted a call the suite calls invalid", c.name())
					} else {
						strictRefused++
					}
					continue
				}
				if !namesOnlyDeclared(c.schema, c.data) {
					continue
				}
				strictMust++
				if !got {
					t.Errorf("strict: %s: refused a valid call naming only declared properties", c.name())
				} else {
					strictAccepted++
				}
			}
			remote := 0
			for _, c := range cases {
				if c.dir != "" {
					remote++
				}
			}
			t.Logf("%s: %d object-shaped cases (%d of them with the suite's remote documents, served as local files); non-strict agrees on %d/%d; strict refuses %d/%d invalid, accepts %d/%d valid with only declared names",
				draft, len(cases), remote, loosePass, len(cases), strictRefused, strictInvalid, strictAccepted, strictMust)
		})
	}
}

// openByDesign reports whether strict mode leaves the schema's locations
// open as written: it declares no property names at all (a free-form
// map), or its author let every name through with unevaluatedProperties
// true or a schema.
func openByDesign(doc []byte) bool {
	names, patterns := declaredNames(doc)
	if len(names) == 0 && len(patterns) == 0 {
		return true
	}
	compact := strings.Join(strings.Fields(string(doc)), "")
	return strings.Contains(compact, `"unevaluatedProperties":true`) || strings.Contains(compact, `"unevaluatedProperties":{`)
}

// stripUnevaluatedFalse removes every "unevaluatedProperties": false from
// a schema document.
func stripUnevaluatedFalse(doc []byte) ([]byte, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return doc, false
	}
	found := false
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if b, ok := x["unevaluatedProperties"].(bool); ok && !b {
				delete(x, "unevaluatedProperties")
				found = true
			}
			for k, e := range x {
				if k == "const" || k == "enum" || k == "default" || k == "examples" {
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	out, _ := json.Marshal(v)
	return out, found
}

// TestStrictIsUnevaluatedProperties takes the suite's unevaluatedProperties
// cases, removes the author's "unevaluatedProperties": false, and checks
// that strict mode alone refuses what the keyword refused: strict closing
// is unevaluatedProperties: false at every location, with one difference
// by design: a name the location declares in a branch that did not hold
// (an anyOf branch that did not match, a then whose if failed) is known,
// not refused. So: every case the suite calls valid is accepted; every
// case it calls invalid is refused when it names a property the schema
// declares nowhere, or when the schema without the keyword refuses it
// anyway; the rest (declared in a branch that did not hold) are counted.
func TestStrictIsUnevaluatedProperties(t *testing.T) {
	root := suiteDir(t)
	remotes, remotesURL := localRemotes(t, root)
	cases := loadSuite(t, filepath.Join(root, "draft2020-12"), remotes, remotesURL)
	var n, agree, declaredElsewhere, open int
	for _, c := range cases {
		if c.file != "unevaluatedProperties.json" {
			continue
		}
		doc, found := stripUnevaluatedFalse(c.schema)
		if !found {
			continue
		}
		n++
		c.schema = doc
		got, err := runCase(c, true)
		if err != nil {
			t.Errorf("%s: compile: %v", c.name(), err)
			continue
		}
		loose, err := runCase(c, false)
		if err != nil {
			t.Errorf("%s: compile: %v", c.name(), err)
			continue
		}
		switch {
		case c.valid && !got:
			t.Errorf("%s: strict refused a call the suite calls valid", c.name())
		case c.valid:
			agree++
		case !got:
			agree++
		case !loose:
			t.Errorf("%s: strict accepted a call the schema refuses even without the keyword", c.name())
		case openByDesign(c.schema):
			open++
		case !namesOnlyDeclared(c.schema, c.data):
			t.Errorf("%s: strict accepted a call naming a property the schema declares nowhere", c.name())
		default:
			declaredElsewhere++
		}
	}
	t.Logf("unevaluatedProperties.json with the written false removed: strict agrees on %d/%d object-shaped cases; accepted by design: %d (each name declared at its location, in a branch that did not hold), %d (the location is open as written: it declares no names, or the author wrote unevaluatedProperties true or a schema there)", agree, n, declaredElsewhere, open)
	if n == 0 {
		t.Fatal("no cases")
	}
}
