package hostform

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// splitParseIPv4 is ParseIPv4 as it was written over strings.Split: the
// reference the part-by-part reading is held to.
func splitParseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		if p == "" || len(p) > 32 {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(4 - i)
		if n >= 1<<(8*rest) {
			return netip.Addr{}, false
		}
		v = v<<(8*rest) | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func TestParseIPv4SameAsSplit(t *testing.T) {
	for _, s := range []string{
		"", ".", "..", "1.", ".1", "1..2", "1.2.3.4", "1.2.3.4.", "1.2.3.4.5", "1.2.3", "1.2", "1",
		"0x", "0x.1", "0X7f.1", "010.0.0.1", "08.1", "4294967295", "4294967296", "0xffffffff",
		"1.2.3.256", "1.2.65535", "1.2.65536", "1.16777215", "255.255.255.255", "1.2.3.-4", "a.b.c.d",
		"127.0.0.1", "1.2.3.4 ", "00000000000000000000000000000000001.1",
	} {
		wa, wok := splitParseIPv4(s)
		ga, gok := ParseIPv4(s)
		if wa != ga || wok != gok {
			t.Errorf("ParseIPv4(%q) = %v, %v; want %v, %v", s, ga, gok, wa, wok)
		}
	}
}

func FuzzParseIPv4SameAsSplit(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "0x7f.1", "1..2", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		wa, wok := splitParseIPv4(s)
		ga, gok := ParseIPv4(s)
		if wa != ga || wok != gok {
			t.Errorf("ParseIPv4(%q) = %v, %v; want %v, %v", s, ga, gok, wa, wok)
		}
	})
}
