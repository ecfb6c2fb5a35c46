package tlsca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func newCA(t testing.TB) (*CA, string, string) {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := Create(cert, key, "", 0); err != nil {
		t.Fatal(err)
	}
	ca, err := Load(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return ca, cert, key
}

func TestCreate(t *testing.T) {
	ca, cert, key := newCA(t)
	for f, want := range map[string]os.FileMode{cert: 0o644, key: 0o600} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %#o, want %#o", filepath.Base(f), fi.Mode().Perm(), want)
		}
	}
	c := ca.Certificate()
	if !c.IsCA || c.Subject.CommonName != DefaultName || len(c.SubjectKeyId) == 0 {
		t.Errorf("CA certificate: IsCA %v CN %q SKI %x", c.IsCA, c.Subject.CommonName, c.SubjectKeyId)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key is %T, want ECDSA P-256", c.PublicKey)
	}
	if life := time.Until(c.NotAfter); life < DefaultValidity-time.Minute || life > DefaultValidity+time.Minute {
		t.Errorf("CA valid for %v more, want %v", life, DefaultValidity)
	}
	keyPEM, _ := os.ReadFile(key)
	before, _ := os.ReadFile(cert)
	// Either file existing stops Create, and nothing changes.
	for _, tc := range []struct{ name, cert, key string }{
		{"both exist", cert, key},
		{"cert exists", cert, filepath.Join(t.TempDir(), "new.key")},
		{"key exists", filepath.Join(t.TempDir(), "new.crt"), key},
	} {
		err := Create(tc.cert, tc.key, "x", time.Hour)
		if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "refusing to overwrite") {
			t.Errorf("%s: err = %v, want ErrExists", tc.name, err)
		}
		for _, f := range []string{tc.cert, tc.key} {
			if f != cert && f != key {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("%s: %s was written", tc.name, f)
				}
			}
		}
	}
	if after, _ := os.ReadFile(cert); !bytes.Equal(before, after) {
		t.Error("the certificate changed")
	}
	if after, _ := os.ReadFile(key); !bytes.Equal(keyPEM, after) {
		t.Error("the key changed")
	}
}

func TestLoadRefuses(t *testing.T) {
	_, cert, key := newCA(t)
	_, _, otherKey := newCA(t)
	leafPEM := func() string {
		ca, _ := Load(cert, key)
		l, _ := ca.Leaf("a.example")
		p := filepath.Join(t.TempDir(), "leaf.crt")
		os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Certificate[0]}), 0o644)
		return p
	}()
	wide := filepath.Join(t.TempDir(), "wide.key")
	b, _ := os.ReadFile(key)
	os.WriteFile(wide, b, 0o600)
	os.Chmod(wide, 0o640)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("not pem\n"), 0o600)
	tests := []struct {
		name, cert, key, want string
	}{
		{"group-readable key", cert, wide, "mode 0640"},
		{"key of another CA", cert, otherKey, "does not match"},
		{"not a CA", leafPEM, key, "not a CA certificate"},
		{"no certificate", empty, key, "no PEM CERTIFICATE"},
		{"no key", cert, empty, "no PEM private key"},
		{"missing key", cert, filepath.Join(t.TempDir(), "nope.key"), "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLeaf(t *testing.T) {
	ca, _, _ := newCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	tests := []struct {
		host    string
		wantDNS string
		wantIP  string
	}{
		{"API.Example.COM.", "api.example.com", ""},
		{"10.1.2.3", "", "10.1.2.3"},
		{"[::1]", "", "::1"},
		{"under_score.example", "under_score.example", ""},
	}
	for _, tc := range tests {
		l, err := ca.Leaf(tc.host)
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		c := l.Leaf
		name := tc.wantDNS
		if tc.wantIP != "" {
			name = tc.wantIP
			if len(c.IPAddresses) != 1 || c.IPAddresses[0].String() != tc.wantIP || len(c.DNSNames) != 0 {
				t.Errorf("%s: SAN %v %v, want IP %s", tc.host, c.DNSNames, c.IPAddresses, tc.wantIP)
			}
		} else if len(c.DNSNames) != 1 || c.DNSNames[0] != tc.wantDNS || len(c.IPAddresses) != 0 {
			t.Errorf("%s: SAN %v %v, want DNS %s", tc.host, c.DNSNames, c.IPAddresses, tc.wantDNS)
		}
		if tc.host != "under_score.example" { // x509 refuses '_' in names it verifies
			if _, err := c.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s: does not verify against the CA: %v", tc.host, err)
			}
		}
		if _, ok := c.PublicKey.(*ecdsa.PublicKey); !ok {
			t.Errorf("%s: key %T, want ECDSA", tc.host, c.PublicKey)
		}
		if life := c.NotAfter.Sub(c.NotBefore); life != LeafValidity+clockSkew {
			t.Errorf("%s: valid for %v", tc.host, life)
		}
		if !bytes.Equal(c.AuthorityKeyId, ca.Certificate().SubjectKeyId) {
			t.Errorf("%s: no authority key id", tc.host)
		}
	}
	for _, bad := range []string{"", "a..b", "a b", "x/y", strings.Repeat("a", 64) + ".com", "ex\x00ample"} {
		if _, err := ca.Leaf(bad); !errors.Is(err, ErrBadHost) {
			t.Errorf("Leaf(%q) err = %v, want ErrBadHost", bad, err)
		}
	}
}

