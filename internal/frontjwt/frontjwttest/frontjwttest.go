// Package frontjwttest plays an authenticating front in tests: it holds
// an RSA signing key, publishes its JWKS, and mints tokens, good ones and
// the forgeries an attacker on the host could try (alg none, HMAC keyed
// with the public key, another key under the same kid).
package frontjwttest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Front is a front's signing key and identity.
type Front struct {
	Issuer, Audience, KeyID string
	key                     *rsa.PrivateKey
}

// New returns a front with a fresh 2048-bit RSA key.
func New(t testing.TB, issuer, audience string) *Front {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Front{Issuer: issuer, Audience: audience, KeyID: "front-1", key: k}
}

// JWKS is the front's public key set, as an identity provider serves it.
func (f *Front) JWKS(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &f.key.PublicKey, KeyID: f.KeyID, Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Claims returns the claims of a good token for user, valid for ttl.
func (f *Front) Claims(user string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{"iss": f.Issuer, "aud": f.Audience, "sub": user, "email": user,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix()}
}

// Sign signs claims with the front's key (RS256, the front's kid).
func (f *Front) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return sign(t, f.key, f.KeyID, claims)
}

// SignWithOtherKey signs claims with a key that is not the front's, under
// the front's kid: what an attacker who has the JWKS but not the key makes.
func (f *Front) SignWithOtherKey(t testing.TB, claims map[string]any) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, k, f.KeyID, claims)
}

func sign(t testing.TB, k *rsa.PrivateKey, kid string, claims map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Unsigned is claims with alg "none" and no signature.
func (f *Front) Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	return compact(map[string]any{"alg": "none", "typ": "JWT", "kid": f.KeyID}, claims) + "."
}

// HMACWithPublicKey is claims signed HS256 with the front's public key
// (PEM, as published) as the HMAC secret: the algorithm-confusion forgery.
func (f *Front) HMACWithPublicKey(t testing.TB, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&f.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	in := compact(map[string]any{"alg": "HS256", "typ": "JWT", "kid": f.KeyID}, claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func compact(header, claims map[string]any) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
}
