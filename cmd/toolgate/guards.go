package main

import (
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/rego"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/tracing"
	"github.com/toolgate/toolgate/wasm"
)

// Compile-time guards: what cmd wires in satisfies the interfaces its
// consumers declare. They sit here, in the one package that imports both
// sides, because proxy and policies must not import what implements their
// interfaces (that would link OPA, wazero and clickhouse-go into the data
// path). The implementations' own packages guard the rest.
var (
	_ proxy.Checker     = (*policies.Set)(nil)
	_ proxy.Recorder    = (*sink.Queue)(nil)
	_ policies.RegoHost = rego.Host{}
	_ policies.WasmHost = wasm.Host{}
	_ sink.Writer       = (*clickhouse.Writer)(nil)
	_ proxy.Tracer      = (*tracing.Exporter)(nil)
)
