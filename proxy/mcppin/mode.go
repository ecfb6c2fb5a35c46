package mcppin

import (
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/internal/section"
)

// What a route does with a changed tool, as named in Mode.OnChange.
const (
	// OnChangeRefuse (the default) refuses calls to a changed tool
	// (policy/definition_changed) and lists its pinned definition in place
	// of the changed one (hidden when the pinned text is not known), until
	// an operator accepts the change.
	OnChangeRefuse = "refuse"
	// OnChangeHide removes a changed tool from tools/list answers and
	// refuses its calls.
	OnChangeHide = "hide"
	// OnChangeApprove lists the pinned definition and sends each call to
	// the changed tool to the approval gate (an approval is asked even
	// where the tool's rule would not ask one).
	OnChangeApprove = "approve"
	// OnChangeRecord only records the change: the new definition is listed
	// and its calls are forwarded. It follows a change silently but for
	// the event, so it is never the default.
	OnChangeRecord = "record"
)

// What happens to a tool seen for the first time, as named in
// Mode.NewTools.
const (
	// NewToolsPin pins it (the default without a lock file).
	NewToolsPin = "pin"
	// NewToolsChange handles it as a change (the default with a lock file:
	// a tool the reviewed lock does not hold was not reviewed).
	NewToolsChange = "change"
)

// Mode configures pinning on one MCP route (the route's mcp.pin section).
// Validate it once; then it is read-only.
type Mode struct {
	// OnChange says what happens to a tool whose definition differs from
	// its pin: refuse, hide, approve or record. Default refuse.
	OnChange string `yaml:"on_change"`
	// NewTools says what happens to a tool seen for the first time: pin
	// (pinned at first sight) or change (handled as OnChange says, until
	// accepted). Default: change when LockFile is set, else pin.
	NewTools string `yaml:"new_tools"`
	// Allow, when not empty, is the only tools the route lists and calls:
	// others are removed from tools/list answers and their calls refused.
	// Default empty: every tool.
	Allow []string `yaml:"allow"`
	// Ignore names fields whose changes are not enforced (a server that
	// writes a changing value into _meta, say): a tool that changed in
	// these fields alone is listed and called as the server lists it now.
	// Each is one of the fields of mcppin.Fields but name. Default none:
	// every field counts.
	Ignore []string `yaml:"ignore"`
	// LockFile is a lock file written by `toolgate mcp pin`, relative to the
	// configuration file; its pins are loaded at start. Default none (pins
	// are made at first sight and kept in memory).
	LockFile string `yaml:"lock_file"`

	allow  map[string]bool
	ignore map[string]bool
}

// Validate applies the defaults and checks the fields; errors name the
// field (section.Error, path relative to the section).
func (m *Mode) Validate() error {
	switch m.OnChange {
	case "":
		m.OnChange = OnChangeRefuse
	case OnChangeRefuse, OnChangeHide, OnChangeApprove, OnChangeRecord:
	default:
		return section.Errorf("on_change", "unknown mode %q; expected refuse, hide, approve or record", m.OnChange)
	}
	switch m.NewTools {
	case "":
		m.NewTools = NewToolsPin
		if m.LockFile != "" {
			m.NewTools = NewToolsChange
		}
	case NewToolsPin, NewToolsChange:
	default:
		return section.Errorf("new_tools", "unknown mode %q; expected pin or change", m.NewTools)
	}
	m.ignore = nil
	for i, f := range m.Ignore {
		switch {
		case f == FieldName || !slices.Contains(Fields, f):
			return section.Errorf("ignore["+strconv.Itoa(i)+"]", "unknown field %q; expected one of %s", f, fieldList(Fields[1:]))
		case m.ignore[f]:
			return section.Errorf("ignore["+strconv.Itoa(i)+"]", "%q is listed twice", f)
		}
		if m.ignore == nil {
			m.ignore = map[string]bool{}
		}
		m.ignore[f] = true
	}
	m.allow = nil
	if len(m.Allow) > 0 {
		m.allow = make(map[string]bool, len(m.Allow))
	}
	for i, name := range m.Allow {
		switch {
		case name == "" || len(name) > 128:
			return section.Errorf("allow["+strconv.Itoa(i)+"]", "an MCP tool name has 1 to 128 characters")
		case m.allow[name]:
			return section.Errorf("allow["+strconv.Itoa(i)+"]", "%q is listed twice", name)
		}
		m.allow[name] = true
	}
	return nil
}

