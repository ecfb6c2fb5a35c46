// Package listen holds toolgate's listeners below the per-call pipeline:
// the forward proxy's CONNECT handling (goproxy; NewForward), the server of
// intercepted connections (Interceptor) and the transparent listener's
// accept loop (Transparent), what they read of a connection before
// deciding (ReadClientHello, LooksLikeHTTP, OriginalDst), the plain
// listeners' HTTP servers (NewHTTPServer: h1serve or net/http), the body
// deadline of a request, the caps on caller connections (a listener's
// limits.max_conns and the budget of every listener together, cutting the
// connection stalled longest to make room), and the tls section
// (TLSConfig: the interception CA, upstream verification). Every decision (what a
// CONNECT or a redirected connection becomes) and the pipeline are its
// caller's, given as func values. It knows nothing of tools, calls or the
// configuration. It must never import proxy, nor anything that proxy must
// not link (the policies implementations, sink).
package listen
