package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/internal/atomicfile"
	"github.com/toolgate/toolgate/proxy/tlsca"
)

// defaultCADays is how long `toolgate ca init` makes a CA valid: 10 years.
const defaultCADays = 3650

func newCACmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "ca",
		Short: "Create the HTTPS interception CA and the trust bundle clients use",
		Long: `toolgate intercepts HTTPS calls to hosts that have tool routes by showing the
client a certificate its own CA signed for the host. Clients must trust that
CA: 'ca init' creates it, 'ca bundle' writes the system roots plus the CA as
one PEM file to point SSL_CERT_FILE, REQUESTS_CA_BUNDLE and the like at.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newCAInitCmd(), newCABundleCmd())
	return c
}

func newCAInitCmd() *cobra.Command {
	var dir, name string
	var days int
	c := &cobra.Command{
		Use:   "init --dir DIR",
		Short: "Create a CA: DIR/ca.crt (0644) and DIR/ca.key (ECDSA P-256, 0600)",
		Long: `init creates a new interception CA in DIR: ca.crt, the certificate clients
trust (mode 0644), and ca.key, its ECDSA P-256 private key (mode 0600). It
refuses to overwrite either file. DIR is created (0755) when missing.

Name them in the configuration as tls.ca_cert and tls.ca_key. Keep ca.key
secret: anyone who holds it can impersonate any host to clients that trust
the CA. In Kubernetes, store both in a Secret.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				return exit.AsUsage(errors.New("--dir is required (see 'toolgate ca init --help')"))
			}
			if days <= 0 {
				return exit.AsUsage(fmt.Errorf("--days must be positive, got %d", days))
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
			cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
			if err := tlsca.Create(cert, key, name, time.Duration(days)*24*time.Hour); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "wrote %s (certificate, 0644) and %s (key, 0600), valid %d days\n", cert, key, days)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "folder to write ca.crt and ca.key into (required)")
	c.Flags().StringVar(&name, "name", tlsca.DefaultName, "the CA certificate's common name")
	c.Flags().IntVar(&days, "days", defaultCADays, "validity in days")
	return c
}

func newCABundleCmd() *cobra.Command {
	var caFile, out string
	c := &cobra.Command{
		Use:   "bundle --ca DIR/ca.crt [--out FILE]",
		Short: "Write the system roots plus toolgate's CA as one PEM bundle",
		Long: `bundle writes every root certificate of the system trust store, followed by
toolgate's CA certificate, as one PEM file: to standard output, or to FILE
(mode 0644). Clients pointed at it trust public servers as before and
toolgate's intercepted hosts too; a client pointed at toolgate's CA alone
would fail for every host toolgate tunnels instead of intercepting.

The system roots are read from SSL_CERT_FILE when set, else from the first
of the usual bundles that exists (Debian/Ubuntu
/etc/ssl/certs/ca-certificates.crt, RHEL/Fedora
/etc/pki/tls/certs/ca-bundle.crt and
/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem, openSUSE
/etc/ssl/ca-bundle.pem, Alpine /etc/ssl/cert.pem), plus SSL_CERT_DIR's
folders when set. It fails when no root is found.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if caFile == "" {
				return exit.AsUsage(errors.New("--ca is required (see 'toolgate ca bundle --help')"))
			}
			caPEM, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("read CA certificate: %w", err)
			}
			roots, err := tlsca.SystemRoots()
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := tlsca.WriteBundle(&b, roots, caPEM); err != nil {
				return fmt.Errorf("%s: %w", caFile, err)
			}
			if out == "" || out == "-" {
				_, err := c.OutOrStdout().Write(b.Bytes())
				return err
			}
			if err := atomicfile.WriteFile(out, b.Bytes(), 0o644); err != nil {
				return fmt.Errorf("write bundle: %w", err)
			}
			fmt.Fprintf(c.ErrOrStderr(), "wrote %s: %d system roots from %v, plus %s\n", out, len(roots.Certs), roots.Sources, caFile)
			return nil
		},
	}
	c.Flags().StringVar(&caFile, "ca", "", "toolgate's CA certificate (required)")
	c.Flags().StringVarP(&out, "out", "o", "", "write to FILE (mode 0644) instead of standard output")
	return c
}
