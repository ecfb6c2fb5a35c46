package main

import "github.com/toolgate/toolgate/policies"

// wasmHost returns the process's WASM host, shared by every configuration
// the process loads; nil until package wasm is wired in.
func wasmHost() policies.WasmHost { return nil }
