package proxy

import (
	"maps"
	"slices"

	"github.com/toolgate/toolgate/policies"
)

// Protocols, as named in ToolConfig.Protocol.
const (
	ProtocolHTTP = "http"
	ProtocolMCP  = "mcp"
)

// Unknown-tool modes, as named in MCPConfig.UnknownTool.
const (
	// UnknownToolFetch asks the server for its tool list (a tools/list of
	// toolgate's own, with the caller's session headers) when a call names a
	// tool whose schema toolgate has not seen; a tool the server does not
	// list is refused as validation/unknown_tool.
	UnknownToolFetch = "fetch"
	// UncheckedPass forwards a tools/call no schema can check (see
	// MCPConfig.Unchecked), recorded as inspected=false.
	UncheckedPass = "pass"
	// UncheckedRefuse refuses it as policy/unchecked.
	UncheckedRefuse = "refuse"
	// UnknownToolPass forwards such a call unchecked; its event says
	// inspected=false.
	UnknownToolPass = "pass"
)

// Defaults for MCPConfig fields left at their zero value.
const (
	DefaultMCPMaxTools        = 1000
	DefaultMCPMaxSchemaBytes  = 256 << 10
	DefaultMCPMaxMessageBytes = 4 << 20
)

// MCPConfig configures an MCP route (a tool whose protocol is "mcp"): how
// tools/call arguments are checked against the schemas learned from the
// server's tools/list answers. The route's strict field applies to learned
// schemas too (default true); its policies see every tools/call.
type MCPConfig struct {
	// UnknownTool says what happens to a tools/call naming a tool whose
	// schema has not been seen: "fetch" (the default; toolgate lists the
	// server's tools itself, and a tool not listed is refused) or "pass"
	// (forwarded unchecked, recorded as inspected=false).
	UnknownTool string `yaml:"unknown_tool"`
	// Unchecked says what happens to a tools/call that no schema can check:
	// its tool's listed schema cannot be used (it does not compile, names a
	// document toolgate does not fetch, or is over max_schema_bytes), the
	// tool is past max_tools, or toolgate's own tools/list failed. "pass"
	// (the default) forwards it, recorded as inspected=false; "refuse"
	// answers it as a policy refusal (reason "unchecked"), so that nothing
	// unchecked reaches the server. Cannot be "refuse" with unknown_tool:
	// pass.
	Unchecked string `yaml:"unchecked"`
	// DryRun checks arguments but forwards calls that fail the schema,
	// recording the would-be refusal in the event (dry_run_denied,
	// dry_run_violations). Default false.
	DryRun bool `yaml:"dry_run"`
	// MaxTools bounds the tools remembered per server; calls to tools past
	// it pass unchecked (inspected=false). Default 1000.
	MaxTools int `yaml:"max_tools"`
	// MaxSchemaBytes bounds one learned inputSchema; a larger schema is
	// not compiled and the tool's calls pass unchecked (inspected=false).
	// Default 256 KiB.
	MaxSchemaBytes int `yaml:"max_schema_bytes"`
	// MaxMessageBytes bounds one JSON-RPC message read from the server's
	// answers (a JSON body, or one server-sent event) to learn schemas and
	// outcomes; the bytes still pass to the caller. Default 4 MiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// Tools overrides settings per MCP tool name. A schema given here
	// replaces the learned one.
	Tools map[string]MCPToolConfig `yaml:"tools"`
}

// MCPToolConfig overrides one MCP tool's checks.
type MCPToolConfig struct {
	// Schema is an inline JSON Schema for the tool's arguments; it wins over
	// the schema the server lists: a mapping, or a boolean. At most one of
	// Schema and SchemaFile.
	Schema any `yaml:"schema"`
	// SchemaFile is a JSON Schema file, relative to the configuration file.
	SchemaFile string `yaml:"schema_file"`
	// Strict overrides the route's strict for this tool. Default: the route's.
	Strict *bool `yaml:"strict"`
	// DryRun overrides the route's mcp.dry_run for this tool. Default: the route's.
	DryRun *bool `yaml:"dry_run"`
}

// mcpRoute is a compiled MCPConfig.
type mcpRoute struct {
	cfg    MCPConfig
	strict bool
	tools  map[string]*mcpToolRule
}

