// Command bench is the bench policy (policies/testdata/bench/bench.rego)
// written in Go against toolgate's guest ABI. Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bench_go.wasm .
//
// It denies a limit over 50, an organism outside human/mouse/rat, a query
// holding an e-mail address and more than 20 ids, and injects the trace id.
package main

import (
	"encoding/json"
	"regexp"
	"unsafe"
)

func main() {}

// toolgate_abi_version is the toolgate ABI this module speaks.
//
//go:wasmexport toolgate_abi_version
func abiVersion() int32 { return 1 }

var in []byte

// toolgate_alloc returns room for the n-byte input document. The buffer
// stays referenced by in, so the garbage collector keeps it.
//
//go:wasmexport toolgate_alloc
func alloc(n uint32) uint32 {
	if uint32(cap(in)) < n || n == 0 {
		in = make([]byte, max(n, 1024))
	}
	in = in[:n]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

type input struct {
	Arguments struct {
		Limit    json.Number `json:"limit"`
		Organism *string     `json:"organism"`
		Query    *string     `json:"query"`
		IDs      []any       `json:"ids"`
	} `json:"arguments"`
	TraceID string `json:"trace_id"`
}

var (
	organisms = map[string]bool{"human": true, "mouse": true, "rat": true}
	email     = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	out       []byte
)

// toolgate_validate decides on the input document at ptr and returns the
// decision document as (ptr << 32) | len.
//
//go:wasmexport toolgate_validate
func validate(ptr, n uint32) uint64 {
	var doc input
	out = out[:0]
	if err := json.Unmarshal(in[:n], &doc); err != nil {
		out = append(out, `{"error":`...)
		out = appendString(out, err.Error())
		out = append(out, '}')
		return pack(out)
	}
	a := &doc.Arguments
	out = append(out, `{"deny":[`...)
	first := true
	deny := func(msg, path string) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, `{"msg":`...)
		out = appendString(out, msg)
		if path != "" {
			out = append(out, `,"path":`...)
			out = appendString(out, path)
		}
		out = append(out, '}')
	}
	if f, err := a.Limit.Float64(); err == nil && f > 50 {
		deny("limit must be at most 50", "/limit")
	}
	if a.Organism == nil || !organisms[*a.Organism] {
		deny("organism not allowed", "/organism")
	}
	if a.Query != nil && email.MatchString(*a.Query) {
		deny("query holds an e-mail address", "/query")
	}
	if len(a.IDs) > 20 {
		deny("too many ids", "")
	}
	out = append(out, `],"inject":{"X-Trace-Id":`...)
	out = appendString(out, doc.TraceID)
	out = append(out, `}}`...)
	return pack(out)
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

func pack(b []byte) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}
