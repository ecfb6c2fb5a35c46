package mcppin

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/atomicfile"
	"github.com/toolgate/toolgate/internal/canonjson"
	"github.com/toolgate/toolgate/internal/yamlfile"
)

// LockVersion is the version of the lock file format this package writes
// and reads.
const LockVersion = 1

// MaxLockBytes bounds a lock file's size.
const MaxLockBytes = 64 << 20

// lockHeader starts every lock file written.
const lockHeader = `# toolgate MCP tool pins, written by "toolgate mcp pin".
# Review a change before committing it: a digest that changed is a tool
# definition that changed. The definitions are the servers' own text.
`

// Lock is a lock file: the reviewed pins of MCP tools. It is plain data;
// read it with ReadLock or ParseLock and write it with WriteLock.
type Lock struct {
	// Version is the format's version (LockVersion).
	Version int `yaml:"version"`
	// Pins lists one entry per (route, server, tool), sorted by them.
	Pins []LockEntry `yaml:"pins"`
}

// LockEntry is one pinned tool.
type LockEntry struct {
	// Route is the MCP route's name (tools[].name in the configuration).
	Route string `yaml:"route"`
	// Server is the server's key (ServerKey of its URL).
	Server string `yaml:"server"`
	// Tool is the tool's name as the server lists it.
	Tool string `yaml:"tool"`
	// PinnedAt is when the definition was pinned (RFC 3339, UTC).
	PinnedAt time.Time `yaml:"pinned_at"`
	// Digest is Definition.Digest (64 hex digits).
	Digest string `yaml:"digest"`
	// Fields are Definition.Fields: each present field's digest.
	Fields map[string]string `yaml:"fields"`
	// Definition is the pinned definition as indented canonical JSON, for
	// review and to list in place of a changed tool; optional. When set it
	// must match Digest.
	Definition string `yaml:"definition,omitempty"`
}

// def is the entry's Definition.
func (e *LockEntry) def() Definition {
	return Definition{Name: e.Tool, Digest: e.Digest, Fields: maps.Clone(e.Fields)}
}

// ReadLock reads and checks a lock file (ParseLock); a file that does not
// exist is an empty lock and fs.ErrNotExist is not returned.
func ReadLock(path string) (*Lock, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Lock{Version: LockVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lock file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxLockBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read lock file %s: %w", path, err)
	}
	if len(data) > MaxLockBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrBadLockFile, path, MaxLockBytes)
	}
	return ParseLock(path, data)
}

// ParseLock reads a lock file's bytes strictly (unknown keys are errors)
// and checks every entry: the version, the names, the server key, the
// digests (64 hex digits, the digest agreeing with the field digests, the
// definition when given agreeing with both), and no entry twice. Errors
// wrap ErrBadLockFile and name the file, the line and the field
// ("pins.lock:12: pins[1].digest: ...").
func ParseLock(path string, data []byte) (*Lock, error) {
	var l Lock
	if err := yamlfile.Decode(path, data, &l); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: the file is empty", ErrBadLockFile, path)
		}
		return nil, fmt.Errorf("%w: %w", ErrBadLockFile, err)
	}
	if field, err := l.check(); err != nil {
		var root yaml.Node
		_ = yaml.Unmarshal(data, &root)
		return nil, fmt.Errorf("%w: %s:%d: %s: %w", ErrBadLockFile, path, yamlfile.LineOf(&root, field), field, err)
	}
	return &l, nil
}