// mcpToolRule is one tool's compiled override.
type mcpToolRule struct {
	schema *policies.Schema // nil: use the learned schema
	strict bool
	dryRun bool
}

// rule returns a tool's settings: its override, or the route's defaults.
func (m *mcpRoute) rule(name string) *mcpToolRule {
	if r := m.tools[name]; r != nil {
		return r
	}
	return &mcpToolRule{strict: m.strict, dryRun: m.cfg.DryRun}
}

// compileMCP validates a tool's protocol and, for MCP routes, its mcp
// section. p is the tool's field path ("tools[3]").
func (c *Config) compileMCP(t *tool, p string) error {
	tc := &t.cfg
	switch tc.Protocol {
	case "":
		tc.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolMCP:
	default:
		return fieldErr(p+".protocol", "unknown protocol %q; expected http or mcp", tc.Protocol)
	}
	if tc.Protocol == ProtocolHTTP {
		if tc.MCP.UnknownTool != "" || tc.MCP.Unchecked != "" || tc.MCP.DryRun || tc.MCP.MaxTools != 0 || tc.MCP.MaxSchemaBytes != 0 ||
			tc.MCP.MaxMessageBytes != 0 || len(tc.MCP.Tools) > 0 {
			return fieldErr(p+".mcp", "set only for protocol: mcp")
		}
		return nil
	}
	switch {
	case len(tc.Args) > 0:
		return fieldErr(p+".args", "an mcp route reads its arguments from tools/call; remove args")
	case t.schema != nil:
		return fieldErr(p+".schema", "an mcp route learns its schemas from tools/list; give overrides under mcp.tools.NAME.schema")
	case tc.Envelope == EnvelopeAlways:
		return fieldErr(p+".envelope", "an mcp route answers in JSON-RPC; the envelope is carried in the result's _meta (and structuredContent)")
	}
	tc.Envelope = EnvelopeNever
	mc := &tc.MCP
	switch mc.UnknownTool {
	case "":
		mc.UnknownTool = UnknownToolFetch
	case UnknownToolFetch, UnknownToolPass:
	default:
		return fieldErr(p+".mcp.unknown_tool", "unknown mode %q; expected fetch or pass", mc.UnknownTool)
	}
	switch mc.Unchecked {
	case "":
		mc.Unchecked = UncheckedPass
	case UncheckedPass:
	case UncheckedRefuse:
		if mc.UnknownTool == UnknownToolPass {
			return fieldErr(p+".mcp.unchecked", "refuse would refuse every call unknown_tool: pass lets through unchecked; use unknown_tool: fetch")
		}
	default:
		return fieldErr(p+".mcp.unchecked", "unknown mode %q; expected pass or refuse", mc.Unchecked)
	}
	for _, b := range []struct {
		name string
		v    *int
		def  int
	}{
		{"max_tools", &mc.MaxTools, DefaultMCPMaxTools},
		{"max_schema_bytes", &mc.MaxSchemaBytes, DefaultMCPMaxSchemaBytes},
		{"max_message_bytes", &mc.MaxMessageBytes, DefaultMCPMaxMessageBytes},
	} {
		if *b.v == 0 {
			*b.v = b.def
		}
		if *b.v < 0 {
			return fieldErr(p+".mcp."+b.name, "must be positive")
		}
	}
	m := &mcpRoute{cfg: *mc, strict: tc.Strict == nil || *tc.Strict, tools: make(map[string]*mcpToolRule, len(mc.Tools))}
	for _, name := range slices.Sorted(maps.Keys(mc.Tools)) {
		tcfg := mc.Tools[name]
		tp := p + ".mcp.tools." + name
		if name == "" || len(name) > 128 {
			return fieldErr(tp, "an MCP tool name has 1 to 128 characters")
		}
		r := &mcpToolRule{strict: m.strict, dryRun: mc.DryRun}
		if tcfg.Strict != nil {
			r.strict = *tcfg.Strict
		}
		if tcfg.DryRun != nil {
			r.dryRun = *tcfg.DryRun
		}
		sch, err := c.loadSchema(tp, name, tcfg.Schema, tcfg.SchemaFile, schemaOpts{strict: r.strict, unknownFormats: tc.UnknownFormats})
		if err != nil {
			return err
		}
		r.schema = sch
		m.tools[name] = r
	}
	t.mcp = m
	return nil
}
