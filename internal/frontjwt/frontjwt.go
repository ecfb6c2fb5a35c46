// Package frontjwt verifies the signed identity an authenticating front
// (oauth2-proxy, Pomerium, Google IAP, Cloudflare Access) puts on the
// requests it forwards: a JWT in a header, checked against the front's
// JWKS (a file, or a URL fetched with bounds and cached) for its
// signature, an asymmetric algorithm, issuer, audience and expiry. A
// process that can reach the service but not the front's signing key
// cannot forge it.
package frontjwt

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolgate/toolgate/internal/section"
)

// Defaults and bounds for Config.
const (
	// DefaultHeader carries the token as "Authorization: Bearer TOKEN".
	DefaultHeader = "Authorization"
	// DefaultUserClaim names the signed-in user.
	DefaultUserClaim = "email"
	// DefaultLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultLeeway = 30 * time.Second
	// MaxLeeway bounds leeway.
	MaxLeeway = 5 * time.Minute
	// DefaultJWKSRefresh is how long a fetched JWKS is used before it is
	// fetched again.
	DefaultJWKSRefresh = 5 * time.Minute
	// MinJWKSRefetch is the least time between two reads of the JWKS, so
	// that tokens naming unknown keys cannot make the service hammer the
	// identity provider.
	MinJWKSRefetch = 30 * time.Second
	// JWKSTimeout bounds one fetch of jwks_url.
	JWKSTimeout = 10 * time.Second
	// MaxJWKSBytes bounds the JWKS document.
	MaxJWKSBytes = 1 << 20
	// MaxTokenBytes bounds a token.
	MaxTokenBytes = 16 << 10
	// MaxUserBytes bounds the user a token names.
	MaxUserBytes = 256
)

// DefaultAlgorithms are the signature algorithms accepted by default:
// the asymmetric ones. HMAC (HS256...) and "none" are never accepted: a
// shared key would let whoever verifies also sign.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Sentinels of Verify.
var (
	// ErrNoToken: the request carries no token in the configured header.
	ErrNoToken = errors.New("no signed identity from the front")
	// ErrInvalid: the token is malformed, not signed by a key of the
	// JWKS, or its claims do not hold.
	ErrInvalid = errors.New("the front's signed identity does not verify")
)

// Config is where the front's JWT is and how it is checked (YAML, under
// approvals.deciders.jwt). Its zero value is off.
type Config struct {
	// Header is the request header carrying the token: "Authorization"
	// (as "Bearer TOKEN"), or one a front sets, such as
	// X-Forwarded-Access-Token (oauth2-proxy), X-Pomerium-Jwt-Assertion,
	// X-Goog-IAP-JWT-Assertion or Cf-Access-Jwt-Assertion. Default
	// "Authorization".
	Header string `yaml:"header"`
	// JWKSFile is a file holding the front's JSON Web Key Set (relative to
	// the configuration file). One of jwks_file and jwks_url is required.
	JWKSFile string `yaml:"jwks_file"`
	// JWKSURL is where the front's JSON Web Key Set is fetched (https, or
	// http on loopback), at most MaxJWKSBytes within JWKSTimeout, kept for
	// jwks_refresh. Default: none.
	JWKSURL string `yaml:"jwks_url"`
	// JWKSRefresh is how long a JWKS is used before it is read again; a
	// token naming a key not in it reads it again at most every
	// MinJWKSRefetch. Default 5m.
	JWKSRefresh time.Duration `yaml:"jwks_refresh"`
	// Issuer must equal the token's iss claim. Required.
	Issuer string `yaml:"issuer"`
	// Audience must be one of the token's aud claim. Required.
	Audience string `yaml:"audience"`
	// UserClaim names the claim holding the signed-in user, a non-empty
	// string. Default "email".
	UserClaim string `yaml:"user_claim"`
	// Algorithms are the signature algorithms accepted. Default
	// DefaultAlgorithms (every asymmetric one); HS256/384/512 and none are
	// refused whatever is listed.
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed on exp, nbf and iat. Default 30s;
	// at most 5m. A token without exp is refused.
	Leeway time.Duration `yaml:"leeway"`

	jwksFile string // resolved
}

