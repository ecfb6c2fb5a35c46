// Package tlsca is toolgate's certificate authority for HTTPS interception:
// it creates the CA (an ECDSA P-256 key and a self-signed certificate),
// loads it with its key's permissions checked, mints a short-lived leaf
// certificate per intercepted host (cached, bounded, one mint per host at a
// time), and writes the trust bundle clients use: the system roots plus the
// CA, in one PEM file.
//
// The CA key never leaves its file but for the process that loads it; it
// must be readable by its owner only (0600 or stricter).
package tlsca

import (
	"bytes"
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and limits.
const (
	// DefaultName is the CA certificate's common name.
	DefaultName = "toolgate interception CA"
	// DefaultValidity is how long a new CA is valid: 10 years. A CA is
	// mounted into every client's trust store; rotating it means
	// redistributing the bundle, so it lives long and its key stays in a
	// Secret.
	DefaultValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is how long a minted leaf certificate is valid. Leaves
	// are re-minted from the cache when less than LeafRenewBefore remains.
	LeafValidity = 24 * time.Hour
	// LeafRenewBefore is how much validity a cached leaf must still have
	// to be served.
	LeafRenewBefore = time.Hour
	// DefaultCacheSize bounds the leaf cache: the least recently used host's
	// leaf is dropped beyond it.
	DefaultCacheSize = 1024
	// maxFileBytes bounds every certificate or key file read.
	maxFileBytes = 1 << 20
	// clockSkew backdates NotBefore, so a client whose clock is a little
	// behind accepts a fresh certificate.
	clockSkew = time.Hour
)

// Sentinels.
var (
	// ErrExists is returned by Create when the certificate or key file
	// already exists; nothing is overwritten.
	ErrExists = errors.New("file exists")
	// ErrKeyPermissions is returned by Load when the key file is readable
	// or writable by group or others.
	ErrKeyPermissions = errors.New("key file is accessible by group or others")
	// ErrBadHost is returned by Leaf for a host name no certificate can be
	// minted for.
	ErrBadHost = errors.New("not a valid host name or IP address")
)

// Create writes a new CA: certFile (PEM certificate, mode 0644) and keyFile
// (PEM PKCS#8 ECDSA P-256 key, mode 0600). It refuses, writing nothing, when
// either file exists. name is the certificate's common name (DefaultName
// when ""), validity its lifetime (DefaultValidity when 0).
func Create(certFile, keyFile, name string, validity time.Duration) error {
	for _, f := range []string{certFile, keyFile} {
		if _, err := os.Lstat(f); err == nil {
			return fmt.Errorf("%s: %w; refusing to overwrite a CA (remove it first to replace it)", f, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	certPEM, keyPEM, err := Generate(name, validity, time.Now())
	if err != nil {
		return err
	}
	if err := writeExclusive(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeExclusive(certFile, certPEM, 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

// writeExclusive creates name (failing when it exists) with exactly mode,
// whatever the umask.
func writeExclusive(name string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w; refusing to overwrite a CA", name, ErrExists)
		}
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// Generate returns a new self-signed CA certificate and its key, both PEM,
// valid from now (backdated an hour for clock skew) for validity.
func Generate(name string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if name == "" {
		name = DefaultName
	}
	if validity == 0 {
		validity = DefaultValidity
	}
	if validity < 0 {
		return nil, nil, errors.New("validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"toolgate"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		// SubjectKeyId is derived from the key by CreateCertificate, and
		// becomes every leaf's AuthorityKeyId (strict verifiers such as
		// Python 3.13's want both).
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

// CA is a loaded certificate authority that mints leaf certificates. Its
// methods are safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	cache   *leafCache
	minted  atomic.Uint64
	now     func() time.Time
}

// Load reads a CA's certificate and key. The key file must not be
// accessible by group or others (ErrKeyPermissions), the certificate must
// be a CA certificate, and the key must match it.
func Load(certFile, keyFile string) (*CA, error) {
	certPEM, err := readFile(certFile)
	if err != nil {
		return nil, err
	}
	if err := checkKeyMode(keyFile); err != nil {
		return nil, err
	}
	keyPEM, err := readFile(keyFile)
	if err != nil {
		return nil, err
	}
	return Parse(certPEM, keyPEM)
}

// checkKeyMode refuses a key file that group or others may access.
func checkKeyMode(keyFile string) error {
	fi, err := os.Stat(keyFile)
	if err != nil {
		return err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %#o: %w; a CA key must be readable by its owner only (chmod 600 %s)",
			keyFile, fi.Mode().Perm(), ErrKeyPermissions, keyFile)
	}
	return nil
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxFileBytes)
	}
	return b, nil
}

// Parse builds a CA from PEM bytes: the first CERTIFICATE block of certPEM
// and the first private key block of keyPEM.
func Parse(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	for cb != nil && cb.Type != "CERTIFICATE" {
		cb, _ = pem.Decode(nil)
	}
	if cb == nil {
		return nil, errors.New("no PEM CERTIFICATE block in the CA certificate file")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, errors.New("the CA certificate is not a CA certificate (basic constraints CA:FALSE)")
	}
	var key crypto.Signer
	rest := keyPEM
	for {
		var kb *pem.Block
		kb, rest = pem.Decode(rest)
		if kb == nil {
			return nil, errors.New("no PEM private key block in the CA key file")
		}
		if key, err = parseKey(kb); err == nil && key != nil {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse CA key: %w", err)
		}
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("the CA key does not match the CA certificate")
	}
	ca := &CA{cert: cert, key: key, now: time.Now,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}
	ca.cache = newLeafCache(DefaultCacheSize)
	return ca, nil
}

func parseKey(b *pem.Block) (crypto.Signer, error) {
	switch b.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("unsupported key type")
		}
		return s, nil
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(b.Bytes)
	}
	return nil, nil // not a key block: keep looking
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	ea, ok := a.(equaler)
	return ok && ea.Equal(b)
}

// Certificate returns the CA certificate. The caller must not change it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate, PEM encoded: what clients trust.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Minted counts the leaf certificates minted since Load (cache misses and
// renewals).
func (ca *CA) Minted() uint64 { return ca.minted.Load() }

// CacheLen is how many hosts' leaves the cache holds.
func (ca *CA) CacheLen() int { return ca.cache.len() }

// Leaf returns a certificate for host (a DNS name or an IP address, without
// a port), minted on first use and cached. Concurrent calls for one host
// mint once.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	h, err := normalizeHost(host)
	if err != nil {
		return nil, err
	}
	return ca.cache.get(h, ca.now, func() (*tls.Certificate, error) { return ca.mint(h) })
}

// normalizeHost lower-cases a host, drops a trailing dot and IPv6 brackets,
// and refuses what cannot be a certificate name.
func normalizeHost(host string) (string, error) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), nil
	}
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("%q: %w", host, ErrBadHost)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%q: %w", host, ErrBadHost)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || (c == '*' && i == 0 && len(label) == 1)) {
				return "", fmt.Errorf("%q: %w", host, ErrBadHost)
			}
		}
	}
	return h, nil
}

