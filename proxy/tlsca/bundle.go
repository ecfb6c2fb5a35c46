package tlsca

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// SystemBundleFiles are the system trust bundles, tried in order; the first
// that exists is read (the list crypto/x509 uses on Linux).
var SystemBundleFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7+
	"/etc/ssl/cert.pem",                                 // Alpine
}

// SystemCertDirs are the folders of single certificates read when no
// bundle file exists.
var SystemCertDirs = []string{"/etc/ssl/certs", "/etc/pki/tls/certs"}

// ErrNoRoots is returned when no system root certificate was found.
var ErrNoRoots = errors.New("no system root certificates found")

// Roots are certificates read from the system's trust store, and where
// they came from.
type Roots struct {
	// Certs are the certificates, without duplicates, in the order read.
	Certs []*x509.Certificate
	// Sources names every file or folder that contributed.
	Sources []string
}

// SystemRoots reads the system's root certificates the way OpenSSL and Go
// find them: SSL_CERT_FILE when set (it replaces the bundle list), else the
// first of SystemBundleFiles that exists; plus every file in SSL_CERT_DIR
// (colon-separated) when set, or in SystemCertDirs when no bundle file was
// found. Duplicates are dropped. It fails with ErrNoRoots when nothing was
// found, and when SSL_CERT_FILE or SSL_CERT_DIR names something unreadable.
func SystemRoots() (*Roots, error) {
	r := &Roots{}
	seen := map[string]bool{}
	add := func(data []byte) int {
		n := 0
		for len(data) > 0 {
			var b *pem.Block
			b, data = pem.Decode(data)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" || seen[string(b.Bytes)] {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				continue // a certificate Go cannot parse is of no use to a client either
			}
			seen[string(b.Bytes)] = true
			r.Certs = append(r.Certs, c)
			n++
		}
		return n
	}
	fileFound := false
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		data, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("SSL_CERT_FILE: %w", err)
		}
		if add(data) > 0 {
			r.Sources = append(r.Sources, f)
		}
		fileFound = true
	} else {
		for _, f := range SystemBundleFiles {
			data, err := readFile(f)
			if err != nil {
				continue
			}
			fileFound = true
			if add(data) > 0 {
				r.Sources = append(r.Sources, f)
			}
			break
		}
	}
	dirs := SystemCertDirs
	explicitDirs := false
	if d := os.Getenv("SSL_CERT_DIR"); d != "" {
		dirs, explicitDirs = filepath.SplitList(d), true
	} else if fileFound {
		dirs = nil
	}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			if explicitDirs {
				return nil, fmt.Errorf("SSL_CERT_DIR: %w", err)
			}
			continue
		}
		n := 0
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			p := filepath.Join(d, e.Name())
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if data, err := readFile(p); err == nil {
				n += add(data)
			}
		}
		if n > 0 {
			r.Sources = append(r.Sources, d)
		}
	}
	if len(r.Certs) == 0 {
		return nil, fmt.Errorf("%w (looked in SSL_CERT_FILE, SSL_CERT_DIR, %s and %s)", ErrNoRoots,
			strings.Join(SystemBundleFiles, ", "), strings.Join(SystemCertDirs, ", "))
	}
	return r, nil
}

// WriteBundle writes roots followed by the CA certificates in caPEM (one or
// more PEM CERTIFICATE blocks), each re-encoded as a plain PEM block. A CA
// already among the roots is written once, last. It fails when caPEM holds
// no certificate.
func WriteBundle(w io.Writer, roots *Roots, caPEM []byte) error {
	var cas [][]byte
	for rest := caPEM; len(rest) > 0; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("parse CA certificate: %w", err)
		}
		cas = append(cas, b.Bytes)
	}
	if len(cas) == 0 {
		return errors.New("no PEM CERTIFICATE block in the CA certificate")
	}
	isCA := map[string]bool{}
	for _, c := range cas {
		isCA[string(c)] = true
	}
	for _, c := range roots.Certs {
		if isCA[string(c.Raw)] {
			continue
		}
		if err := pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}); err != nil {
			return err
		}
	}
	for _, c := range cas {
		if err := pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: c}); err != nil {
			return err
		}
	}
	return nil
}

// ReadCertPool reads the PEM certificates of files into a pool; a file
// holding no certificate is an error.
func ReadCertPool(pool *x509.CertPool, files ...string) error {
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return err
		}
		if !pool.AppendCertsFromPEM(data) {
			return fmt.Errorf("%s holds no PEM certificate", f)
		}
	}
	return nil
}
