package sidecar

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// AdminHeader is the header every state-changing request to the admin
// listener (POST /reload, POST /mcp/pins/accept, POST /debug/pprof/symbol)
// must carry. A web page
// cannot send a custom header to another origin without a CORS preflight,
// which the admin listener never grants, so a request bearing it comes
// from a program (curl, the CLI, a script), not from a page an operator
// happens to open.
const AdminHeader = "X-Toolgate-Admin"

// guardAdmin wraps the admin mux. Every request that is not GET, HEAD or
// OPTIONS must carry AdminHeader, and is refused when a browser says it
// comes from another site (Sec-Fetch-Site other than same-origin or none)
// or from a foreign Origin (any Origin, "null" included, whose host is not
// the admin listener's). With admin.token_file set, every request but the
// probes (/healthz, /readyz) and /ca.crt must also present the token as
// Authorization: Bearer TOKEN, compared in constant time.
func guardAdmin(h http.Handler, token string) http.Handler {
	var want [sha256.Size]byte
	if token != "" {
		want = sha256.Sum256([]byte(token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !adminOpen(r) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate admin"`)
				http.Error(w, "the admin listener needs its token (admin.token_file) as Authorization: Bearer TOKEN", http.StatusUnauthorized)
				return
			}
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if msg := crossSite(r); msg != "" {
				http.Error(w, msg, http.StatusForbidden)
				return
			}
			if r.Header.Get(AdminHeader) == "" {
				http.Error(w, r.Method+" "+r.URL.Path+" needs the header "+AdminHeader+": 1 (a request a web page can send is refused)", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// adminOpen reports whether r is for an endpoint the admin token does not
// guard: the probes a kubelet sends and the interception CA's certificate,
// which is public.
func adminOpen(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/ca.crt":
		return true
	}
	return false
}

// crossSite says why r, by what a browser put on it, comes from another
// site; "" when nothing says so. A program that sets neither header passes.
func crossSite(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return "refused: a " + site + " request (Sec-Fetch-Site) cannot change the admin listener's state"
	}
	if o, ok := r.Header["Origin"]; ok {
		if len(o) != 1 {
			return "refused: more than one Origin header"
		}
		u, err := url.Parse(o[0])
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return "refused: a request from another origin cannot change the admin listener's state"
		}
	}
	return ""
}
