package conf

import (
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/toolgate/toolgate/internal/section"
)

// validateTLS checks what the listeners require of the tls section
// (listen.TLSConfig) and loads it. It runs after the tools are compiled.
func (c *Config) validateTLS() error {
	t := &c.TLS
	if c.Listen.Transparent != "" && runtime.GOOS != "linux" {
		return fieldErr("listen.transparent", "transparent mode needs Linux (SO_ORIGINAL_DST); this is %s", runtime.GOOS)
	}
	if t.CACert == "" && t.CAKey == "" {
		if c.Listen.Transparent != "" {
			return fieldErr("tls.ca_cert", "required when listen.transparent is on: TLS connections are intercepted with certificates this CA signs (create one with `toolgate ca init`)")
		}
		for i, tl := range c.Compiled {
			if tl.Port == "443" {
				return fieldErr(fmt.Sprintf("tools[%d].match.host", i), "names port 443, so its calls are HTTPS: set tls.ca_cert and tls.ca_key to intercept them (create a CA with `toolgate ca init`)")
			}
		}
	}
	return section.Under("tls", t.Load(c.resolve))
}

// resolve makes a path from the file relative to the configuration's folder.
func (c *Config) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}
