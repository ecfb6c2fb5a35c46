package wasm

import (
	"errors"
	"fmt"
)

// Exports instrument adds to every module.
const (
	// interruptExport is a mutable i32 global: the host sets it to 1 to
	// stop the module at its next loop iteration (it traps).
	interruptExport = "toolgate_interrupt"
	// startExport is the module's start function, when it had one: it is
	// called after instantiation, interruptible like any other call.
	startExport = "toolgate_start"
)

// section is one section of a module binary.
type section struct {
	id      byte
	payload []byte
}

// sectionOrder is where each known section goes; custom sections (0) keep
// their place.
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// checkEvery is how many loop iterations and function calls run between
// two checks of the interrupt flag.
const checkEvery = 1 << 12

// instrument rewrites a module so toolgate can stop it cheaply. At the
// head of every loop and the entry of every function, a countdown global
// is decremented; every checkEvery times, the code
//
//   - runs memory.grow 0, which wazero serves in Go: the goroutine reaches a
//     point where Go's scheduler and garbage collector can stop it (wasm
//     code cannot be preempted, so a module that loops without calling out
//     would otherwise stall every stop-the-world of the process), and
//   - traps (unreachable) when the toolgate_interrupt global is set, as
//     the host does when the call's deadline passes.
//
// Loops and calls are the only ways wasm code runs on, so a module stops
// within a few microseconds of its deadline. wazero's own mechanism
// (WithCloseOnContextDone) leaves the compiled code for Go at every loop
// iteration, which made loop-heavy policies (OPA's JSON parser and regular
// expressions) 5-20 times slower.
//
// It also moves a start function to the export toolgate_start, so it runs
// interruptible after instantiation, and, when memoryMax > 0, declares the
// module's memory with that maximum: a defined memory keeps its minimum,
// an imported one (OPA modules import env.memory) becomes a defined one,
// so each instance owns its memory. The host enforces the real limit (see
// linearMemory).
func instrument(b []byte, info *moduleInfo, memoryMax uint32) ([]byte, error) {
	var secs []section
	r := &reader{b: b, off: 8}
	for r.off < len(b) && r.err == nil {
		id := r.byte()
		p := r.bytes(r.u32())
		secs = append(secs, section{id, p})
	}
	if r.err != nil {
		return nil, r.err
	}
	find := func(id byte) int {
		for i, s := range secs {
			if s.id == id {
				return i
			}
		}
		return -1
	}
	set := func(id byte, payload []byte) {
		if i := find(id); i >= 0 {
			secs[i].payload = payload
			return
		}
		at := len(secs)
		for i, s := range secs {
			if s.id != 0 && sectionOrder[s.id] > sectionOrder[id] {
				at = i
				break
			}
		}
		secs = append(secs, section{})
		copy(secs[at+1:], secs[at:])
		secs[at] = section{id, payload}
	}
	if _, ok := info.exports[interruptExport]; ok {
		return nil, fmt.Errorf("module exports %s, a name toolgate reserves", interruptExport)
	}

	// Imports: count functions and globals; drop an imported memory.
	var importedFuncs, importedGlobals uint32
	for _, im := range info.imports {
		switch im.kind {
		case 0:
			importedFuncs++
		case 3:
			importedGlobals++
		}
	}
	if memoryMax > 0 && (info.memImport[0] >= 0 || len(info.memories) > 0) {
		if len(info.memories) != 1 {
			return nil, errors.New("module declares more than one memory")
		}
		if info.memImport[0] >= 0 {
			var imp []byte
			imp = appendU32(imp, info.importN-1)
			ir := &reader{b: b, off: info.importSec[1]}
			ir.u32()
			imp = append(imp, b[ir.off:info.memImport[0]]...)
			imp = append(imp, b[info.memImport[1]:info.importSec[2]]...)
			i := find(secImport)
			if info.importN == 1 {
				secs = append(secs[:i], secs[i+1:]...)
			} else {
				secs[i].payload = imp
			}
		}
		var mem []byte
		mem = appendU32(mem, 1)
		mem = append(mem, 1)
		mem = appendU32(mem, info.memories[0].min)
		mem = appendU32(mem, memoryMax)
		set(secMemory, mem)
	}

	// The interrupt global, after the defined ones.
	var defined uint32
	var rest []byte
	if i := find(6); i >= 0 {
		gr := &reader{b: secs[i].payload}
		defined = gr.u32()
		rest = secs[i].payload[gr.off:]
	}
	g := importedGlobals + defined // the interrupt flag; g+1 the countdown
	var glob []byte
	glob = appendU32(glob, defined+2)
	glob = append(glob, rest...)
	glob = append(glob, 0x7f, 0x01, 0x41, 0x00, 0x0b) // mut i32 = i32.const 0
	glob = append(glob, 0x7f, 0x01, 0x41)             // mut i32 = i32.const checkEvery
	glob = appendS32(glob, checkEvery)
	glob = append(glob, 0x0b)
	set(6, glob)

	// Exports: the interrupt global, and the start function.
	var exps uint32
	rest = nil
	if i := find(secExport); i >= 0 {
		er := &reader{b: secs[i].payload}
		exps = er.u32()
		rest = secs[i].payload[er.off:]
	}
	var exp []byte
	add := 1
	var startFn []byte
	if i := find(8); i >= 0 {
		if _, ok := info.exports[startExport]; ok {
			return nil, fmt.Errorf("module exports %s, a name toolgate reserves", startExport)
		}
		startFn = secs[i].payload
		secs = append(secs[:i], secs[i+1:]...)
		add++
	}
	exp = appendU32(exp, exps+uint32(add))
	exp = append(exp, rest...)
	exp = appendU32(exp, uint32(len(interruptExport)))
	exp = append(exp, interruptExport...)
	exp = append(exp, 3)
	exp = appendU32(exp, g)
	if startFn != nil {
		exp = appendU32(exp, uint32(len(startExport)))
		exp = append(exp, startExport...)
		exp = append(exp, 0)
		exp = append(exp, startFn...)
	}
	set(secExport, exp)

	// Code: the check at every loop head.
	if i := find(10); i >= 0 {
		code, err := instrumentCode(secs[i].payload, g, len(info.memories) > 0)
		if err != nil {
			return nil, err
		}
		secs[i].payload = code
	}
	_ = importedFuncs

	out := make([]byte, 0, len(b)+len(b)/16+64)
	out = append(out, b[:8]...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.payload)))
		out = append(out, s.payload...)
	}
	return out, nil
}

