package mcppin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDigest reads arbitrary text as a tools/list result: no panic; each
// tool's digest does not depend on how it is spelled (members re-ordered
// and white space dropped by a re-encoding, then indented); Diff of a tool
// with itself is empty; and the digest agrees with the one a lock entry
// made from the tool carries.
func FuzzDigest(f *testing.F) {
	f.Add([]byte(`{"tools":[` + pay + `]}`))
	f.Add([]byte(`{"tools":[` + refund + `,{"name":"a","title":null,"_meta":{"b":1e400},"x":[1.0,-0,"\u00e9"]}]}`))
	f.Add([]byte(`{"tools":[{"name":"n","inputSchema":{"maximum":12345678901234567891}}],"nextCursor":"c"}`))
	f.Add([]byte(`{"tools":[{"name":"\ud800","description":"\u0000"}]}`))
	f.Add([]byte(`{"tools":[{"name":"- a: #b\n  c","description":"  lead\ttab \r\n|- trail "}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tools, _, err := ParseTools(data)
		if err != nil {
			return
		}
		for _, tl := range tools {
			d := Digest(tl)
			if Diff(d, d) != nil || len(d.Digest) != 64 {
				t.Fatalf("Digest = %+v", d)
			}
			re, err := json.Marshal(tl)
			if err != nil {
				t.Fatalf("re-encoding %v: %v", tl, err)
			}
			var ind bytes.Buffer
			if err := json.Indent(&ind, re, " ", "\t"); err != nil {
				t.Fatal(err)
			}
			back, _, err := ParseTools([]byte(`{"tools":[` + ind.String() + `]}`))
			if err != nil {
				t.Fatalf("ParseTools of the re-encoding %s: %v", re, err)
			}
			if d2 := Digest(back[0]); d2.Digest != d.Digest {
				t.Fatalf("spelling changed the digest of %s (fields %v)", re, Diff(d, d2))
			}
			// Whatever a server lists, the lock file written from it
			// reads back.
			var l Lock
			if u := l.Merge(route, server, []map[string]any{tl}, at); len(u.New) == 1 {
				if l.Pins[0].Digest != d.Digest {
					t.Fatalf("the lock entry's digest %s, Digest %s", l.Pins[0].Digest, d.Digest)
				}
				data, err := l.encode()
				if err != nil {
					t.Fatal(err)
				}
				back, err := ParseLock("pins", data)
				if err != nil {
					t.Fatalf("the lock written from %s is refused: %v\n%s", re, err, data)
				}
				if back.Pins[0].Definition != l.Pins[0].Definition {
					t.Fatalf("definition read back as %q, written %q", back.Pins[0].Definition, l.Pins[0].Definition)
				}
			}
		}
	})
}

// FuzzParseLock reads arbitrary bytes as a lock file: no panic, and a lock
// it accepts is written and read back the same.
func FuzzParseLock(f *testing.F) {
	var l Lock
	l.Merge(route, server, []map[string]any{{"name": "pay", "description": "Pay"}}, at)
	path := filepath.Join(f.TempDir(), "pins")
	if err := WriteLock(path, &l); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	f.Add(good)
	f.Add([]byte("version: 1\npins: []\n"))
	f.Add([]byte(`{"version":1,"pins":[{"route":"r"}]}`))
	f.Add([]byte("version: 1\npins:\n  - &a {route: r}\n  - *a\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock("pins", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), ErrBadLockFile.Error()) {
				t.Fatalf("error %q does not start with %q", err, ErrBadLockFile)
			}
			return
		}
		p := filepath.Join(dir, "pins")
		if err := WriteLock(p, l); err != nil {
			t.Fatal(err)
		}
		back, err := ReadLock(p)
		if err != nil {
			t.Fatalf("a lock written from an accepted one is refused: %v", err)
		}
		if len(back.Pins) != len(l.Pins) {
			t.Fatalf("%d pins read back, %d written", len(back.Pins), len(l.Pins))
		}
		for i := range l.Pins {
			if back.Pins[i].Digest != l.Pins[i].Digest || back.Pins[i].Definition != l.Pins[i].Definition {
				t.Fatalf("pin %d read back as %+v, written %+v", i, back.Pins[i], l.Pins[i])
			}
		}
		_ = New(Limits{}).Load(back)
	})
}

// FuzzFilter filters arbitrary results: no panic; passing every tool
// returns the bytes unchanged; hiding every tool leaves a result that
// ParseTools reads with no tools.
func FuzzFilter(f *testing.F) {
	f.Add([]byte(`{"tools":[` + pay + `,` + refund + `],"nextCursor":"x"}`))
	f.Add([]byte(`{"tools":null}`))
	f.Add([]byte(`{"tools":[1,"a",{"name":7}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Filter(data, func(string) (ListAction, json.RawMessage) { return ListAsIs, nil })
		if err != nil {
			return
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("passing every tool changed %q into %q", data, out)
		}
		out, err = Filter(data, func(string) (ListAction, json.RawMessage) { return ListHidden, nil })
		if err != nil {
			t.Fatalf("hiding every tool: %v", err)
		}
		if tools, _, err := ParseTools(out); err == nil && len(tools) != 0 {
			t.Fatalf("hiding every tool left %s", out)
		}
	})
}
