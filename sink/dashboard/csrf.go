package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// The decision form's CSRF token. The Approvals page gives each browser a
// session cookie (random, HttpOnly, SameSite=Strict) and puts in every
// form an HMAC of it under a key of this process; a decision must bring
// both, and the token must match the cookie. A page of another site can
// neither read the cookie nor compute the HMAC, and a cookie it manages to
// set (from a sibling host) comes without a token that fits.
const (
	// CSRFCookie is the session cookie's name.
	CSRFCookie = "toolgate_session"
	// CSRFField is the form field carrying the token.
	CSRFField = "csrf"
	// sessionBytes is the session cookie's length before encoding.
	sessionBytes = 32
)

// newCSRFKey returns a fresh key for csrfToken.
func newCSRFKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// session returns the request's session cookie, setting a new one on w
// when it has none (or one of the wrong form).
func (d *Dashboard) session(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(CSRFCookie); err == nil && validSession(c.Value) {
		return c.Value
	}
	b := make([]byte, sessionBytes)
	rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: v, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return v
}

func validSession(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == sessionBytes
}

// csrfToken is the form token of a session.
func (d *Dashboard) csrfToken(session string) string {
	m := hmac.New(sha256.New, d.csrfKey)
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether the request's form token fits its session
// cookie. The form must be parsed.
func (d *Dashboard) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(CSRFCookie)
	if err != nil || !validSession(c.Value) {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue(CSRFField)), []byte(d.csrfToken(c.Value)))
}