// TestLeafCache hammers one host from many goroutines (one mint), then
// fills the cache past its bound (the least recent host goes), then ages a
// leaf past its renewal point (re-minted).
func TestLeafCache(t *testing.T) {
	ca, _, _ := newCA(t)
	var wg sync.WaitGroup
	certs := make([][]byte, 64)
	for i := range certs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := ca.Leaf("hammer.example")
			if err != nil {
				t.Error(err)
				return
			}
			certs[i] = l.Certificate[0]
		}()
	}
	wg.Wait()
	if ca.Minted() != 1 {
		t.Errorf("%d mints for one host from 64 goroutines, want 1", ca.Minted())
	}
	for i := range certs {
		if !bytes.Equal(certs[i], certs[0]) {
			t.Fatal("goroutines got different leaves for one host")
		}
	}

	ca.cache = newLeafCache(4)
	for i := 0; i < 6; i++ {
		ca.Leaf(fmt.Sprintf("h%d.example", i))
	}
	if ca.CacheLen() != 4 {
		t.Errorf("cache holds %d leaves, bound 4", ca.CacheLen())
	}
	n := ca.Minted()
	ca.Leaf("h5.example") // recent: cached
	ca.Leaf("h0.example") // evicted: minted again
	if got := ca.Minted() - n; got != 1 {
		t.Errorf("%d mints for one cached and one evicted host, want 1", got)
	}

	n = ca.Minted()
	ca.now = func() time.Time { return time.Now().Add(LeafValidity - LeafRenewBefore/2) }
	l, _ := ca.Leaf("h5.example")
	if ca.Minted() != n+1 || !l.Leaf.NotAfter.After(time.Now().Add(LeafValidity)) {
		t.Errorf("an expiring leaf was not renewed")
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	certPEM, keyPEM, err := Generate("short", 2*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Parse(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ca.Leaf("a.example")
	if err != nil {
		t.Fatal(err)
	}
	if l.Leaf.NotAfter.After(ca.Certificate().NotAfter) {
		t.Errorf("leaf valid until %v, past its CA's %v", l.Leaf.NotAfter, ca.Certificate().NotAfter)
	}
}

func TestSystemRootsAndBundle(t *testing.T) {
	ca, cert, _ := newCA(t)
	other, _, _ := newCA(t)
	dir := t.TempDir()
	// A bundle file holding two roots, one of them twice.
	var roots bytes.Buffer
	roots.Write(other.CertPEM())
	roots.WriteString("# a comment between blocks\n")
	roots.Write(other.CertPEM())
	_, c2, _ := newCA(t)
	b2, _ := os.ReadFile(c2)
	roots.Write(b2)
	file := filepath.Join(dir, "roots.pem")
	os.WriteFile(file, roots.Bytes(), 0o644)
	emptyDir := t.TempDir()

	t.Setenv("SSL_CERT_FILE", file)
	t.Setenv("SSL_CERT_DIR", emptyDir)
	r, err := SystemRoots()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Certs) != 2 || len(r.Sources) != 1 || r.Sources[0] != file {
		t.Fatalf("roots = %d certs from %v, want 2 from %s", len(r.Certs), r.Sources, file)
	}
	caPEM, _ := os.ReadFile(cert)
	var out bytes.Buffer
	if err := WriteBundle(&out, r, caPEM); err != nil {
		t.Fatal(err)
	}
	var got []*x509.Certificate
	for rest := out.Bytes(); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	if len(got) != 3 || !got[2].Equal(ca.Certificate()) || !got[0].Equal(other.Certificate()) {
		t.Errorf("bundle holds %d certificates; want the 2 roots then the CA", len(got))
	}

	// The CA already among the roots is written once.
	r.Certs = append(r.Certs, ca.Certificate())
	out.Reset()
	WriteBundle(&out, r, caPEM)
	if n := bytes.Count(out.Bytes(), []byte("BEGIN CERTIFICATE")); n != 3 {
		t.Errorf("bundle with the CA among the roots holds %d certificates, want 3", n)
	}
	if err := WriteBundle(&out, r, []byte("nothing")); err == nil {
		t.Error("a CA file without a certificate must fail")
	}

	// SSL_CERT_DIR's folders add their files.
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "one.pem"), ca.CertPEM(), 0o644)
	t.Setenv("SSL_CERT_DIR", d)
	if r, err := SystemRoots(); err != nil || len(r.Certs) != 3 || len(r.Sources) != 2 {
		t.Errorf("with SSL_CERT_DIR: %v, %+v", err, r)
	}

	// Nothing anywhere: a clear error.
	noCerts := filepath.Join(dir, "none.pem")
	os.WriteFile(noCerts, []byte("no certificates\n"), 0o644)
	t.Setenv("SSL_CERT_FILE", noCerts)
	t.Setenv("SSL_CERT_DIR", emptyDir)
	if _, err := SystemRoots(); !errors.Is(err, ErrNoRoots) {
		t.Errorf("no roots: err = %v, want ErrNoRoots", err)
	}
	t.Setenv("SSL_CERT_FILE", filepath.Join(dir, "missing.pem"))
	if _, err := SystemRoots(); err == nil || !strings.Contains(err.Error(), "SSL_CERT_FILE") {
		t.Errorf("missing SSL_CERT_FILE: err = %v", err)
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, s := range []string{"api.example.com", "API.EXAMPLE.", "10.0.0.1", "[::1]", "", "a..b", "*.example", "ex\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		h, err := normalizeHost(host)
		if err != nil {
			return
		}
		if h == "" || len(h) > 253 || strings.ToLower(h) != h {
			t.Fatalf("normalizeHost(%q) = %q", host, h)
		}
	})
}

func BenchmarkLeafMint(b *testing.B) {
	ca, _, _ := newCA(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := ca.mint(fmt.Sprintf("h%d.example", i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeafCached(b *testing.B) {
	ca, _, _ := newCA(b)
	ca.Leaf("cached.example")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ca.Leaf("cached.example")
		}
	})
}
