package listen

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// clientHello captures the first flight a real TLS client sends for
// serverName ("" sends no SNI).
func clientHello(t testing.TB, serverName string, nextProtos ...string) []byte {
	t.Helper()
	c, s := net.Pipe()
	go func() {
		tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == "", NextProtos: nextProtos})
		tc.SetDeadline(time.Now().Add(2 * time.Second))
		tc.Handshake() // fails when the pipe closes; only its first bytes matter
	}()
	defer s.Close()
	defer c.Close()
	s.SetReadDeadline(time.Now().Add(2 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(s, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

func TestReadClientHello(t *testing.T) {
	withSNI := clientHello(t, "api.example.com", "h2", "http/1.1")
	noSNI := clientHello(t, "")
	tests := []struct {
		name    string
		in      []byte
		wantSNI string
		wantErr bool
	}{
		{"with SNI", withSNI, "api.example.com", false},
		{"without SNI", noSNI, "", false},
		{"with SNI, then more bytes", append(append([]byte{}, withSNI...), "extra"...), "api.example.com", false},
		{"plain HTTP", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "", true},
		{"truncated", withSNI[:len(withSNI)/2], "", true},
		{"empty", nil, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sni, consumed, err := ReadClientHello(bytes.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if sni != tc.wantSNI {
				t.Errorf("SNI = %q, want %q", sni, tc.wantSNI)
			}
			// Every byte read is handed back for replay, and nothing past
			// the ClientHello record was needed.
			if !bytes.HasPrefix(tc.in, consumed) || len(consumed) < 5 {
				t.Errorf("consumed %d bytes that are not the input's prefix", len(consumed))
			}
		})
	}
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(clientHello(f, "api.example.com", "h2"))
	f.Add(clientHello(f, ""))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 0x03, 0x01, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		sni, consumed, err := ReadClientHello(bytes.NewReader(in))
		if err != nil {
			return
		}
		if !bytes.HasPrefix(in, consumed) || len(consumed) > maxHelloBytes {
			t.Fatalf("consumed %d bytes, not a bounded prefix of the input", len(consumed))
		}
		if len(sni) > len(in) {
			t.Fatalf("SNI %q longer than the input", sni)
		}
	})
}

func TestReadClientHelloBounded(t *testing.T) {
	// A record header announcing more than the limit, then endless bytes:
	// the sniffer stops at maxHelloBytes.
	in := io.MultiReader(bytes.NewReader([]byte{0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0x00, 0xff, 0xff}), zeros{})
	if _, _, err := ReadClientHello(in); err == nil {
		t.Fatal("an endless handshake was accepted")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func BenchmarkReadClientHello(b *testing.B) {
	hello := clientHello(b, "api.example.com", "h2", "http/1.1")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ReadClientHello(bytes.NewReader(hello)); err != nil {
			b.Fatal(err)
		}
	}
}