// instrumentCode rewrites the code section: the check at each function's
// entry and after each loop's block type.
func instrumentCode(payload []byte, g uint32, hasMemory bool) ([]byte, error) {
	ctr := appendU32(nil, g+1)
	var check []byte
	check = append(append(append(check, 0x23), ctr...), 0x41, 0x01, 0x6b) // countdown - 1
	check = append(append(check, 0x24), ctr...)                           // store it
	check = append(append(check, 0x23), ctr...)
	check = append(check, 0x45, 0x04, 0x40) // if it reached 0:
	check = append(check, 0x41)
	check = appendS32(check, checkEvery)
	check = append(append(check, 0x24), ctr...) // reset it,
	if hasMemory {
		check = append(check, 0x41, 0x00, 0x40, 0x00, 0x1a) // memory.grow 0 (a Go safe point),
	}
	check = append(append(check, 0x23), appendU32(nil, g)...)
	check = append(check, 0x04, 0x40, 0x00, 0x0b) // trap when interrupted
	check = append(check, 0x0b)

	r := &reader{b: payload}
	n := r.u32()
	out := make([]byte, 0, len(payload)+len(payload)/8)
	out = appendU32(out, n)
	var body []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		fb := r.bytes(size)
		if r.err != nil {
			break
		}
		var err error
		body, err = instrumentBody(body[:0], fb, check)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

func instrumentBody(dst, fb, check []byte) ([]byte, error) {
	r := &reader{b: fb}
	locals := r.u32()
	for i := uint32(0); i < locals && r.err == nil; i++ {
		r.u32()
		r.valType()
	}
	if r.err != nil {
		return nil, r.err
	}
	dst = append(dst, fb[:r.off]...)
	dst = append(dst, check...)
	last := r.off
	for r.off < len(fb) && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x03: // loop
			r.blockType()
			dst = append(dst, fb[last:r.off]...)
			dst = append(dst, check...)
			last = r.off
		case op == 0x02 || op == 0x04 || op == 0x06: // block, if, try
			r.blockType()
		case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x18: // catch, throw, rethrow, delegate
			r.u32()
		case op == 0x0c || op == 0x0d || op == 0xd4 || op == 0xd5: // br, br_if, br_on_null, br_on_non_null
			r.u32()
		case op == 0x0e: // br_table
			n := r.u32()
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case op == 0x10 || op == 0x12 || op == 0x14 || op == 0x15 || op == 0xd2: // call, return_call, call_ref, return_call_ref, ref.func
			r.u32()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.valType()
			}
		case op == 0x1f: // try_table
			r.blockType()
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				switch r.byte() {
				case 0, 1:
					r.u32()
					r.u32()
				case 2, 3:
					r.u32()
				default:
					r.fail("unknown catch kind")
				}
			}
		case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memarg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41: // i32.const
			r.s64()
		case op == 0x42: // i64.const
			r.s64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xd0: // ref.null
			r.heapType()
		case op == 0xfc:
			switch sub := r.u32(); {
			case sub <= 7:
			case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
				r.u32()
				r.u32()
			case sub <= 17:
				r.u32()
			default:
				r.fail(fmt.Sprintf("unknown instruction 0xfc %d", sub))
			}
		case op == 0xfd:
			switch sub := r.u32(); {
			case sub <= 11 || sub == 92 || sub == 93:
				r.memarg()
			case sub == 12 || sub == 13:
				r.bytes(16)
			case sub >= 21 && sub <= 34:
				r.byte()
			case sub >= 84 && sub <= 91:
				r.memarg()
				r.byte()
			}
		case op == 0xfe:
			if sub := r.u32(); sub == 3 {
				r.byte()
			} else {
				r.memarg()
			}
		case op <= 0x01 || op == 0x05 || op == 0x0a || op == 0x0b || op == 0x0f || op == 0x19 || op == 0x1a || op == 0x1b ||
			op >= 0x45 && op <= 0xc4 || op == 0xd1 || op == 0xd3:
			// no immediates
		default:
			r.fail(fmt.Sprintf("instruction 0x%02x, which toolgate cannot instrument", op))
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(dst, fb[last:]...), nil
}

func (r *reader) s64() {
	for i := 0; i < 10; i++ {
		if r.byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
	r.fail("LEB128 too long")
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 {
		r.u32() // memory index (multi-memory)
	}
	r.u32() // offset (memory64 offsets are u64: read as LEB)
}

func (r *reader) blockType() {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return
	}
	switch c := r.b[r.off]; {
	case c == 0x40 || c >= 0x7b && c <= 0x7f || c == 0x70 || c == 0x6f:
		r.off++
	case c == 0x63 || c == 0x64: // (ref null? ht)
		r.off++
		r.heapType()
	default:
		r.s64() // type index
	}
}

func (r *reader) valType() {
	if c := r.byte(); c == 0x63 || c == 0x64 {
		r.heapType()
	}
}

func (r *reader) heapType() {
	r.s64()
}

// appendS32 appends v as a signed LEB128.
func appendS32(dst []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}
