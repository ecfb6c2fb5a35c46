package egress

import "net/netip"

// Class is the kind of address a destination resolves to. Every class but
// ClassPublic is forbidden unless egress.allow lists the destination.
type Class string

// The classes of address. The strings are what a refusal's detail and
// event say.
const (
	// ClassPublic is a globally routable unicast address: allowed.
	ClassPublic Class = "public"
	// ClassLoopback is 127.0.0.0/8 and ::1.
	ClassLoopback Class = "loopback"
	// ClassPrivate is RFC 1918 (10/8, 172.16/12, 192.168/16), IPv6 unique
	// local addresses (fc00::/7) and the deprecated site-local fec0::/10.
	ClassPrivate Class = "private"
	// ClassLinkLocal is 169.254.0.0/16 and fe80::/10.
	ClassLinkLocal Class = "link-local"
	// ClassMetadata is a cloud provider's instance metadata or platform
	// address (see metadata). It is told apart from the range it sits in
	// because it is the usual goal of an SSRF: it hands out credentials.
	ClassMetadata Class = "metadata"
	// ClassCGNAT is the shared address space of carrier-grade NAT,
	// 100.64.0.0/10 (RFC 6598); clouds use it inside their networks.
	ClassCGNAT Class = "cgnat"
	// ClassUnspecified is 0.0.0.0/8 ("this network") and ::; on Linux a
	// connection to 0.0.0.0 reaches the local host.
	ClassUnspecified Class = "unspecified"
	// ClassMulticast is 224.0.0.0/4 and ff00::/8.
	ClassMulticast Class = "multicast"
	// ClassBroadcast is 255.255.255.255.
	ClassBroadcast Class = "broadcast"
	// ClassDocumentation is the ranges set aside for examples: 192.0.2/24,
	// 198.51.100/24, 203.0.113/24, 2001:db8::/32 and 3fff::/20 (RFC 5737,
	// 3849, 9637).
	ClassDocumentation Class = "documentation"
	// ClassReserved is every other special-purpose range of the IANA
	// registries that is not reachable on the Internet: 192.0.0.0/24
	// (IETF protocol assignments), 198.18.0.0/15 (benchmarking),
	// 240.0.0.0/4 (reserved), 100::/64 (discard), 2001:2::/48
	// (benchmarking), 2001:10::/28 and 2001:20::/28 (ORCHID), and the
	// local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215), whose embedded
	// IPv4 address cannot be found without the operator's prefix length.
	ClassReserved Class = "reserved"
	// ClassAmbiguous is a host that is not an IP address in standard form
	// and not a plain DNS name: an IPv4 address in another spelling
	// (0x7f.1, 017700000001, 2130706433, 127.1), which resolvers read in
	// different ways, or a name with characters a resolver may cut at
	// (glibc's inet_aton stops at a space). The guard never resolves it.
	ClassAmbiguous Class = "ambiguous"
)

// Forbidden reports whether a destination of class c is refused unless
// egress.allow lists it: every class but ClassPublic.
func (c Class) Forbidden() bool { return c != ClassPublic }

// metadata are the cloud instance metadata and platform addresses. Those
// inside link-local, unique-local or CGNAT space would be refused anyway;
// they are named so a refusal says what they are. 168.63.129.16 is in
// public space and would pass without this list.
var metadata = map[netip.Addr]bool{
	// AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean and most others:
	// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html,
	// https://cloud.google.com/compute/docs/metadata/overview,
	// https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service
	netip.MustParseAddr("169.254.169.254"): true,
	// AWS's IMDS on IPv6 (Nitro instances, HttpProtocolIpv6 enabled), the
	// same AWS page: http://[fd00:ec2::254].
	netip.MustParseAddr("fd00:ec2::254"): true,
	// Alibaba Cloud ECS metadata:
	// https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata
	netip.MustParseAddr("100.100.100.200"): true,
	// Azure's WireServer, a "virtual public IP" for the VM agent, DHCP and
	// DNS, reachable from every Azure VM:
	// https://learn.microsoft.com/en-us/azure/virtual-network/what-is-ip-address-168-63-129-16
	netip.MustParseAddr("168.63.129.16"): true,
}

