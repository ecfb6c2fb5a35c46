package proxy

import "github.com/toolgate/toolgate/proxy/internal/conf"

// sameTLS reports whether two validated configs intercept and verify alike.
func sameTLS(a, b *conf.Config) bool {
	return a.Listen.Transparent == b.Listen.Transparent && a.TLS.Same(&b.TLS)
}
