package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/canonical"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
	"github.com/toolgate/toolgate/proxy/listen"
	"github.com/toolgate/toolgate/proxy/tlsca"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// HTTPS interception. A CONNECT to a host that has tool routes, and a
// redirected TLS connection on the transparent listener (transparent.go),
// end in the same place: toolgate completes the client's TLS handshake with
// a leaf certificate its CA mints for the host, then hands the decrypted
// connection to one internal http.Server (listen.Interceptor) whose handler runs the same
// pipeline (handle) as every other listener, with the same events. The
// upstream side is a fresh TLS connection from the shared transport,
// verified against the system roots plus tls.upstream_ca.
//
// goproxy still answers the CONNECT: it refuses or tunnels as before, and
// for an intercepted host it hands over the hijacked connection
// (ConnectHijack). toolgate terminates TLS itself rather than through
// goproxy's MITM loop, because that loop reads requests with its own parser
// and gives them a context that never ends when the client goes away; the
// pipeline needs net/http's requests (bounded headers, a context that ends
// with the caller, HTTP/2) to answer exactly as over plain HTTP.

// ReasonNotIntercepted is the event and envelope reason of a CONNECT to a
// host with tool routes while no CA is configured: tunnelling it would let
// the calls past every check, so it is refused.
const ReasonNotIntercepted = "not_intercepted"

// newInterceptor returns the interceptor, whose requests serveIntercepted
// runs through the pipeline.
func newInterceptor(s *Server, ca *tlsca.CA, lim conf.LimitsConfig) *listen.Interceptor {
	return listen.NewInterceptor(ca, s.serveIntercepted, listen.Intercept{
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
		Handshake: func(c net.Conn, host string, t *listen.Target, err error) {
			if err != nil {
				s.tlsm.conns.WithLabelValues(t.Kind, "handshake_failed").Inc()
				s.LogLimited(&s.tlsm.handshakeLog, slog.LevelWarn, "TLS handshake with an intercepted client failed; does the client trust toolgate's CA (toolgate ca bundle)?",
					"listener", t.Kind, "host", host, "client", c.RemoteAddr().String(), "err", err)
				return
			}
			s.tlsm.conns.WithLabelValues(t.Kind, "intercepted").Inc()
		},
	})
}

// serveIntercepted runs one decrypted (or redirected plain) request through the
// pipeline.
func (s *Server) serveIntercepted(w http.ResponseWriter, r *http.Request, t *listen.Target) {
	listen.BodyDeadline(w, r, s.state.Load().Cfg.Limits.BodyTimeout)
	authority := t.Authority
	if authority == "" { // plain HTTP on the transparent listener: the Host header routes
		h := r.Host
		if h == "" {
			h = t.Dial
		}
		hh, p, err := net.SplitHostPort(h)
		if err != nil {
			hh, p = strings.Trim(h, "[]"), t.Port
		}
		authority = conf.JoinAuthority(hh, p, "80")
	}
	u := &url.URL{Scheme: t.Scheme, Host: authority, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	if t.Dial != "" {
		r = r.WithContext(upstream.WithDialAddr(r.Context(), t.Dial))
	}
	writeResponse(w, s.Handle(r, t.Kind, u))
}

// decideConnect decides a CONNECT to hostport, by its canonical host and
// port (canonical.go): intercepted when a tool may match its calls and a
// CA is configured; refused when a tool may match but no CA is configured
// (a tunnel would skip the checks), when the host or port is ambiguous, or
// when no tool matches and unmatched calls are denied; tunnelled otherwise
// (sniffed first when tools name hosts: sniffConnect).
func (s *Server) decideConnect(ctx context.Context, st *pipe.State, hostport string) (listen.ConnectAction, *conf.Refusal) {
	host, port, ok := canonConnect(ctx, st.Cfg, hostport)
	if !ok {
		return listen.ConnectRefuse, conf.Ambiguous("CONNECT to " + hostport + ": the host or port is not one toolgate can read unambiguously")
	}
	if conf.HasRoutes(st.Cfg.Compiled, host, port) {
		if s.mitm != nil {
			return listen.ConnectIntercept, nil
		}
		return listen.ConnectRefuse, conf.Refuse(bucketing.CodePolicy, ReasonNotIntercepted,
			"CONNECT to "+hostport+" refused: tools match this host, and its HTTPS calls cannot be checked without a CA (set tls.ca_cert and tls.ca_key)", nil)
	}
	if st.Cfg.Unmatched == conf.UnmatchedDeny {
		return listen.ConnectRefuse, conf.Refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
			"CONNECT to "+hostport+" refused: it matches no tool and unmatched calls are denied (unmatched: pass lets them through)", nil)
	}
	// The egress guard, so that a refusal is answered with its envelope:
	// goproxy's own tunnel dial checks again (and dials only what it
	// checked), and a name that answers differently then is still refused
	// (tunnelled records it). A sniffed tunnel is checked by its dial.
	if !namesHosts(st.Cfg) && st.Guard != nil {
		rh, rp, err := net.SplitHostPort(hostport)
		if err != nil {
			rh, rp = hostport, "443"
		}
		if _, err := st.Guard.Check(ctx, rh, rp); err != nil {
			if de := (*egress.DeniedError)(nil); errors.As(err, &de) {
				return listen.ConnectRefuse, conf.Refuse(de.Code(), de.Reason(), de.Detail(), nil)
			}
		}
	}
	return listen.ConnectTunnel, nil
}