// Enabled reports whether any field is set.
func (c *Config) Enabled() bool {
	return c.Header != "" || c.JWKSFile != "" || c.JWKSURL != "" || c.Issuer != "" || c.Audience != "" ||
		c.UserClaim != "" || len(c.Algorithms) > 0 || c.Leeway != 0 || c.JWKSRefresh != 0
}

// Validate applies defaults and rejects bad values; jwks_file is resolved
// against dir. Errors are *section.Error values relative to the section.
// A Config that is not Enabled stays off.
func (c *Config) Validate(dir string) error {
	if !c.Enabled() {
		return nil
	}
	if c.Header == "" {
		c.Header = DefaultHeader
	}
	if c.UserClaim == "" {
		c.UserClaim = DefaultUserClaim
	}
	if c.Issuer == "" {
		return section.Errorf("issuer", "is required: the front's issuer (the iss its tokens carry)")
	}
	if c.Audience == "" {
		return section.Errorf("audience", "is required: the audience the front's tokens carry for this service")
	}
	switch {
	case c.JWKSFile == "" && c.JWKSURL == "":
		return section.Errorf("jwks_file", "set jwks_file or jwks_url: the front's public keys")
	case c.JWKSFile != "" && c.JWKSURL != "":
		return section.Errorf("jwks_url", "set jwks_file or jwks_url, not both")
	}
	if c.JWKSURL != "" {
		u, err := url.Parse(c.JWKSURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) {
			return section.Errorf("jwks_url", "%q; want an https URL (http only on loopback)", c.JWKSURL)
		}
	}
	c.jwksFile = section.Resolve(dir, c.JWKSFile)
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	for i, a := range c.Algorithms {
		if !slices.Contains(DefaultAlgorithms, a) {
			return section.Errorf(fmt.Sprintf("algorithms[%d]", i), "%q; want one of %s (HMAC and none are never accepted)", a, strings.Join(DefaultAlgorithms, ", "))
		}
	}
	switch {
	case c.Leeway < 0 || c.Leeway > MaxLeeway:
		return section.Errorf("leeway", "%s is outside 0 to %s", c.Leeway, MaxLeeway)
	case c.Leeway == 0:
		c.Leeway = DefaultLeeway
	}
	switch {
	case c.JWKSRefresh < 0:
		return section.Errorf("jwks_refresh", "must be positive, got %s", c.JWKSRefresh)
	case c.JWKSRefresh == 0:
		c.JWKSRefresh = DefaultJWKSRefresh
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Verifier checks the front's tokens. It is safe for concurrent use.
type Verifier struct {
	cfg    Config
	algs   []jose.SignatureAlgorithm
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	fresh   time.Time // when keys were read
	tried   time.Time // the last read, successful or not
	loadErr error
}

// New returns a Verifier for a validated, Enabled cfg and reads its JWKS
// once: an unreadable jwks_file is an error; an unreachable jwks_url is
// not (the front may start later), and is tried again on the next token.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	v := &Verifier{cfg: cfg, now: time.Now,
		client: &http.Client{Timeout: JWKSTimeout}}
	for _, a := range cfg.Algorithms {
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	v.mu.Lock()
	err := v.load(ctx)
	v.mu.Unlock()
	if err != nil && cfg.JWKSURL == "" {
		return nil, err
	}
	return v, nil
}

// Header is the header the token is read from.
func (v *Verifier) Header() string { return v.cfg.Header }

// Verify returns the user the request's token names, or an error wrapping
// ErrNoToken or ErrInvalid that says why (never the token).
func (v *Verifier) Verify(r *http.Request) (string, error) {
	raw := strings.TrimSpace(r.Header.Get(v.cfg.Header))
	if strings.EqualFold(v.cfg.Header, "Authorization") {
		scheme, tok, ok := strings.Cut(raw, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			raw = ""
		} else {
			raw = strings.TrimSpace(tok)
		}
	}
	if raw == "" {
		return "", fmt.Errorf("%w (header %s)", ErrNoToken, v.cfg.Header)
	}
	if len(raw) > MaxTokenBytes {
		return "", fmt.Errorf("%w: the token is over %d bytes", ErrInvalid, MaxTokenBytes)
	}
	tok, err := jwt.ParseSigned(raw, v.algs)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(tok.Headers) != 1 {
		return "", fmt.Errorf("%w: want one signature", ErrInvalid)
	}
	key, err := v.key(r.Context(), tok.Headers[0])
	if err != nil {
		return "", err
	}
	var std jwt.Claims
	var extra map[string]any
	if err := tok.Claims(key.Key, &std, &extra); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if std.Expiry == nil {
		return "", fmt.Errorf("%w: the token has no exp", ErrInvalid)
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: v.now()}, v.cfg.Leeway); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	user, _ := extra[v.cfg.UserClaim].(string)
	user = strings.TrimSpace(user)
	if user == "" {
		return "", fmt.Errorf("%w: claim %s is not a non-empty string", ErrInvalid, v.cfg.UserClaim)
	}
	if len(user) > MaxUserBytes {
		return "", fmt.Errorf("%w: claim %s is over %d bytes", ErrInvalid, v.cfg.UserClaim, MaxUserBytes)
	}
	return user, nil
}

