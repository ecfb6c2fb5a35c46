package approval

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestToken checks the in-band approval state: a token opens under the
// key that issued it until it lapses, and anything else (another key, one
// byte changed anywhere, cut, padded, not toolgate's) fails with
// ErrTokenInvalid.
func TestToken(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	now := time.Unix(1_800_000_000, 0)
	id, bind := strings.Repeat("a", 32), strings.Repeat("b", 64)
	tok := issueToken(key, id, bind, now.Add(time.Minute))
	if len(tok) > MaxTokenBytes || !IsToken(tok) {
		t.Fatalf("token %q (%d bytes)", tok, len(tok))
	}
	c, err := openToken(key, tok, now)
	if err != nil || c.ID != id || c.Key != bind {
		t.Fatalf("open: %+v %v", c, err)
	}
	bad := map[string]string{
		"another key": issueToken([]byte(strings.Repeat("x", 32)), id, bind, now.Add(time.Minute)),
		"lapsed":      issueToken(key, id, bind, now),
		"cut":         tok[:len(tok)-1],
		"padded":      tok + "A",
		"no tag":      tok[:strings.LastIndexByte(tok, '.')],
		"not ours":    strings.TrimPrefix(tok, TokenPrefix),
		"too long":    tok + strings.Repeat("A", MaxTokenBytes),
		"bad id":      issueToken(key, "../etc", bind, now.Add(time.Minute)),
		"empty":       "",
	}
	for i := len(TokenPrefix); i < len(tok); i++ {
		b := []byte(tok)
		b[i] ^= 0x01
		bad[fmt.Sprintf("flip %d", i)] = string(b)
	}
	for name, s := range bad {
		if _, err := openToken(key, s, now); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%s: %v, want ErrTokenInvalid", name, err)
		}
	}
}

// FuzzOpenToken feeds the in-band approval state parser (the requestState
// a client echoes) arbitrary strings: it never panics, never accepts a
// string over MaxTokenBytes, and accepts only what the key issued.
func FuzzOpenToken(f *testing.F) {
	key := []byte(strings.Repeat("k", 32))
	now := time.Unix(1_800_000_000, 0)
	good := issueToken(key, strings.Repeat("a", 32), strings.Repeat("b", 64), now.Add(time.Minute))
	for _, s := range []string{good, good[:len(good)-3], TokenPrefix, TokenPrefix + ".", TokenPrefix + "e30.", TokenPrefix + "e30." + strings.Repeat("A", 43), "", "server-state/+=", good + "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := openToken(key, s, now)
		if err != nil {
			if !errors.Is(err, ErrTokenInvalid) {
				t.Fatalf("error %v is not ErrTokenInvalid", err)
			}
			return
		}
		if len(s) > MaxTokenBytes || !validID(c.ID) || len(c.Key) != 64 || c.Exp <= now.Unix() {
			t.Fatalf("accepted %q as %+v", s, c)
		}
		// Only a token the key issued opens: it must be byte for byte the
		// one issued for its claims.
		if s != issueToken(key, c.ID, c.Key, time.Unix(c.Exp, 0)) {
			t.Fatalf("accepted %q, which the key did not issue", s)
		}
	})
}
