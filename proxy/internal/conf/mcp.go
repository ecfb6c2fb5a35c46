package conf

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/mcppin"
)

// Protocols, as named in ToolConfig.Protocol.
const (
	ProtocolHTTP = "http"
	ProtocolMCP  = "mcp"
)

// Unknown-tool and unchecked modes, as named in MCPConfig (mcp.Config
// documents each).
const (
	UnknownToolFetch = mcp.UnknownToolFetch
	UncheckedPass    = mcp.UncheckedPass
	UncheckedRefuse  = mcp.UncheckedRefuse
	UnknownToolPass  = mcp.UnknownToolPass
)

// Defaults for MCPConfig fields left at their zero value.
const (
	DefaultMCPMaxTools        = mcp.DefaultMaxTools
	DefaultMCPMaxSchemaBytes  = mcp.DefaultMaxSchemaBytes
	DefaultMCPMaxMessageBytes = mcp.DefaultMaxMessageBytes
)

// MCPConfig configures an MCP route (a tool whose protocol is "mcp"); it
// is the mcp section of a tool, kept with the MCP layer.
type MCPConfig = mcp.Config

// MCPToolConfig overrides one MCP tool's checks.
type MCPToolConfig = mcp.ToolConfig

// MCPRoute is a compiled MCPConfig.
type MCPRoute struct {
	Cfg    MCPConfig
	strict bool
	Tools  map[string]*MCPToolRule
	// lock is the route's entries of its mcp.pin.lock_file; nil without
	// one. Swap loads them into the server's pins.
	Lock *mcppin.Lock
	// answer is the route's answer checks (mcpcall/answer.go); nil when none.
	Answer *MCPAnswerRule
}

// MCPToolRule is one tool's compiled override.
type MCPToolRule struct {
	Schema *policies.Schema // nil: use the learned schema
	Strict bool
	DryRun bool
}

// Rule returns a tool's settings: its override, or the route's defaults.
func (m *MCPRoute) Rule(name string) *MCPToolRule {
	if r := m.Tools[name]; r != nil {
		return r
	}
	return &MCPToolRule{Strict: m.strict, DryRun: m.Cfg.DryRun}
}

// compileMCP validates a tool's protocol and, for MCP routes, its mcp
// section. p is the tool's field path ("tools[3]").
func (c *Config) compileMCP(t *Tool, p string) error {
	tc := &t.Cfg
	switch tc.Protocol {
	case "":
		tc.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolMCP:
	default:
		return fieldErr(p+".protocol", "unknown protocol %q; expected http or mcp", tc.Protocol)
	}
	if tc.Protocol == ProtocolHTTP {
		if !tc.MCP.IsZero() {
			return fieldErr(p+".mcp", "set only for protocol: mcp")
		}
		return nil
	}
	switch {
	case len(tc.Args) > 0:
		return fieldErr(p+".args", "an mcp route reads its arguments from tools/call; remove args")
	case t.Schema != nil:
		return fieldErr(p+".schema", "an mcp route learns its schemas from tools/list; give overrides under mcp.tools.NAME.schema")
	case tc.SchemaMode == policies.ModeDryRun:
		return fieldErr(p+".schema_mode", "an mcp route's schemas are dry-run with mcp.dry_run (or mcp.tools.NAME.dry_run)")
	case tc.Envelope == EnvelopeAlways:
		return fieldErr(p+".envelope", "an mcp route answers in JSON-RPC; the envelope is carried in the result's _meta (and structuredContent)")
	}
	tc.Envelope = EnvelopeNever
	mc := &tc.MCP
	if err := mc.Validate(); err != nil {
		return section.Under(p+".mcp", err)
	}
	m := &MCPRoute{Cfg: *mc, strict: tc.Strict == nil || *tc.Strict, Tools: make(map[string]*MCPToolRule, len(mc.Tools))}
	if mc.Pin.LockFile != "" {
		lock, err := c.readLock(p+".mcp.pin.lock_file", tc.Name, mc.Pin.LockFile)
		if err != nil {
			return err
		}
		m.Lock = lock
	}
	for _, name := range slices.Sorted(maps.Keys(mc.Tools)) {
		tcfg := mc.Tools[name]
		tp := p + ".mcp.tools." + name
		if name == "" || len(name) > 128 {
			return fieldErr(tp, "an MCP tool name has 1 to 128 characters")
		}
		r := &MCPToolRule{Strict: m.strict, DryRun: mc.DryRun}
		if tcfg.Strict != nil {
			r.Strict = *tcfg.Strict
		}
		if tcfg.DryRun != nil {
			r.DryRun = *tcfg.DryRun
		}
		sch, err := c.loadSchema(tp, name, tcfg.Schema, tcfg.SchemaFile, schemaOpts{strict: r.Strict, unknownFormats: tc.UnknownFormats, unknownKeywords: tc.UnknownKeywords})
		if err != nil {
			return err
		}
		r.Schema = sch
		m.Tools[name] = r
	}
	t.MCP = m
	return nil
}

// readLock reads an MCP route's mcp.pin.lock_file (relative to the
// configuration file) and keeps the route's own entries. A file that does
// not exist is an error here (the CLI creates it: toolgate mcp pin); one
// that does not parse fails the load with its own FILE:LINE. The file's
// bytes count in the configuration's version.
func (c *Config) readLock(p, route, file string) (*mcppin.Lock, error) {
	f := section.Resolve(c.dir, file)
	if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
		return nil, fieldErr(p, "%s does not exist; write it with toolgate mcp pin --route %s --lock %s", f, route, file)
	}
	lock, err := mcppin.ReadLock(f)
	if err != nil {
		return nil, section.At(p, err)
	}
	own := &mcppin.Lock{Version: lock.Version}
	for _, e := range lock.Pins {
		if e.Route == route {
			own.Pins = append(own.Pins, e)
			fmt.Fprintf(c.digest, "%s\x00%s\x00%s\x00%s\x00", f, e.Server, e.Tool, e.Digest)
		}
	}
	return own, nil
}
