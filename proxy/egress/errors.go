package egress

import (
	"errors"
	"net"
	"net/netip"

	"github.com/toolgate/toolgate/bucketing"
)

// ErrDenied is what every refusal of the guard matches with errors.Is.
var ErrDenied = errors.New("egress denied")

// errNotValidated is New's error for a Config that Validate did not
// prepare.
var errNotValidated = errors.New("egress: the configuration was not validated (call Config.Validate first)")

// DeniedError is the guard's refusal of one destination. It is what the
// refusal envelope (policy/egress_denied) and its event are built from.
//
// The resolved address is not a secret (anyone who can resolve the name
// learns it), but neither Error nor Detail names it: an error's text can
// reach the caller (goproxy writes a failed CONNECT dial's error into its
// 502), the caller cannot act on the address (only an operator's
// egress.allow can), and echoing it would make toolgate an oracle of which
// internal address a name resolves to. Addr carries it for the event and
// the operator's log.
type DeniedError struct {
	// Host is the destination's host as the call named it (lower-case, IP
	// addresses in standard form).
	Host string
	// Port is the destination's port.
	Port string
	// Class is why the destination is refused: the class of the first
	// resolved address that is forbidden (ClassAmbiguous for a host the
	// guard does not resolve).
	Class Class
	// Addr is that address; the zero Addr for ClassAmbiguous.
	Addr netip.Addr
}

// Error names the destination and the class, not the address refused.
func (e *DeniedError) Error() string {
	s := "egress to " + net.JoinHostPort(e.Host, e.Port) + " refused: "
	if e.Class == ClassAmbiguous {
		return s + "the host is neither a plain DNS name nor an IP address in standard form"
	}
	return s + "it is or resolves to a " + string(e.Class) + " address, and egress.allow does not list it"
}

// Unwrap returns ErrDenied.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// Code is the envelope's error code: policy.
func (e *DeniedError) Code() bucketing.Code { return bucketing.CodePolicy }

// Reason is the envelope's and event's reason: egress_denied.
func (e *DeniedError) Reason() string { return bucketing.ReasonEgressDenied }

// Detail is the envelope's sentence for the caller: the destination as
// the caller named it and the class, never the resolved address.
func (e *DeniedError) Detail() string {
	dst := net.JoinHostPort(e.Host, e.Port)
	if e.Class == ClassAmbiguous {
		return "Destination " + dst + " is refused: its host is neither a plain DNS name nor an IP address in standard form (write IPv4 addresses as four decimal numbers)"
	}
	return "Destination " + dst + " is refused: it is or resolves to a " + string(e.Class) +
		" address, and toolgate connects to those only for hosts tools name or that egress.allow lists"
}