// mint creates a leaf for a normalized host: ECDSA P-256, SAN = the host
// (DNS name or IP), server authentication only, valid for LeafValidity but
// never past the CA.
func (ca *CA) mint(host string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := ca.now()
	notAfter := now.Add(LeafValidity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host, Organization: []string{"toolgate"}},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca.minted.Add(1)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// leafCache is a bounded LRU of leaves by host. A host being minted has an
// entry whose ready channel closes when the mint ends, so concurrent
// requests for one host wait for one mint instead of each minting.
type leafCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *leafEntry, most recent first
	byKey map[string]*list.Element
}

type leafEntry struct {
	host  string
	ready chan struct{}
	cert  *tls.Certificate // set before ready closes; nil on error
	err   error
}

func newLeafCache(max int) *leafCache {
	return &leafCache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *leafCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *leafCache) get(host string, now func() time.Time, mint func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	c.mu.Lock()
	if el, ok := c.byKey[host]; ok {
		e := el.Value.(*leafEntry)
		select {
		case <-e.ready:
			if e.cert != nil && now().Add(LeafRenewBefore).Before(e.cert.Leaf.NotAfter) {
				c.order.MoveToFront(el)
				c.mu.Unlock()
				return e.cert, nil
			}
			// Expiring (or failed): replace it below.
			c.order.Remove(el)
			delete(c.byKey, host)
		default:
			c.order.MoveToFront(el)
			c.mu.Unlock()
			<-e.ready
			return e.cert, e.err
		}
	}
	e := &leafEntry{host: host, ready: make(chan struct{})}
	c.byKey[host] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.byKey, old.Value.(*leafEntry).host)
	}
	c.mu.Unlock()

	e.cert, e.err = mint()
	close(e.ready)
	if e.err != nil {
		c.mu.Lock()
		if el, ok := c.byKey[host]; ok && el.Value == e {
			c.order.Remove(el)
			delete(c.byKey, host)
		}
		c.mu.Unlock()
	}
	return e.cert, e.err
}