// canonConnect returns the canonical host (placed among tool hosts) and
// port of a CONNECT's or a redirected connection's destination; the port
// defaults to 443.
func canonConnect(ctx context.Context, cfg *conf.Config, hostport string) (host, port string, ok bool) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = hostport, ""
	}
	if host, ok = canonical.Host(h); !ok {
		return "", "", false
	}
	if port, ok = canonical.Port(p, "https"); !ok {
		return "", "", false
	}
	host, ok = cfg.Aliases.Place(ctx, host, cfg.IsToolHost)
	return host, port, ok
}

// namesHosts reports whether any tool names a host: only then can a
// tunnel carry calls meant for a tool under another address.
func namesHosts(c *conf.Config) bool {
	for _, t := range c.Compiled {
		if t.Host != "" {
			return true
		}
	}
	return false
}

// interceptConnect answers a hijacked CONNECT and intercepts its TLS.
func (s *Server) interceptConnect(c net.Conn, hostport string) {
	c.SetDeadline(time.Now().Add(listen.HandshakeTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		return
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, "443"
	}
	s.mitm.ServeTLS(c, strings.Trim(host, "[]"), &listen.Target{Scheme: "https", Authority: conf.JoinAuthority(strings.Trim(host, "[]"), port, "443"), Kind: "forward"})
}

// sniffConnect answers a hijacked CONNECT to a host no tool matches, while
// tools name other hosts, and reads the tunnel's first bytes before any
// reach the destination: a TLS ClientHello whose SNI names a host a tool
// may match is intercepted (its calls go to https://SNI:port, dialled at
// the CONNECT's address) or, without a CA, refused; plain HTTP is served
// by the interceptor, each request routed by its Host header and dialled
// at the CONNECT's address. Anything else is tunnelled and recorded. A
// client that sends nothing within listen.HandshakeTimeout is cut off: a protocol
// whose server speaks first cannot be checked and does not pass.
func (s *Server) sniffConnect(c net.Conn, r *http.Request, hostport string) {
	st := s.state.Load()
	c.SetDeadline(time.Now().Add(listen.HandshakeTimeout))
	// Dial first, so that a destination that cannot be reached is
	// answered as the failure it is rather than with a 200.
	h, p, _ := canonConnect(r.Context(), st.Cfg, hostport)
	up, err := s.dial(st.Cfg.Guarded(context.Background(), h, p), "tcp", hostport)
	if de := (*egress.DeniedError)(nil); errors.As(err, &de) {
		s.connect(st, r, hostport, conf.Refuse(de.Code(), de.Reason(), de.Detail(), nil)).Write(c)
		c.Close()
		return
	}
	if errors.Is(err, conf.ErrOtherName) {
		s.connect(st, r, hostport, conf.Refuse(bucketing.CodePolicy, bucketing.ReasonNotAllowlist,
			"CONNECT to "+hostport+" refused: it reached a loopback host tools name, under another name", nil)).Write(c)
		c.Close()
		return
	}
	if err != nil {
		ref := s.tunnelled(st, "connect", r, hostport, err)
		body := bucketing.Refusal(ref.Code, ref.Reason, ref.Detail, nil).Marshal()
		pipe.EnvelopeResponse(r, http.StatusBadGateway, string(ref.Code), nil, body).Write(c)
		c.Close()
		return
	}
	// The tunnel is not used when its bytes are intercepted or refused.
	keep := false
	defer func() {
		if !keep {
			up.Close()
		}
	}()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		return
	}
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		port = "443"
	}
	br := bufio.NewReaderSize(c, 16)
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	pc := listen.Prefixed(c, br)
	if first[0] == listen.RecordTypeHandshake {
		sni, hello, err := listen.ReadClientHello(br)
		if err != nil {
			s.connect(st, r, hostport, conf.Ambiguous("CONNECT to "+hostport+" carries bytes that start like TLS but hold no ClientHello"))
			c.Close()
			return
		}
		pc = listen.Prefixed(c, io.MultiReader(bytes.NewReader(hello), br))
		if sni != "" {
			h, p, ok := canonConnect(r.Context(), st.Cfg, net.JoinHostPort(sni, port))
			switch {
			case !ok:
				s.connect(st, r, hostport, conf.Ambiguous("CONNECT to "+hostport+" carries TLS for a server name toolgate cannot read unambiguously"))
				c.Close()
				return
			case conf.HasRoutes(st.Cfg.Compiled, h, p) && s.mitm == nil:
				s.connect(st, r, hostport, conf.Refuse(bucketing.CodePolicy, ReasonNotIntercepted,
					"CONNECT to "+hostport+" refused: it carries TLS for "+h+", a host tools match, and its calls cannot be checked without a CA", nil))
				c.Close()
				return
			case conf.HasRoutes(st.Cfg.Compiled, h, p):
				s.tlsm.conns.WithLabelValues("connect", "sni_intercepted").Inc()
				up.Close()
				s.mitm.ServeTLS(pc, sni, &listen.Target{Scheme: "https", Authority: conf.JoinAuthority(sni, port, "443"), Dial: hostport, Kind: "forward"})
				return
			}
		}
	} else if s.mitm != nil && listen.LooksLikeHTTP(br) {
		c.SetDeadline(time.Time{})
		s.tlsm.conns.WithLabelValues("connect", "plain").Inc()
		up.Close()
		s.mitm.Hand(pc, &listen.Target{Scheme: "http", Port: port, Dial: hostport, Kind: "forward"})
		return
	}
	c.SetDeadline(time.Time{})
	s.tunnelled(st, "connect", r, hostport, nil)
	keep = true
	listen.Splice(pc, up)
}

