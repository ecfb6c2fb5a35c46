package listen

import (
	"log"
	"net"
	"net/http"

	"github.com/elazarl/goproxy"
)

// ConnectAction is what happens to a CONNECT.
type ConnectAction int

const (
	// ConnectTunnel tunnels the connection untouched to its destination.
	ConnectTunnel ConnectAction = iota
	// ConnectIntercept answers the CONNECT and hands the connection to
	// Forward.Intercept.
	ConnectIntercept
	// ConnectRefuse answers the CONNECT with the refusal Forward.Decide
	// returned.
	ConnectRefuse
	// ConnectSniff answers the CONNECT and hands the connection to
	// Forward.Sniff, which reads its first bytes before any reach the
	// destination.
	ConnectSniff
)

// Forward says what the forward listener does with what it is sent; the
// pipeline and every decision are its caller's.
type Forward struct {
	// Transport is goproxy's transport (it sends nothing itself: every
	// request other than CONNECT goes to Call).
	Transport *http.Transport
	// Dial connects a tunnelled CONNECT to its destination.
	Dial func(r *http.Request, network, addr string) (net.Conn, error)
	// Tunnelled records a tunnelled CONNECT once its dial is decided:
	// err nil when it succeeded, else the connect failure it is. host is
	// the CONNECT's.
	Tunnelled func(r *http.Request, host string, err error)
	// Decide decides a CONNECT to host; the refusal to send is returned
	// with ConnectRefuse.
	Decide func(r *http.Request, host string) (ConnectAction, *http.Response)
	// Intercept takes the connection of a CONNECT to host that Decide
	// intercepts, once the CONNECT is hijacked.
	Intercept func(c net.Conn, host string)
	// Sniff takes the connection of a CONNECT to host that Decide sniffs,
	// once the CONNECT is hijacked (it answers the CONNECT itself).
	Sniff func(c net.Conn, r *http.Request, host string)
	// Call answers an absolute-form request (a plain-HTTP call).
	Call func(w http.ResponseWriter, r *http.Request)
	// ErrorLog receives goproxy's log lines.
	ErrorLog *log.Logger
}

// NewForward returns the HTTP forward proxy. Absolute-form requests go to
// f.Call; CONNECT goes to goproxy, which hands the hijacked connection to
// f.Intercept or f.Sniff, refuses it, or tunnels it untouched (recorded
// by f.Tunnelled), as f.Decide says; a request in origin form is told to
// use a proxy variable or a reverse listener.
func NewForward(f Forward) http.Handler {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = f.ErrorLog
	gp.Tr = f.Transport
	gp.ConnectDial = nil // dial directly; never through a proxy from the environment
	// A tunnelled CONNECT is recorded once its dial is decided: ok, or the
	// connect failure it is.
	gp.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		c, err := f.Dial(req, network, addr)
		host := req.URL.Host
		if host == "" {
			host = addr
		}
		f.Tunnelled(req, host, err)
		return c, err
	}
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		action, resp := f.Decide(ctx.Req, host)
		switch action {
		case ConnectIntercept:
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
				f.Intercept(c, host)
			}}, host
		case ConnectRefuse:
			ctx.Resp = resp
			return goproxy.RejectConnect, host
		case ConnectSniff:
			req := ctx.Req
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
				f.Sniff(c, req, host)
			}}, host
		}
		return goproxy.OkConnect, host // recorded by ConnectDialWithReq
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodConnect:
			gp.ServeHTTP(w, r)
		case !r.URL.IsAbs():
			http.Error(w, "toolgate: this is a forward proxy; send absolute-form requests (set HTTP_PROXY) or use a reverse listener", http.StatusBadRequest)
		default:
			f.Call(w, r)
		}
	})
}