// key finds the public key the token's header names, reading the JWKS
// again when it is stale or lacks the key (at most every MinJWKSRefetch).
// Only a public key of the algorithm's type is returned: a symmetric key in
// the set is never used.
func (v *Verifier) key(ctx context.Context, h jose.Header) (jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	if (v.keys == nil || now.Sub(v.fresh) >= v.cfg.JWKSRefresh) && now.Sub(v.tried) >= MinJWKSRefetch {
		v.load(ctx)
	}
	k, ok := v.find(h)
	if !ok && now.Sub(v.tried) >= MinJWKSRefetch {
		v.load(ctx)
		k, ok = v.find(h)
	}
	if !ok {
		if v.keys == nil {
			return k, fmt.Errorf("%w: the front's keys could not be read: %v", ErrInvalid, v.loadErr)
		}
		return k, fmt.Errorf("%w: no key %q of the front fits the token's %s signature", ErrInvalid, h.KeyID, h.Algorithm)
	}
	return k, nil
}

func (v *Verifier) find(h jose.Header) (jose.JSONWebKey, bool) {
	if v.keys == nil {
		return jose.JSONWebKey{}, false
	}
	cands := v.keys.Keys
	if h.KeyID != "" {
		cands = v.keys.Key(h.KeyID)
	} else if len(cands) != 1 {
		return jose.JSONWebKey{}, false
	}
	for _, k := range cands {
		if k.Use == "enc" || (k.Algorithm != "" && k.Algorithm != h.Algorithm) || !k.IsPublic() || !fits(k.Key, h.Algorithm) {
			continue
		}
		return k, true
	}
	return jose.JSONWebKey{}, false
}

// fits reports whether key is a public key of alg's type.
func fits(key any, alg string) bool {
	switch key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// load reads the JWKS; v.mu is held. On failure the keys read before stay.
func (v *Verifier) load(ctx context.Context) error {
	v.tried = v.now()
	b, err := v.read(ctx)
	if err == nil {
		var set jose.JSONWebKeySet
		if err = json.Unmarshal(b, &set); err == nil && len(set.Keys) == 0 {
			err = errors.New("the key set holds no key")
		}
		if err == nil {
			for _, k := range set.Keys {
				if !k.IsPublic() {
					err = fmt.Errorf("key %q is not a public key: a JWKS for verifying holds public keys only", k.KeyID)
					break
				}
			}
		}
		if err == nil {
			v.keys, v.fresh = &set, v.tried
		}
	}
	if err != nil {
		where := v.cfg.JWKSURL
		if where == "" {
			where = v.cfg.jwksFile
		}
		err = fmt.Errorf("read the front's JWKS %s: %w", where, err)
	}
	v.loadErr = err
	return err
}

func (v *Verifier) read(ctx context.Context) ([]byte, error) {
	var body io.Reader
	if v.cfg.JWKSURL == "" {
		f, err := os.Open(v.cfg.jwksFile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		body = f
	} else {
		ctx, cancel := context.WithTimeout(ctx, JWKSTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := v.client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("answered %s", resp.Status)
		}
		body = resp.Body
	}
	b, err := io.ReadAll(io.LimitReader(body, MaxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("over %d bytes", MaxJWKSBytes)
	}
	return b, nil
}
