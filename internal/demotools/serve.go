package demotools

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"
)

// shutdownGrace bounds how long Serve waits for requests under way once
// ctx ends, as the sidecar's stop does.
const shutdownGrace = 10 * time.Second

// Serve serves the demo upstream on listen until ctx ends, for `toolgate
// demo upstream`, printing its URL on out. With certFile it serves HTTPS
// with a new self-signed certificate for 127.0.0.1 and localhost, written
// to certFile (PEM).
func Serve(ctx context.Context, out io.Writer, listen, certFile string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("demo upstream: %w", err)
	}
	scheme := "http"
	if certFile != "" {
		cert, err := selfSignedCert(certFile)
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	srv := &http.Server{Handler: New().Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "demo upstream %s://%s (Ctrl-C stops it)\n", scheme, ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("demo upstream: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// selfSignedCert makes a certificate for 127.0.0.1 and localhost, valid for
// 30 days, and writes it to file as PEM (the key stays in memory).
func selfSignedCert(file string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "toolgate demo upstream"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, fmt.Errorf("demo upstream: write --tls-cert: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
