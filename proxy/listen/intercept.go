package listen

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/connqueue"
	"github.com/toolgate/toolgate/proxy/tlsca"
)

// Target says where the calls on one intercepted connection go.
type Target struct {
	Scheme    string // "https" or "http"
	Authority string // host[:port] calls are routed by and sent to; "" means the Host header's
	Port      string // the destination port, for a Host header without one
	Dial      string // the address to dial instead of resolving Authority; "" to resolve
	Kind      string // the event's listener: "forward" or "transparent"
}

type targetKey struct{}

// Intercept says how NewInterceptor serves.
type Intercept struct {
	// ReadHeaderTimeout and IdleTimeout are the server's
	// (limits.read_header_timeout, limits.idle_timeout).
	ReadHeaderTimeout, IdleTimeout time.Duration
	// ErrorLog receives the server's errors.
	ErrorLog *log.Logger
	// Handshake, when not nil, is called once a client's TLS handshake
	// ended: err is nil when it succeeded (the connection is then served),
	// else the connection is closed after the call.
	Handshake func(c net.Conn, host string, t *Target, err error)
}

// Interceptor serves decrypted (or redirected plain) connections with one
// internal http.Server, whose handler gets each request with its
// connection's Target.
type Interceptor struct {
	ca        *tlsca.CA
	ln        *connqueue.Listener
	srv       *http.Server
	targets   sync.Map // net.Conn -> *Target, until the server accepts it
	handshake func(net.Conn, string, *Target, error)
}

// NewInterceptor returns an interceptor whose leaf certificates ca mints
// and whose requests serve answers.
func NewInterceptor(ca *tlsca.CA, serve func(w http.ResponseWriter, r *http.Request, t *Target), cfg Intercept) *Interceptor {
	m := &Interceptor{ca: ca, ln: connqueue.New("intercept"), handshake: cfg.Handshake}
	m.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t, _ := r.Context().Value(targetKey{}).(*Target)
			if t == nil {
				http.Error(w, "toolgate: connection without a destination", http.StatusInternalServerError)
				return
			}
			serve(w, r, t)
		}),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          cfg.ErrorLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if t, ok := m.targets.LoadAndDelete(c); ok {
				return context.WithValue(ctx, targetKey{}, t)
			}
			return ctx
		},
	}
	return m
}

// Serve serves the connections handed over until Shutdown.
func (m *Interceptor) Serve() error { return m.srv.Serve(m.ln) }

// Shutdown stops taking connections and waits for the requests under way,
// as http.Server.Shutdown does.
func (m *Interceptor) Shutdown(ctx context.Context) error {
	m.ln.Close()
	return m.srv.Shutdown(ctx)
}

// Hand gives a connection, ready for HTTP, to the server.
func (m *Interceptor) Hand(c net.Conn, t *Target) {
	m.targets.Store(c, t)
	if !m.ln.Push(c) {
		m.targets.Delete(c)
		c.Close()
	}
}

// ServeTLS completes the client's handshake with a leaf for host and
// hands the connection over.
func (m *Interceptor) ServeTLS(c net.Conn, host string, t *Target) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return m.ca.Leaf(host)
		},
	}
	tc := tls.Server(c, cfg)
	c.SetDeadline(time.Now().Add(HandshakeTimeout))
	if err := tc.Handshake(); err != nil {
		if m.handshake != nil {
			m.handshake(c, host, t, err)
		}
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	if m.handshake != nil {
		m.handshake(c, host, t, nil)
	}
	m.Hand(tc, t)
}
