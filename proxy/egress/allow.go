package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/proxy/internal/hostform"
)

// entry is one parsed allow-list entry: a name (exact or, with wildcard,
// the names below it) or an address prefix, and a port (0: any).
type entry struct {
	name     string
	wildcard bool
	prefix   netip.Prefix
	port     uint16
}

// allowList is a compiled allow list.
type allowList struct {
	names    map[string][]uint16 // exact name -> ports (0: any)
	wild     []entry             // names below entry.name
	prefixes []entry
}

// parseAllow compiles entries; an error names field[i] and the entry.
func parseAllow(entries []string, field string) (*allowList, error) {
	al := &allowList{names: map[string][]uint16{}}
	for i, s := range entries {
		e, err := parseEntry(s)
		if err != nil {
			return nil, section.Errorf(fmt.Sprintf("%s[%d]", field, i), "%q: %v", s, err)
		}
		switch {
		case e.prefix.IsValid():
			al.prefixes = append(al.prefixes, e)
		case e.wildcard:
			al.wild = append(al.wild, e)
		default:
			al.names[e.name] = append(al.names[e.name], e.port)
		}
	}
	return al, nil
}

// parseEntry reads one allow-list entry (see Config.Allow).
func parseEntry(s string) (entry, error) {
	if s == "" {
		return entry{}, fmt.Errorf("is empty")
	}
	if len(s) > 300 {
		return entry{}, fmt.Errorf("is longer than 300 characters")
	}
	if strings.IndexByte(s, '/') >= 0 {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return entry{}, fmt.Errorf("is not a CIDR prefix (such as 10.0.0.0/8 or fd00::/8)")
		}
		if p.Addr().Is4In6() {
			return entry{}, fmt.Errorf("is an IPv4-mapped prefix; write it as IPv4 (10.0.0.0/8): mapped addresses are checked as IPv4")
		}
		if p.Masked() != p {
			return entry{}, fmt.Errorf("has bits set below its prefix length; did you mean %s?", p.Masked())
		}
		return entry{prefix: p}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return addrEntry(a, 0)
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return entry{}, fmt.Errorf("has port 0; give a port from 1 to 65535, or none for every port")
		}
		return addrEntry(ap.Addr(), ap.Port())
	}
	host, port := s, uint16(0)
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.IndexByte(s[:i], ':') >= 0 || strings.HasPrefix(s, "[") {
			return entry{}, fmt.Errorf("is not an IP address, a prefix or a host name (an IPv6 address with a port is written [fd00::1]:443)")
		}
		p, ok := parsePort(s[i+1:])
		if !ok {
			return entry{}, fmt.Errorf("has port %q; expected a number from 1 to 65535", s[i+1:])
		}
		host, port = s[:i], p
	}
	e := entry{port: port}
	if strings.HasPrefix(host, "*.") {
		e.wildcard, host = true, host[2:]
	}
	name, c := hostKey(host)
	switch {
	case c == ClassAmbiguous:
		return entry{}, fmt.Errorf("is not a valid host name (letters, digits, '-', '_' and dots; IPv4 addresses as four decimal numbers)")
	case c != "":
		return entry{}, fmt.Errorf("a wildcard or a port applies to names only; write the address without the wildcard")
	}
	e.name = name
	return e, nil
}

// addrEntry is an entry for one address; zones are refused (an address
// with a zone is link-local: list fe80::/10 or the address itself).
func addrEntry(a netip.Addr, port uint16) (entry, error) {
	if a.Zone() != "" {
		return entry{}, fmt.Errorf("has a zone; list the address without it")
	}
	a = a.Unmap()
	return entry{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, nil
}

// parsePort reads a port from 1 to 65535 written in decimal without a
// sign or leading zeros.
func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

// hostKey returns the form a host is matched in: lower-case, one trailing
// dot dropped, brackets removed, an IP address in standard form (IPv4
// unmapped). class is "" for a plain DNS name, ClassPublic (or any other
// class but ClassAmbiguous) for an IP address, and ClassAmbiguous for
// anything else: an IPv4 address in another spelling (a last label that
// is a number: a browser and inet_aton read 0x7f.1 as 127.0.0.1, Go's
// resolver as a DNS name; the guard takes neither reading), an empty label, a
// character outside letters, digits, '-' and '_', or more than 253
// characters.
func hostKey(h string) (key string, class Class) {
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", ClassAmbiguous // a zone: never a destination by name
		}
		a = a.Unmap()
		return a.String(), Classify(a)
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > 253 {
		return "", ClassAmbiguous
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", ClassAmbiguous
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", ClassAmbiguous
			}
		}
	}
	if hostform.NumericLabel(h[strings.LastIndexByte(h, '.')+1:]) {
		return "", ClassAmbiguous
	}
	return h, ""
}

// hasName reports whether the list lets name through on port, by name.
func (al *allowList) hasName(name string, port uint16) bool {
	for _, p := range al.names[name] {
		if p == 0 || p == port {
			return true
		}
	}
	for _, e := range al.wild {
		if (e.port == 0 || e.port == port) && strings.HasSuffix(name, "."+e.name) {
			return true
		}
	}
	return false
}

// hasAddr reports whether the list lets an address through on port: the
// address itself, unmapped, or an IPv4 address it embeds (Classify) is in
// a listed prefix.
func (al *allowList) hasAddr(a netip.Addr, port uint16) bool {
	a = a.WithZone("").Unmap()
	cands := append([]netip.Addr{a}, embedded(a)...)
	for _, e := range al.prefixes {
		if e.port != 0 && e.port != port {
			continue
		}
		for _, x := range cands {
			if e.prefix.Contains(x) {
				return true
			}
		}
	}
	return false
}
