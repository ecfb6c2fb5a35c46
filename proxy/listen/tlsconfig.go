package listen

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/toolgate/toolgate/internal/section"
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
// Valid after Load (proxy's Config.Validate).
func (t *TLSConfig) CA() *tlsca.CA { return t.ca }

// Upstream returns the client side's TLS settings, for the upstream
// transport. Valid after Load.
func (t *TLSConfig) Upstream() *tls.Config { return t.upstream }

// Same reports whether two loaded sections intercept and verify alike:
// the same CA, upstream CA files with the same contents, and the same
// verification.
func (t *TLSConfig) Same(o *TLSConfig) bool { return bytes.Equal(t.digest, o.digest) }

// Load checks the section, loads the CA and builds the upstream TLS
// settings; resolve makes a path written in the configuration file a path
// to open. Its errors are section errors with paths relative to the
// section (ca_cert, ca_key, upstream_ca[i]). What other sections require
// of it (listen.transparent, a tool on port 443) is checked by their
// owner.
func (t *TLSConfig) Load(resolve func(string) string) error {
	t.ca, t.upstream, t.digest = nil, nil, nil
	var digest bytes.Buffer
	switch {
	case t.CACert == "" && t.CAKey != "":
		return section.Errorf("ca_cert", "required when tls.ca_key is set")
	case t.CACert != "" && t.CAKey == "":
		return section.Errorf("ca_key", "required when tls.ca_cert is set")
	case t.CACert != "":
		keyFile := resolve(t.CAKey)
		ca, err := tlsca.Load(resolve(t.CACert), keyFile)
		if err != nil {
			var pe *fs.PathError
			if errors.Is(err, tlsca.ErrKeyPermissions) || errors.As(err, &pe) && pe.Path == keyFile || strings.Contains(err.Error(), "CA key") {
				return section.Errorf("ca_key", "%v", err)
			}
			return section.Errorf("ca_cert", "%v", err)
		}
		t.ca = ca
		digest.Write(ca.Certificate().Raw)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for i, f := range t.UpstreamCA {
		p := resolve(f)
		if err := tlsca.ReadCertPool(roots, p); err != nil {
			return section.Errorf(fmt.Sprintf("upstream_ca[%d]", i), "%v", err)
		}
		fmt.Fprintf(&digest, "\x00%s", p)
		if b, ok := readSmall(p, 1<<20); ok {
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

// readSmall reads a whole file of at most max bytes; ok is false for a
// larger one, or one that cannot be read.
func readSmall(name string, max int64) ([]byte, bool) {
	f, err := os.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	return b, err == nil && int64(len(b)) <= max
}
