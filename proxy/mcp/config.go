package mcp

import (
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/proxy/mcppin"
)

// Unknown-tool modes, as named in Config.UnknownTool.
const (
	// UnknownToolFetch asks the server for its tool list (a tools/list of
	// toolgate's own, with the caller's session headers) when a call names a
	// tool whose schema toolgate has not seen; a tool the server does not
	// list is refused as validation/unknown_tool.
	UnknownToolFetch = "fetch"
	// UncheckedPass forwards a tools/call no schema can check (see
	// Config.Unchecked), recorded as inspected=false.
	UncheckedPass = "pass"
	// UncheckedRefuse refuses it as policy/unchecked.
	UncheckedRefuse = "refuse"
	// UnknownToolPass forwards such a call unchecked; its event says
	// inspected=false.
	UnknownToolPass = "pass"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultMaxTools        = 1000
	DefaultMaxSchemaBytes  = 256 << 10
	DefaultMaxMessageBytes = 4 << 20
)

// Config configures an MCP route (a tool whose protocol is "mcp"): how
// tools/call arguments are checked against the schemas learned from the
// server's tools/list answers. The route's strict field applies to learned
// schemas too (default true); its policies see every tools/call.
type Config struct {
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
	Tools map[string]ToolConfig `yaml:"tools"`
	// Pin pins the tool definitions the server lists (docs/mcp.md,
	// "Pinned tool definitions"): on for every MCP route. Default:
	// on_change refuse, new_tools pin (change with a lock file), no
	// allow-list, no ignored fields, no lock file.
	Pin mcppin.Mode `yaml:"pin"`
}

// ToolConfig overrides one MCP tool's checks.
type ToolConfig struct {
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

// Validate applies the defaults and refuses modes that are unknown or
// conflict, and bounds that are negative. Its errors are section errors
// at the field's path within the section ("unknown_tool").
func (mc *Config) Validate() error {
	switch mc.UnknownTool {
	case "":
		mc.UnknownTool = UnknownToolFetch
	case UnknownToolFetch, UnknownToolPass:
	default:
		return section.Errorf("unknown_tool", "unknown mode %q; expected fetch or pass", mc.UnknownTool)
	}
	switch mc.Unchecked {
	case "":
		mc.Unchecked = UncheckedPass
	case UncheckedPass:
	case UncheckedRefuse:
		if mc.UnknownTool == UnknownToolPass {
			return section.Errorf("unchecked", "refuse would refuse every call unknown_tool: pass lets through unchecked; use unknown_tool: fetch")
		}
	default:
		return section.Errorf("unchecked", "unknown mode %q; expected pass or refuse", mc.Unchecked)
	}
	for _, b := range []struct {
		name string
		v    *int
		def  int
	}{
		{"max_tools", &mc.MaxTools, DefaultMaxTools},
		{"max_schema_bytes", &mc.MaxSchemaBytes, DefaultMaxSchemaBytes},
		{"max_message_bytes", &mc.MaxMessageBytes, DefaultMaxMessageBytes},
	} {
		if *b.v == 0 {
			*b.v = b.def
		}
		if *b.v < 0 {
			return section.Errorf(b.name, "must be positive")
		}
	}
	if err := mc.Pin.Validate(); err != nil {
		return section.Under("pin", err)
	}
	return nil
}

// IsZero reports whether nothing of the section is set, as a route of
// another protocol must leave it.
func (mc *Config) IsZero() bool {
	return mc.UnknownTool == "" && mc.Unchecked == "" && !mc.DryRun && mc.MaxTools == 0 && mc.MaxSchemaBytes == 0 &&
		mc.MaxMessageBytes == 0 && len(mc.Tools) == 0 && mc.Pin.OnChange == "" && mc.Pin.NewTools == "" &&
		len(mc.Pin.Allow) == 0 && len(mc.Pin.Ignore) == 0 && mc.Pin.LockFile == ""
}
