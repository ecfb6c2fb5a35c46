package proxy

// The proxy section's types, its defaults and the contracts the pipeline
// consumes live in internal packages (docs/architecture.md); these names are
// the package's API for them.

import (
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/mcpcall"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

type (
	AnswerChecker      = pipe.AnswerChecker
	AnswerConfig       = conf.AnswerConfig
	AnswerDetectConfig = conf.AnswerDetectConfig
	AnswerPolicyConfig = conf.AnswerPolicyConfig
	Approver           = conf.Approver
	BudgetCall         = conf.BudgetCall
	BudgetOutcome      = conf.BudgetOutcome
	BudgetScoper       = conf.BudgetScoper
	BudgetTicket       = conf.BudgetTicket
	BudgetVerdict      = conf.BudgetVerdict
	Budgeter           = conf.Budgeter
	Checker            = pipe.Checker
	Config             = conf.Config
	EventGate          = pipe.EventGate
	HeaderConfig       = conf.HeaderConfig
	HostConfig         = conf.HostConfig
	LimitsConfig       = conf.LimitsConfig
	ListedKeywords     = mcpcall.ListedKeywords
	ListenConfig       = conf.ListenConfig
	MCPConfig          = conf.MCPConfig
	MCPToolConfig      = conf.MCPToolConfig
	MatchConfig        = conf.MatchConfig
	ObserveConfig      = conf.ObserveConfig
	Recorder           = pipe.Recorder
	ReverseConfig      = conf.ReverseConfig
	Snapshot           = pipe.Snapshot
	ToolConfig         = conf.ToolConfig
	Tracer             = pipe.Tracer
	TransportConfig    = conf.TransportConfig
	UnlistedName       = mcpcall.UnlistedName
	UnusableSchema     = mcpcall.UnusableSchema
)

const (
	DefaultAgentHeader        = conf.DefaultAgentHeader
	DefaultBodyTimeout        = conf.DefaultBodyTimeout
	DefaultDialTimeout        = conf.DefaultDialTimeout
	DefaultForwardListen      = conf.DefaultForwardListen
	DefaultIdleTimeout        = conf.DefaultIdleTimeout
	DefaultMCPMaxMessageBytes = conf.DefaultMCPMaxMessageBytes
	DefaultMCPMaxSchemaBytes  = conf.DefaultMCPMaxSchemaBytes
	DefaultMCPMaxTools        = conf.DefaultMCPMaxTools
	DefaultMaxBodyBytes       = conf.DefaultMaxBodyBytes
	DefaultMaxCallerIDBytes   = conf.DefaultMaxCallerIDBytes
	DefaultMaxConns           = conf.DefaultMaxConns
	DefaultMaxEnvelopeBytes   = conf.DefaultMaxEnvelopeBytes
	DefaultMaxIdlePerHost     = conf.DefaultMaxIdlePerHost
	DefaultMaxJSONDepth       = conf.DefaultMaxJSONDepth
	DefaultReadHeaderTimeout  = conf.DefaultReadHeaderTimeout
	DefaultSessionHeader      = conf.DefaultSessionHeader
	DefaultTimeout            = conf.DefaultTimeout
	EnvelopeAlways            = conf.EnvelopeAlways
	EnvelopeNever             = conf.EnvelopeNever
	EnvelopeOnRequest         = conf.EnvelopeOnRequest
	HeaderEnvelope            = conf.HeaderEnvelope
	HeaderErrorCode           = conf.HeaderErrorCode
	MaxEnumFields             = conf.MaxEnumFields
	ProtocolHTTP              = conf.ProtocolHTTP
	ProtocolMCP               = conf.ProtocolMCP
	ServerLoop                = conf.ServerLoop
	ServerNetHTTP             = conf.ServerNetHTTP
	SourceForm                = conf.SourceForm
	SourceJSON                = conf.SourceJSON
	SourcePath                = conf.SourcePath
	SourceQuery               = conf.SourceQuery
	UncheckedPass             = conf.UncheckedPass
	UncheckedRefuse           = conf.UncheckedRefuse
	UnknownToolFetch          = conf.UnknownToolFetch
	UnknownToolPass           = conf.UnknownToolPass
	UnmatchedDeny             = conf.UnmatchedDeny
	UnmatchedDryRun           = conf.UnmatchedDryRun
	UnmatchedPass             = conf.UnmatchedPass
)

// ErrNotToolsList is EvaluateMCP's error for a recorded tools/list
// that is not one.
var ErrNotToolsList = conf.ErrNotToolsList

// CheckListenAddr reports whether addr is a listen address toolgate
// accepts: host:port, on loopback unless allowWide.
func CheckListenAddr(addr string, allowWide bool) error { return conf.CheckListenAddr(addr, allowWide) }

// UpstreamKey returns the key of an upstream the configuration names
// (conf.UpstreamKey).
func UpstreamKey(hostport string) (string, error) { return conf.UpstreamKey(hostport) }