// ranges are the special-purpose prefixes, tried in order (the first that
// contains an address decides). IPv4 addresses reach this list unmapped.
var ranges = []struct {
	p netip.Prefix
	c Class
}{
	{netip.MustParsePrefix("0.0.0.0/8"), ClassUnspecified},
	{netip.MustParsePrefix("127.0.0.0/8"), ClassLoopback},
	{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
	{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
	{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
	{netip.MustParsePrefix("169.254.0.0/16"), ClassLinkLocal},
	{netip.MustParsePrefix("100.64.0.0/10"), ClassCGNAT},
	{netip.MustParsePrefix("192.0.2.0/24"), ClassDocumentation},
	{netip.MustParsePrefix("198.51.100.0/24"), ClassDocumentation},
	{netip.MustParsePrefix("203.0.113.0/24"), ClassDocumentation},
	{netip.MustParsePrefix("192.0.0.0/24"), ClassReserved},
	{netip.MustParsePrefix("198.18.0.0/15"), ClassReserved},
	{netip.MustParsePrefix("224.0.0.0/4"), ClassMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), ClassBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), ClassReserved},

	{netip.MustParsePrefix("::/128"), ClassUnspecified},
	{netip.MustParsePrefix("::1/128"), ClassLoopback},
	{netip.MustParsePrefix("fc00::/7"), ClassPrivate},
	{netip.MustParsePrefix("fec0::/10"), ClassPrivate},
	{netip.MustParsePrefix("fe80::/10"), ClassLinkLocal},
	{netip.MustParsePrefix("ff00::/8"), ClassMulticast},
	{netip.MustParsePrefix("2001:db8::/32"), ClassDocumentation},
	{netip.MustParsePrefix("3fff::/20"), ClassDocumentation},
	{netip.MustParsePrefix("100::/64"), ClassReserved},
	{netip.MustParsePrefix("2001:2::/48"), ClassReserved},
	{netip.MustParsePrefix("2001:10::/28"), ClassReserved},
	{netip.MustParsePrefix("2001:20::/28"), ClassReserved},
	{netip.MustParsePrefix("64:ff9b:1::/48"), ClassReserved},
}

// The IPv6 prefixes that carry an IPv4 address a packet may end up at.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the IPv4 address in the last 32 bits
	compat    = netip.MustParsePrefix("::/96")        // IPv4-compatible (RFC 4291, deprecated)
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96")
	sixToFour = netip.MustParsePrefix("2002::/16") // RFC 3056: the IPv4 address in bits 16-47
	teredo    = netip.MustParsePrefix("2001::/32") // RFC 4380: server in bits 32-63, client inverted in 96-127
)

// Classify returns the class of an address. An IPv4-mapped address
// (::ffff:a.b.c.d) is classified as its IPv4 address; an IPv6 address that
// embeds one where a packet may be delivered (NAT64 64:ff9b::/96,
// IPv4-compatible ::a.b.c.d, SIIT ::ffff:0:a.b.c.d, 6to4 2002::/16, Teredo
// 2001::/32) takes the embedded address's class when that is not public,
// so 64:ff9b::a9fe:a9fe is metadata. A zone is ignored; the invalid
// (zero) Addr is ClassUnspecified.
func Classify(a netip.Addr) Class {
	if !a.IsValid() {
		return ClassUnspecified
	}
	a = a.WithZone("").Unmap()
	if c := classifyPlain(a); c != ClassPublic || a.Is4() {
		return c
	}
	for _, e := range embedded(a) {
		if c := classifyPlain(e); c != ClassPublic {
			return c
		}
	}
	return ClassPublic
}

// classifyPlain classifies an address by the ranges it is in, without
// looking inside it.
func classifyPlain(a netip.Addr) Class {
	if metadata[a] {
		return ClassMetadata
	}
	for _, r := range ranges {
		if r.p.Contains(a) {
			return r.c
		}
	}
	return ClassPublic
}

// embedded returns the IPv4 addresses an IPv6 address carries where a
// translator or tunnel would deliver a packet; nil for any other address.
func embedded(a netip.Addr) []netip.Addr {
	b := a.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case nat64.Contains(a), compat.Contains(a), siit.Contains(a):
		return []netip.Addr{last}
	case sixToFour.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}
	case teredo.Contains(a):
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{client, server}
	}
	return nil
}
