// Package admin owns the admin section of the configuration file: the
// listener serving health, readiness, metrics, status and reload (the
// sidecar serves it). Its fields state their defaults, and Validate applies
// them, reads the token file and checks the addresses, once, at load.
package admin

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/proxy"
)

// Config configures the admin listener.
type Config struct {
	// Listen is the admin address. Default "127.0.0.1:18090"; "off" disables it.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiler (net/http/pprof) under /debug/pprof/ on the
	// admin listener, for profiling a running sidecar in place. Default
	// false. It needs a loopback admin.listen, whatever
	// listen.allow_non_loopback says, and answers loopback callers only.
	Pprof bool `yaml:"pprof"`
	// TokenFile names a file (relative to the configuration file) holding a
	// token every admin request but the probes (/healthz, /readyz) and
	// /ca.crt must present as Authorization: Bearer TOKEN, for operators who
	// expose the admin listener beyond loopback. Surrounding white space is
	// ignored; the token must hold at least MinTokenBytes bytes. Read
	// at start. Default: none (no token asked).
	TokenFile string `yaml:"token_file"`

	token string // TokenFile's contents
}

// MinTokenBytes is the shortest token admin.token_file may hold.
const MinTokenBytes = 16

// MaxTokenBytes bounds admin.token_file.
const MaxTokenBytes = 4096

// DefaultListen is admin.listen's default.
const DefaultListen = "127.0.0.1:18090"

// Token is admin.token_file's token; "" when none is set.
func (c *Config) Token() string { return c.token }

// Validate applies the section's defaults, reads the token file (relative
// to dir) and checks the address: loopback unless allowNonLoopback
// (listen.allow_non_loopback), and loopback whatever it says when pprof
// is on. Errors are at the section's fields ("listen", "token_file",
// "pprof"). That no other listener claims the address is the caller's to
// check, against the proxy's listeners.
func (c *Config) Validate(dir string, allowNonLoopback bool) error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.TokenFile != "" {
		tok, err := readToken(section.Resolve(dir, c.TokenFile))
		if err != nil {
			return section.At("token_file", err)
		}
		c.token = tok
	}
	if c.Pprof {
		if c.Listen == "off" {
			return section.Errorf("pprof", "needs the admin listener (admin.listen is off)")
		}
		if err := proxy.CheckListenAddr(c.Listen, false); err != nil {
			return section.At("pprof", fmt.Errorf("serves on a loopback admin.listen only: %w", err))
		}
	}
	if c.Listen == "off" {
		return nil
	}
	if err := proxy.CheckListenAddr(c.Listen, allowNonLoopback); err != nil {
		return section.At("listen", err)
	}
	return nil
}

// readToken reads a token file: at most MaxTokenBytes, white space
// around it ignored, at least MinTokenBytes left.
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTokenBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxTokenBytes {
		return "", fmt.Errorf("%s is over %d bytes", path, MaxTokenBytes)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenBytes {
		return "", fmt.Errorf("%s holds a token shorter than %d bytes", path, MinTokenBytes)
	}
	return tok, nil
}