// check checks a decoded lock; it returns the field at fault.
func (l *Lock) check() (string, error) {
	if l.Version != LockVersion {
		return "version", fmt.Errorf("version %d; this toolgate reads version %d", l.Version, LockVersion)
	}
	seen := make(map[[3]string]int, len(l.Pins))
	for i := range l.Pins {
		e := &l.Pins[i]
		p := "pins[" + strconv.Itoa(i) + "]"
		switch {
		case e.Route == "" || len(e.Route) > 256:
			return p + ".route", errors.New("a route name has 1 to 256 characters")
		case e.Tool == "" || len(e.Tool) > MaxToolName:
			return p + ".tool", fmt.Errorf("an MCP tool name has 1 to %d bytes", MaxToolName)
		case e.PinnedAt.IsZero():
			return p + ".pinned_at", errors.New("missing; the time the tool was pinned (RFC 3339)")
		}
		u, err := url.Parse(e.Server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || ServerKey(u) != e.Server {
			return p + ".server", errors.New("not a server key: write the server's URL as http(s)://host[:port]/path, lower-case, without the default port or a query")
		}
		if j, dup := seen[[3]string{e.Route, e.Server, e.Tool}]; dup {
			return p + ".tool", fmt.Errorf("pinned twice for this route and server (also pins[%d])", j)
		}
		seen[[3]string{e.Route, e.Server, e.Tool}] = i
		if !isDigest(e.Digest) {
			return p + ".digest", errors.New("not a SHA-256 digest (64 lower-case hex digits)")
		}
		if _, ok := e.Fields[FieldName]; !ok {
			return p + ".fields", errors.New("no name digest: every definition has a name")
		}
		for _, f := range slices.Sorted(maps.Keys(e.Fields)) {
			if !slices.Contains(Fields, f) {
				return p + ".fields." + f, fmt.Errorf("unknown field; expected one of %s", fieldList(Fields))
			}
			if !isDigest(e.Fields[f]) {
				return p + ".fields." + f, errors.New("not a SHA-256 digest (64 lower-case hex digits)")
			}
		}
		if e.def().fieldsDigest() != e.Digest {
			return p + ".digest", errors.New("does not match the field digests: the entry was edited by hand")
		}
		if e.Definition != "" {
			if err := checkNames([]byte(e.Definition)); err != nil {
				return p + ".definition", err
			}
			dec := json.NewDecoder(strings.NewReader(e.Definition))
			dec.UseNumber()
			var t map[string]any
			if err := dec.Decode(&t); err != nil || t == nil {
				return p + ".definition", errors.New("not a JSON object")
			}
			d := Digest(t)
			switch {
			case d.Name != e.Tool:
				return p + ".definition", errors.New("its name is not the entry's tool")
			case d.Digest != e.Digest:
				return p + ".definition", fmt.Errorf("does not match the digest (fields %s differ)", fieldList(Diff(e.def(), d)))
			}
		}
	}
	return "", nil
}

func isDigest(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// WriteLock writes a lock file atomically: through a temporary file in the
// same folder, synced, then renamed over path (mode 0644), so a reader sees
// the old file or the new one, never a part. Entries are written sorted.
func WriteLock(path string, l *Lock) error {
	data, err := l.encode()
	if err == nil {
		err = atomicfile.WriteFile(path, data, 0o644)
	}
	if err != nil {
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	return nil
}

// encode is the lock file's text, entries sorted.
func (l *Lock) encode() ([]byte, error) {
	l.Version = LockVersion
	l.sort()
	var buf bytes.Buffer
	buf.WriteString(lockHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(l); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (l *Lock) sort() {
	slices.SortFunc(l.Pins, func(a, b LockEntry) int {
		if c := strings.Compare(a.Route, b.Route); c != 0 {
			return c
		}
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
}

// Entry makes the lock entry of one listed tool pinned at at, with its
// definition as indented canonical JSON.
func Entry(route, server string, tool map[string]any, at time.Time) LockEntry {
	d := Digest(tool)
	var doc bytes.Buffer
	_ = json.Indent(&doc, canonjson.Append(nil, tool), "", "  ")
	return LockEntry{Route: route, Server: server, Tool: d.Name, PinnedAt: at.UTC().Truncate(time.Second),
		Digest: d.Digest, Fields: d.Fields, Definition: doc.String()}
}

// Update is what Merge changed in a lock for one server.
type Update struct {
	// New, Changed and Removed name the tools added, replaced and dropped,
	// sorted; Fields maps each changed tool to the fields that changed.
	New, Changed, Removed []string
	Fields                map[string][]string
	// Same counts the tools whose entries were kept as they were.
	Same int
	// Skipped counts the tools not pinned: no string name, or one longer
	// than MaxToolName.
	Skipped int
}

// Merge updates the lock's entries for (route, server) to the server's
// whole list: tools it lists for the first time are added, tools listed
// differently are replaced (pinned at at), and entries of tools it no
// longer lists are dropped; other servers' entries are kept. Tools
// without a string name are skipped.
func (l *Lock) Merge(route, server string, tools []map[string]any, at time.Time) Update {
	u := Update{Fields: map[string][]string{}}
	old := map[string]int{}
	for i := range l.Pins {
		if l.Pins[i].Route == route && l.Pins[i].Server == server {
			old[l.Pins[i].Tool] = i
		}
	}
	listed := map[string]bool{}
	var added []LockEntry
	for _, t := range tools {
		e := Entry(route, server, t, at)
		if e.Tool == "" || len(e.Tool) > MaxToolName {
			u.Skipped++
			continue
		}
		if listed[e.Tool] {
			continue
		}
		listed[e.Tool] = true
		i, ok := old[e.Tool]
		switch {
		case !ok:
			u.New = append(u.New, e.Tool)
			added = append(added, e)
		case l.Pins[i].Digest == e.Digest:
			u.Same++
			if l.Pins[i].Definition == "" {
				l.Pins[i].Definition = e.Definition
			}
		default:
			u.Changed = append(u.Changed, e.Tool)
			u.Fields[e.Tool] = Diff(l.Pins[i].def(), e.def())
			l.Pins[i] = e
		}
	}
	kept := l.Pins[:0]
	for _, e := range l.Pins {
		if e.Route == route && e.Server == server && !listed[e.Tool] {
			u.Removed = append(u.Removed, e.Tool)
			continue
		}
		kept = append(kept, e)
	}
	l.Pins = append(kept, added...)
	l.sort()
	slices.Sort(u.New)
	slices.Sort(u.Changed)
	slices.Sort(u.Removed)
	return u
}

// Load pins every entry of a lock file (Source "lock_file"), replacing a
// pin the store holds for the same tool. A lock past the store's bounds
// is refused whole: the limits must be raised for it.
func (p *Pins) Load(l *Lock) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	groups := map[serverKey][]*LockEntry{}
	for i := range l.Pins {
		e := &l.Pins[i]
		k := serverKey{e.Route, e.Server}
		groups[k] = append(groups[k], e)
	}
	n := len(p.servers)
	for k, es := range groups {
		sp := p.servers[k]
		if sp == nil {
			n++
		}
		if len(es) > p.lim.MaxTools {
			return fmt.Errorf("load pins: route %s, server %s: %d tools, over the limit of %d", k.route, k.server, len(es), p.lim.MaxTools)
		}
	}
	if n > p.lim.MaxServers {
		return fmt.Errorf("load pins: %d servers, over the limit of %d", n, p.lim.MaxServers)
	}
	for k, es := range groups {
		sp := p.servers[k]
		if sp == nil {
			sp = &serverPins{tools: map[string]*pin{}}
			p.servers[k] = sp
		}
		for _, e := range es {
			pn := sp.tools[e.Tool]
			if pn == nil {
				if len(sp.tools) >= p.lim.MaxTools {
					return fmt.Errorf("load pins: route %s, server %s: over the limit of %d tools", k.route, k.server, p.lim.MaxTools)
				}
				pn = &pin{}
				sp.tools[e.Tool] = pn
			}
			*pn = pin{def: e.def(), at: e.PinnedAt, source: SourceLockFile, doc: pn.doc}
			var doc json.RawMessage
			if e.Definition != "" {
				var t map[string]any
				dec := json.NewDecoder(strings.NewReader(e.Definition))
				dec.UseNumber()
				if dec.Decode(&t) == nil {
					doc = canonjson.Append(nil, t)
				}
			}
			sp.keep(pn, doc, p.lim)
		}
	}
	return nil
}
