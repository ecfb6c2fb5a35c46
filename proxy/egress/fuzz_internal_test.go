package egress

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/internal/hostform"
)

// FuzzClassify checks the classifier against the standard library's own
// predicates and its unmapping rules, over any 4- or 16-byte address.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "::1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::",
		"2001:0:4136:e378:8000:63bf:80ff:fffe", "fd00:ec2::254", "8.8.8.8", "::", "ff02::1", "::10.0.0.1",
	} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		c := Classify(a)
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
			a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
			if !c.Forbidden() {
				t.Fatalf("Classify(%s) = %s, but the standard library calls it special", a, c)
			}
		}
		if a.Is4() {
			if m := Classify(netip.AddrFrom16(a.As16())); m != c {
				t.Fatalf("Classify(%s) = %s, its mapped form %s", a, c, m)
			}
			b := a.As4()
			var n64 [16]byte
			copy(n64[:], netip.MustParseAddr("64:ff9b::").AsSlice())
			copy(n64[12:], b[:])
			if n := Classify(netip.AddrFrom16(n64)); n != c {
				t.Fatalf("Classify(%s) = %s, its NAT64 form %s", a, c, n)
			}
		}
	})
}

// FuzzParseEntry checks that the allow-list parser never panics, and that
// what it accepts is canonical and matches itself.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{
		"10.0.0.0/8", "fd00::/8", "10.1.2.3", "[fd00::1]:443", "db.internal:5432", "*.corp.example",
		"DB.Internal.", "0x7f.1", "127.1", "::ffff:10.0.0.0/104", "10.0.0.1/8", "a:b:c", "[::1]", "*.", "x:0",
		"fe80::1%eth0", "1.2.3.4:65535", "host:65536",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseEntry(s)
		if err != nil {
			return
		}
		port := e.port
		if port == 0 {
			port = 443
		}
		al, err := parseAllow([]string{s}, "allow")
		if err != nil {
			t.Fatalf("parseEntry(%q) took it, parseAllow refused it: %v", s, err)
		}
		switch {
		case e.prefix.IsValid():
			if e.name != "" || e.prefix.Masked() != e.prefix || e.prefix.Addr().Is4In6() {
				t.Fatalf("parseEntry(%q) = %+v", s, e)
			}
			if !al.hasAddr(e.prefix.Addr(), port) {
				t.Fatalf("%q does not allow its own address", s)
			}
		default:
			if key, class := hostKey(e.name); key != e.name || class != "" {
				t.Fatalf("parseEntry(%q) = name %q, not canonical (%q, %q)", s, e.name, key, class)
			}
			name := e.name
			if e.wildcard {
				name = "x." + name
			}
			if !al.hasName(name, port) {
				t.Fatalf("%q does not allow %s", s, name)
			}
		}
	})
}

// FuzzHostKey checks that what the guard takes for a DNS name is never an
// IPv4 address to inet_aton or WHATWG URLs, and that an address it reads
// is in standard form.
func FuzzHostKey(f *testing.F) {
	for _, s := range []string{
		"0x7f.1", "017700000001", "2130706433", "127.1", "0177.0.0.1", "127.0.0.1 ", "127.0.0.1\x00x",
		"localhost", "LOCALHOST.", "[::1]", "::ffff:127.0.0.1", "fe80::1%lo", "a..b", "1.2.3.4.5", "0x",
		"example.com", "xn--bcher-kva.example", "_srv.example", "0x7f.0x0.0x0.0x1.", "1e2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, class := hostKey(s)
		if class == "" {
			if _, err := netip.ParseAddr(key); err == nil {
				t.Fatalf("hostKey(%q) = name %q, an IP address", s, key)
			}
			if _, ok := hostform.ParseIPv4(key); ok {
				t.Fatalf("hostKey(%q) = name %q, which inet_aton reads as an IPv4 address", s, key)
			}
			if len(key) > 253 || strings.Trim(key, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
				t.Fatalf("hostKey(%q) = name %q", s, key)
			}
			return
		}
		if class == ClassAmbiguous {
			return
		}
		a, err := netip.ParseAddr(key)
		if err != nil || a.String() != key || a.Is4In6() || Classify(a) != class {
			t.Fatalf("hostKey(%q) = %q, %s", s, key, class)
		}
		if v4, ok := hostform.ParseIPv4(strings.TrimSuffix(s, ".")); ok && v4 != a {
			t.Fatalf("hostKey(%q) = %s, inet_aton reads %s", s, a, v4)
		}
	})
}
