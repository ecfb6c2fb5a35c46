package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/toolgate/toolgate/proxy/tlsca"
)

// TLSConfig is the tls section: the CA that signs intercepted hosts'
// certificates, and how upstream certificates are verified. The whole
// section is fixed at start: a reload that changes it (or the files it
// names) is refused; restart to change it.
type TLSConfig struct {
	// CACert is the CA certificate (PEM) that signs the leaf certificates
	// toolgate shows intercepted clients, relative to the configuration
	// file. Set both CACert and CAKey, or neither. Required when
	// listen.transparent is on or a tool's match.host names port 443.
	// Default "": no interception (CONNECT to a host with tool routes is
	// then refused, never tunnelled past the checks).
	CACert string `yaml:"ca_cert"`
	// CAKey is the CA's private key (PEM), relative to the configuration
	// file. The file must be readable by its owner only (0600 or stricter).
	CAKey string `yaml:"ca_key"`
	// UpstreamCA lists PEM files of extra certificate authorities trusted
	// for upstream servers, on top of the system roots. Default: none.
	UpstreamCA []string `yaml:"upstream_ca"`
	// InsecureSkipVerify turns off verification of upstream certificates.
	// For test rigs only; logged as a warning at start and on every
	// reload. Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`

	ca       *tlsca.CA
	upstream *tls.Config // the client side, for the upstream transport
	digest   []byte      // of the CA and upstream CA files, for restart-only checks
}

// CA returns the loaded interception CA, or nil when none is configured.
// Valid after Config.Validate.
func (t *TLSConfig) CA() *tlsca.CA { return t.ca }

// validateTLS checks the tls section and listen.transparent, loads the CA
// and builds the upstream TLS settings. It runs after the tools are
// compiled.
func (c *Config) validateTLS() error {
	t := &c.TLS
	t.ca, t.upstream, t.digest = nil, nil, nil
	if c.Listen.Transparent != "" && runtime.GOOS != "linux" {
		return fieldErr("listen.transparent", "transparent mode needs Linux (SO_ORIGINAL_DST); this is %s", runtime.GOOS)
	}
	var digest bytes.Buffer
	switch {
	case t.CACert == "" && t.CAKey != "":
		return fieldErr("tls.ca_cert", "required when tls.ca_key is set")
	case t.CACert != "" && t.CAKey == "":
		return fieldErr("tls.ca_key", "required when tls.ca_cert is set")
	case t.CACert != "":
		keyFile := c.resolve(t.CAKey)
		ca, err := tlsca.Load(c.resolve(t.CACert), keyFile)
		if err != nil {
			var pe *fs.PathError
			if errors.Is(err, tlsca.ErrKeyPermissions) || errors.As(err, &pe) && pe.Path == keyFile || strings.Contains(err.Error(), "CA key") {
				return fieldErr("tls.ca_key", "%v", err)
			}
			return fieldErr("tls.ca_cert", "%v", err)
		}
		t.ca = ca
		digest.Write(ca.Certificate().Raw)
	case c.Listen.Transparent != "":
		return fieldErr("tls.ca_cert", "required when listen.transparent is on: TLS connections are intercepted with certificates this CA signs (create one with `toolgate ca init`)")
	default:
		for i, tl := range c.tools {
			if tl.port == "443" {
				return fieldErr(fmt.Sprintf("tools[%d].match.host", i), "names port 443, so its calls are HTTPS: set tls.ca_cert and tls.ca_key to intercept them (create a CA with `toolgate ca init`)")
			}
		}
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for i, f := range t.UpstreamCA {
		p := c.resolve(f)
		if err := tlsca.ReadCertPool(roots, p); err != nil {
			return fieldErr(fmt.Sprintf("tls.upstream_ca[%d]", i), "%v", err)
		}
		fmt.Fprintf(&digest, "\x00%s", p)
		if b, err := readLimited(p, 1<<20); err == nil {
			digest.Write(b)
		}
	}
	t.upstream = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.InsecureSkipVerify {
		digest.WriteString("\x00insecure")
	}
	t.digest = digest.Bytes()
	return nil
}

// resolve makes a path from the file relative to the configuration's folder.
func (c *Config) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

// sameTLS reports whether two validated configs intercept and verify alike.
func sameTLS(a, b *Config) bool {
	return a.Listen.Transparent == b.Listen.Transparent && bytes.Equal(a.TLS.digest, b.TLS.digest)
}