// tlsMetrics are the interception series, and the limiters of the logs
// that a misconfigured client or deployment would repeat on every
// connection.
type tlsMetrics struct {
	conns  *prometheus.CounterVec
	loops  prometheus.Counter
	minted prometheus.Collector // nil without a CA

	handshakeLog, loopLog pipe.LogLimit
}

// LogLimited logs msg unless lim let a line through in the last second.

// withCA adds the leaf certificate series of ca.
func (m *tlsMetrics) withCA(ca *tlsca.CA) {
	m.minted = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "toolgate", Subsystem: "proxy", Name: "leaf_certs_minted_total",
		Help: "Leaf certificates minted for intercepted hosts (cache misses and renewals).",
	}, func() float64 { return float64(ca.Minted()) })
}

func newTLSMetrics() *tlsMetrics {
	return &tlsMetrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "intercept_connections_total",
			Help: "Connections taken by CONNECT or the transparent listener, by listener and outcome (intercepted, sni_intercepted, plain, tunnelled, dial_failed, refused, handshake_failed, loop, error).",
		}, []string{"listener", "outcome"}),
		loops: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "toolgate", Subsystem: "proxy", Name: "loops_total",
			Help: "Connections refused because they were toolgate's own traffic redirected back into it.",
		}),
	}
}

func (m *tlsMetrics) describe(ch chan<- *prometheus.Desc) {
	m.conns.Describe(ch)
	m.loops.Describe(ch)
	if m.minted != nil {
		m.minted.Describe(ch)
	}
}

func (m *tlsMetrics) collect(ch chan<- prometheus.Metric) {
	m.conns.Collect(ch)
	m.loops.Collect(ch)
	if m.minted != nil {
		m.minted.Collect(ch)
	}
}

// errLoop marks a connection refused as a routing loop.
var errLoop = errors.New("routing loop: toolgate's own upstream connection came back to it")
