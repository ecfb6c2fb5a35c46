package frontjwt_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/frontjwt"
	"github.com/toolgate/toolgate/internal/frontjwt/frontjwttest"
)

func fileVerifier(t *testing.T, f *frontjwttest.Front, cfg frontjwt.Config) *frontjwt.Verifier {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), f.JWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.JWKSFile, cfg.Issuer, cfg.Audience = "jwks.json", f.Issuer, f.Audience
	if err := cfg.Validate(dir); err != nil {
		t.Fatal(err)
	}
	v, err := frontjwt.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func bearer(tok string) *http.Request {
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// TestVerify: a token the front signed verifies to its user; every
// forgery or stale token is refused with ErrInvalid, a missing one with
// ErrNoToken.
func TestVerify(t *testing.T) {
	f := frontjwttest.New(t, "https://front.example", "toolgate-dashboard")
	v := fileVerifier(t, f, frontjwt.Config{})
	good := f.Claims("dana@example.com", time.Minute)
	with := func(k string, val any) map[string]any {
		c := f.Claims("dana@example.com", time.Minute)
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	if u, err := v.Verify(bearer(f.Sign(t, good))); err != nil || u != "dana@example.com" {
		t.Fatalf("good token: %q %v", u, err)
	}
	for _, tc := range []struct {
		name, token string
		want        error
	}{
		{"no token", "", frontjwt.ErrNoToken},
		{"expired", f.Sign(t, with("exp", time.Now().Add(-time.Hour).Unix())), frontjwt.ErrInvalid},
		{"no exp", f.Sign(t, with("exp", nil)), frontjwt.ErrInvalid},
		{"not yet valid", f.Sign(t, with("nbf", time.Now().Add(time.Hour).Unix())), frontjwt.ErrInvalid},
		{"wrong audience", f.Sign(t, with("aud", "another-service")), frontjwt.ErrInvalid},
		{"wrong issuer", f.Sign(t, with("iss", "https://evil.example")), frontjwt.ErrInvalid},
		{"no user claim", f.Sign(t, with("email", nil)), frontjwt.ErrInvalid},
		{"user claim not a string", f.Sign(t, with("email", 7)), frontjwt.ErrInvalid},
		{"alg none", f.Unsigned(t, good), frontjwt.ErrInvalid},
		{"HS256 keyed with the public key", f.HMACWithPublicKey(t, good), frontjwt.ErrInvalid},
		{"another key under the front's kid", f.SignWithOtherKey(t, good), frontjwt.ErrInvalid},
		{"payload swapped", swapPayload(f.Sign(t, good), f.Sign(t, with("email", "mallory@example.com"))), frontjwt.ErrInvalid},
		{"garbage", "a.b.c", frontjwt.ErrInvalid},
		{"too long", strings.Repeat("a", frontjwt.MaxTokenBytes+1), frontjwt.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			u, err := v.Verify(r)
			if !errors.Is(err, tc.want) || u != "" {
				t.Fatalf("Verify = %q, %v; want %v", u, err, tc.want)
			}
			if tc.token != "" && len(tc.token) > 20 && strings.Contains(err.Error(), tc.token) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

// swapPayload puts b's claims under a's header and signature.
func swapPayload(a, b string) string {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	return pa[0] + "." + pb[1] + "." + pa[2]
}

// TestVerifyHeader reads the token from a front's own header, and the
// Authorization header only with the Bearer scheme.
func TestVerifyHeader(t *testing.T) {
	f := frontjwttest.New(t, "https://front.example", "aud")
	v := fileVerifier(t, f, frontjwt.Config{Header: "X-Pomerium-Jwt-Assertion"})
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Pomerium-Jwt-Assertion", f.Sign(t, f.Claims("erin", time.Minute)))
	if u, err := v.Verify(r); err != nil || u != "erin" {
		t.Fatalf("front's header: %q %v", u, err)
	}
	r = bearer(f.Sign(t, f.Claims("erin", time.Minute)))
	if _, err := v.Verify(r); !errors.Is(err, frontjwt.ErrNoToken) {
		t.Fatalf("token in Authorization while the front's header is configured: %v", err)
	}
	v = fileVerifier(t, f, frontjwt.Config{})
	r = httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Basic "+f.Sign(t, f.Claims("erin", time.Minute)))
	if _, err := v.Verify(r); !errors.Is(err, frontjwt.ErrNoToken) {
		t.Fatalf("Basic scheme: %v", err)
	}
}

// TestJWKSURL fetches the key set from a URL once, keeps it, and fetches
// again for an unknown key at most every MinJWKSRefetch; a key set over
// the bound is refused.
func TestJWKSURL(t *testing.T) {
	f := frontjwttest.New(t, "https://front.example", "aud")
	var fetches atomic.Int32
	var big atomic.Bool
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		if big.Load() {
			w.Write([]byte(strings.Repeat(" ", frontjwt.MaxJWKSBytes+1)))
			return
		}
		w.Write(f.JWKS(t))
	}))
	defer idp.Close()
	cfg := frontjwt.Config{JWKSURL: idp.URL + "/jwks", Issuer: f.Issuer, Audience: f.Audience}
	if err := cfg.Validate(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	v, err := frontjwt.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if u, err := v.Verify(bearer(f.Sign(t, f.Claims("dana", time.Minute)))); err != nil || u != "dana" {
			t.Fatalf("good token: %q %v", u, err)
		}
	}
	other := f.SignWithOtherKey(t, f.Claims("dana", time.Minute))
	for range 5 {
		if _, err := v.Verify(bearer(other)); !errors.Is(err, frontjwt.ErrInvalid) {
			t.Fatalf("forged: %v", err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the JWKS was fetched %d times, want once (kept, refetch bounded)", n)
	}
	big.Store(true)
	cfg2 := cfg
	v2, err := frontjwt.New(context.Background(), cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Verify(bearer(f.Sign(t, f.Claims("dana", time.Minute)))); !errors.Is(err, frontjwt.ErrInvalid) || !strings.Contains(err.Error(), "over") {
		t.Fatalf("oversized JWKS: %v", err)
	}
}

// TestConfigValidate names the field of each mistake.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   frontjwt.Config
		field string
	}{
		{"no issuer", frontjwt.Config{JWKSFile: "k", Audience: "a"}, "issuer"},
		{"no audience", frontjwt.Config{JWKSFile: "k", Issuer: "i"}, "audience"},
		{"no keys", frontjwt.Config{Issuer: "i", Audience: "a"}, "jwks_file"},
		{"both keys", frontjwt.Config{JWKSFile: "k", JWKSURL: "https://x/", Issuer: "i", Audience: "a"}, "jwks_url"},
		{"plain http elsewhere", frontjwt.Config{JWKSURL: "http://idp.example/jwks", Issuer: "i", Audience: "a"}, "jwks_url"},
		{"HS256", frontjwt.Config{JWKSFile: "k", Issuer: "i", Audience: "a", Algorithms: []string{"RS256", "HS256"}}, "algorithms[1]"},
		{"none", frontjwt.Config{JWKSFile: "k", Issuer: "i", Audience: "a", Algorithms: []string{"none"}}, "algorithms[0]"},
		{"leeway", frontjwt.Config{JWKSFile: "k", Issuer: "i", Audience: "a", Leeway: time.Hour}, "leeway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate(t.TempDir())
			var fp interface{ FieldPath() string }
			if !errors.As(err, &fp) || fp.FieldPath() != tc.field {
				t.Fatalf("Validate = %v; want an error at %s", err, tc.field)
			}
		})
	}
}

// FuzzVerify: no token verifies to a user the front did not sign for,
// and nothing panics.
func FuzzVerify(f *testing.F) {
	front := frontjwttest.New(f, "https://front.example", "aud")
	good := front.Sign(f, front.Claims("dana", time.Hour))
	for _, s := range []string{good, front.Unsigned(f, front.Claims("x", time.Hour)), front.HMACWithPublicKey(f, front.Claims("x", time.Hour)),
		"e30.e30.", "a.b.c", "....", good[:len(good)-3]} {
		f.Add(s)
	}
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "jwks.json"), front.JWKS(f), 0o600)
	cfg := frontjwt.Config{JWKSFile: "jwks.json", Issuer: front.Issuer, Audience: front.Audience}
	if err := cfg.Validate(dir); err != nil {
		f.Fatal(err)
	}
	v, err := frontjwt.New(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		u, err := v.Verify(bearer(tok))
		if err == nil && u != "dana" {
			t.Fatalf("a token the front did not sign verified as %q", u)
		}
	})
}
