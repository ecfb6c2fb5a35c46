package wasm

import (
	"bytes"
	"errors"
	"fmt"
)

// maxModuleBytes bounds a module (or bundle) Load accepts.
const maxModuleBytes = 64 << 20

// pageSize is a WebAssembly memory page.
const pageSize = 65536

// maxPages is the most pages a 32-bit WebAssembly memory may have (4 GiB).
const maxPages = 65536

// Section ids of the WebAssembly binary format.
const (
	secImport = 2
	secMemory = 5
	secExport = 7
)

// limits is a memory's declared size in pages.
type limits struct {
	min    uint32
	max    uint32
	hasMax bool
}

// moduleInfo is what toolgate reads from a module's binary before handing
// it to wazero: its imports, exports and memories.
type moduleInfo struct {
	imports  []importEntry
	exports  map[string]byte // name to kind (0 func, 1 table, 2 memory, 3 global)
	memories []limits        // imported first, then defined

	// memImport is the byte range of the memory import entry (start, end)
	// inside the import section's payload, and importSec the section's
	// range in the module (header included); both set only when the module
	// imports its memory.
	memImport [2]int
	importSec [3]int // section start, payload start, end
	importN   uint32 // number of import entries
	memSecAt  int    // offset where a memory section would go (after imports, functions and tables)
}

type importEntry struct {
	module, name string
	kind         byte
}

var errBadModule = errors.New("not a WebAssembly module")

// reader is a bounded cursor over bytes.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("malformed module at byte %d: %s", r.off, what)
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("LEB128 too long")
	return 0
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("length past the end")
		return nil
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

func (r *reader) limits() limits {
	flag := r.byte()
	if flag > 1 {
		r.fail("shared or 64-bit memory")
		return limits{}
	}
	l := limits{min: r.u32()}
	if flag == 1 {
		l.max, l.hasMax = r.u32(), true
	}
	return l
}

// parseModule reads the import, memory and export sections of a module,
// checking only what it reads; wazero validates the rest.
func parseModule(b []byte) (*moduleInfo, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) {
		return nil, errBadModule
	}
	if !bytes.Equal(b[4:8], []byte{1, 0, 0, 0}) {
		return nil, errors.New("unsupported WebAssembly binary version")
	}
	info := &moduleInfo{exports: map[string]byte{}, memImport: [2]int{-1, -1}}
	r := &reader{b: b, off: 8}
	for r.off < len(b) && r.err == nil {
		start := r.off
		id := r.byte()
		size := r.u32()
		payload := r.bytes(size)
		if r.err != nil {
			break
		}
		pstart := r.off - len(payload)
		s := &reader{b: b[:pstart+len(payload)], off: pstart}
		switch id {
		case secImport:
			info.importSec = [3]int{start, pstart, pstart + len(payload)}
			n := s.u32()
			info.importN = n
			for i := uint32(0); i < n && s.err == nil; i++ {
				at := s.off
				e := importEntry{module: s.name(), name: s.name(), kind: s.byte()}
				switch e.kind {
				case 0:
					s.u32()
				case 1:
					s.byte()
					s.limits()
				case 2:
					info.memories = append(info.memories, s.limits())
					info.memImport = [2]int{at, s.off}
				case 3:
					s.byte()
					s.byte()
				default:
					s.fail("unknown import kind")
				}
				info.imports = append(info.imports, e)
			}
		case secMemory:
			n := s.u32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				info.memories = append(info.memories, s.limits())
			}
		case secExport:
			n := s.u32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				name := s.name()
				kind := s.byte()
				s.u32()
				info.exports[name] = kind
			}
		}
		if s.err != nil {
			return nil, s.err
		}
		// A memory section goes after type (1), import (2), function (3)
		// and table (4) sections.
		if id >= 1 && id <= 4 {
			info.memSecAt = r.off
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if info.memSecAt == 0 {
		info.memSecAt = 8
	}
	return info, nil
}

func appendU32(dst []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}