// Allowed reports whether the route's allow-list lets the tool be listed
// and called (always, with no allow-list).
func (m *Mode) Allowed(tool string) bool {
	if len(m.Allow) == 0 {
		return true
	}
	if m.allow == nil {
		return slices.Contains(m.Allow, tool)
	}
	return m.allow[tool]
}

// Ignored reports whether every one of fields is one the route ignores
// (false for none): a change in them alone is not enforced, nor recorded.
func (m *Mode) Ignored(fields []string) bool {
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		if !m.ignore[f] && !(m.ignore == nil && slices.Contains(m.Ignore, f)) {
			return false
		}
	}
	return true
}

// ListAction is what a tools/list answer shows of one tool.
type ListAction int

// The list actions.
const (
	// ListAsIs passes the tool as the server listed it.
	ListAsIs ListAction = iota
	// ListPinned shows the pinned definition in its place.
	ListPinned
	// ListHidden removes it.
	ListHidden
)

// CallAction is what happens to a tools/call of one tool.
type CallAction int

// The call actions.
const (
	// CallForward lets the call go on through the route's checks.
	CallForward CallAction = iota
	// CallRefuse refuses it: policy/definition_changed (or, for a tool the
	// allow-list lacks, policy/not_allowlisted).
	CallRefuse
	// CallApprove sends it to the approval gate.
	CallApprove
)

// Treatment is what a route does with one tool, given its verdict.
type Treatment struct {
	List ListAction
	Call CallAction
	// NotAllowed is true when the allow-list decided.
	NotAllowed bool
}

// Treat says what the route does with a tool, given its verdict (from
// Observe or Status). A tool the allow-list lacks is hidden and refused.
// With on_change: record everything else passes. Otherwise a changed tool
// is listed as pinned and refused (refuse), hidden and refused (hide), or
// listed as pinned and sent for approval (approve); a tool without a
// reviewed definition (past the bounds; under new_tools: change, one
// pinned at first sight or never listed) is hidden and refused, or listed
// and sent for approval (approve); a removed tool is hidden and refused;
// every other tool is listed as is and its calls go on.
func (m *Mode) Treat(v *Verdict) Treatment {
	if !m.Allowed(v.Tool) {
		return Treatment{List: ListHidden, Call: CallRefuse, NotAllowed: true}
	}
	if m.OnChange == OnChangeRecord {
		return Treatment{}
	}
	// A tool with no reviewed definition: past the bounds, or (on a route
	// that pins new tools as changes) pinned at first sight or never
	// listed. There is no reviewed text to list in its place.
	unreviewed := v.State == StateUnpinned ||
		(m.NewTools == NewToolsChange && (v.State == StateUnknown || (v.Source == SourceFirstSeen && v.State != StateRemoved)))
	switch {
	case v.State == StateRemoved:
		return Treatment{List: ListHidden, Call: CallRefuse}
	case unreviewed && m.OnChange == OnChangeApprove:
		return Treatment{List: ListAsIs, Call: CallApprove}
	case unreviewed:
		return Treatment{List: ListHidden, Call: CallRefuse}
	case v.State != StateChanged || m.Ignored(v.Fields):
		return Treatment{}
	case m.OnChange == OnChangeHide:
		return Treatment{List: ListHidden, Call: CallRefuse}
	case m.OnChange == OnChangeApprove:
		return Treatment{List: ListPinned, Call: CallApprove}
	}
	return Treatment{List: ListPinned, Call: CallRefuse}
}
