package egress_test

import (
	"net/netip"
	"testing"

	"github.com/toolgate/toolgate/proxy/egress"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		addr string
		want egress.Class
	}{
		// loopback
		{"127.0.0.1", egress.ClassLoopback},
		{"127.255.255.254", egress.ClassLoopback},
		{"::1", egress.ClassLoopback},
		{"::ffff:127.0.0.1", egress.ClassLoopback},
		// private, with both edges of each range
		{"10.0.0.0", egress.ClassPrivate},
		{"10.255.255.255", egress.ClassPrivate},
		{"9.255.255.255", egress.ClassPublic},
		{"11.0.0.0", egress.ClassPublic},
		{"172.16.0.1", egress.ClassPrivate},
		{"172.31.255.255", egress.ClassPrivate},
		{"172.15.255.255", egress.ClassPublic},
		{"172.32.0.0", egress.ClassPublic},
		{"192.168.1.1", egress.ClassPrivate},
		{"192.169.0.0", egress.ClassPublic},
		{"fc00::1", egress.ClassPrivate},
		{"fdff:ffff::1", egress.ClassPrivate},
		{"fec0::1", egress.ClassPrivate},
		{"fe00::1", egress.ClassPublic},
		// link-local
		{"169.254.0.1", egress.ClassLinkLocal},
		{"169.254.170.2", egress.ClassLinkLocal},
		{"fe80::1", egress.ClassLinkLocal},
		{"fe80::1%eth0", egress.ClassLinkLocal},
		{"febf:ffff::1", egress.ClassLinkLocal},
		// metadata
		{"169.254.169.254", egress.ClassMetadata},
		{"::ffff:169.254.169.254", egress.ClassMetadata},
		{"fd00:ec2::254", egress.ClassMetadata},
		{"100.100.100.200", egress.ClassMetadata},
		{"168.63.129.16", egress.ClassMetadata},
		{"168.63.129.17", egress.ClassPublic},
		// CGNAT
		{"100.64.0.1", egress.ClassCGNAT},
		{"100.127.255.255", egress.ClassCGNAT},
		{"100.63.255.255", egress.ClassPublic},
		{"100.128.0.0", egress.ClassPublic},
		// unspecified
		{"0.0.0.0", egress.ClassUnspecified},
		{"0.1.2.3", egress.ClassUnspecified},
		{"::", egress.ClassUnspecified},
		{"::ffff:0.0.0.0", egress.ClassUnspecified},
		// multicast, broadcast
		{"224.0.0.1", egress.ClassMulticast},
		{"239.255.255.255", egress.ClassMulticast},
		{"ff02::1", egress.ClassMulticast},
		{"255.255.255.255", egress.ClassBroadcast},
		{"240.0.0.1", egress.ClassReserved},
		// documentation
		{"192.0.2.1", egress.ClassDocumentation},
		{"198.51.100.7", egress.ClassDocumentation},
		{"203.0.113.9", egress.ClassDocumentation},
		{"2001:db8::1", egress.ClassDocumentation},
		{"3fff::1", egress.ClassDocumentation},
		// reserved
		{"192.0.0.8", egress.ClassReserved},
		{"198.18.0.1", egress.ClassReserved},
		{"198.19.255.255", egress.ClassReserved},
		{"100::1", egress.ClassReserved},
		{"2001:2::1", egress.ClassReserved},
		{"2001:10::1", egress.ClassReserved},
		{"64:ff9b:1::a9fe:a9fe", egress.ClassReserved},
		// public
		{"8.8.8.8", egress.ClassPublic},
		{"1.1.1.1", egress.ClassPublic},
		{"2606:4700:4700::1111", egress.ClassPublic},
		{"::ffff:8.8.8.8", egress.ClassPublic},
		// IPv4 embedded in IPv6
		{"64:ff9b::a9fe:a9fe", egress.ClassMetadata},                   // NAT64 of 169.254.169.254
		{"64:ff9b::7f00:1", egress.ClassLoopback},                      // NAT64 of 127.0.0.1
		{"64:ff9b::a00:1", egress.ClassPrivate},                        // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", egress.ClassPublic},                       // NAT64 of 8.8.8.8
		{"::127.0.0.1", egress.ClassLoopback},                          // IPv4-compatible
		{"::10.1.2.3", egress.ClassPrivate},                            // IPv4-compatible
		{"::ffff:0:a9fe:a9fe", egress.ClassMetadata},                   // SIIT ::ffff:0:169.254.169.254
		{"2002:a9fe:a9fe::1", egress.ClassMetadata},                    // 6to4 of 169.254.169.254
		{"2002:c0a8:101::1", egress.ClassPrivate},                      // 6to4 of 192.168.1.1
		{"2002:808:808::1", egress.ClassPublic},                        // 6to4 of 8.8.8.8
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", egress.ClassLoopback}, // Teredo, client ^0x80fffffe = 127.0.0.1
		{"2001:0:a00:1::f7f7:f7f7", egress.ClassPrivate},               // Teredo, server 10.0.0.1, client 8.8.8.8
		{"2001:0:808:808:0:0:f7f7:f7f7", egress.ClassPublic},           // Teredo, server 8.8.8.8, client 8.8.8.8
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			if got := egress.Classify(a); got != tt.want {
				t.Errorf("Classify(%s) = %s, want %s", tt.addr, got, tt.want)
			}
			if got := egress.Classify(a).Forbidden(); got != (tt.want != egress.ClassPublic) {
				t.Errorf("Classify(%s).Forbidden() = %v", tt.addr, got)
			}
		})
	}
	if got := egress.Classify(netip.Addr{}); got != egress.ClassUnspecified {
		t.Errorf("Classify(zero Addr) = %s, want unspecified", got)
	}
}
