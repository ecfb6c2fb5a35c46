package approval

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// TokenPrefix starts every requestState toolgate issues for an in-band
// approval (MCP 2026-07-28 input_required). A requestState without it is
// the server's own and passes to the server untouched.
const TokenPrefix = "toolgate-approval.v1."

// MaxTokenBytes bounds a requestState toolgate reads as its own; longer is
// refused before it is decoded.
const MaxTokenBytes = 512

// tokenMACBytes is the length of a token's HMAC-SHA256 tag.
const tokenMACBytes = 32

// tokenClaims is what a token binds: the approval request's id, the
// binding key of the call (BindingKey: everything a grant binds, the MCP
// route and the server's URL included) and when the token lapses (Unix
// seconds).
type tokenClaims struct {
	ID  string `json:"i"`
	Key string `json:"k"`
	Exp int64  `json:"e"`
}

// IsToken reports whether a requestState claims to be toolgate's.
func IsToken(s string) bool { return strings.HasPrefix(s, TokenPrefix) }

// issueToken makes the requestState of an in-band ask for request id bound
// to key, valid until exp: TokenPrefix, the claims (base64url JSON), a dot
// and their HMAC-SHA256 under the gate's key (base64url).
func issueToken(key []byte, id, bind string, exp time.Time) string {
	c, _ := json.Marshal(tokenClaims{ID: id, Key: bind, Exp: exp.Unix()})
	body := TokenPrefix + base64.RawURLEncoding.EncodeToString(c)
	return body + "." + base64.RawURLEncoding.EncodeToString(tokenMAC(key, body))
}

func tokenMAC(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// openToken verifies a token under key at now and returns its claims. It
// fails with ErrTokenInvalid for anything but a token this key issued and
// that has not lapsed; the tag is checked before the claims are decoded.
func openToken(key []byte, tok string, now time.Time) (tokenClaims, error) {
	var c tokenClaims
	if len(tok) > MaxTokenBytes {
		return c, fmt.Errorf("%w: longer than %d bytes", ErrTokenInvalid, MaxTokenBytes)
	}
	if !IsToken(tok) {
		return c, fmt.Errorf("%w: not toolgate's", ErrTokenInvalid)
	}
	dot := strings.LastIndexByte(tok, '.')
	if dot < len(TokenPrefix) {
		return c, fmt.Errorf("%w: no tag", ErrTokenInvalid)
	}
	body, tag64 := tok[:dot], tok[dot+1:]
	tag, err := base64.RawURLEncoding.Strict().DecodeString(tag64)
	if err != nil || len(tag) != tokenMACBytes {
		return c, fmt.Errorf("%w: malformed tag", ErrTokenInvalid)
	}
	if !hmac.Equal(tag, tokenMAC(key, body)) {
		return c, fmt.Errorf("%w: the tag does not match (altered, or issued under another key)", ErrTokenInvalid)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body[len(TokenPrefix):])
	if err != nil || json.Unmarshal(raw, &c) != nil || !validID(c.ID) || len(c.Key) != 64 {
		return tokenClaims{}, fmt.Errorf("%w: malformed claims", ErrTokenInvalid)
	}
	if now.Unix() >= c.Exp {
		return tokenClaims{}, fmt.Errorf("%w: lapsed", ErrTokenInvalid)
	}
	return c, nil
}
