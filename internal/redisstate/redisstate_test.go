package redisstate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/section"
)

func TestValidateNamesTheField(t *testing.T) {
	t.Setenv("REDISSTATE_TEST_PW", "x")
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Mode: ModeCluster}, "addrs"},
		{Config{Addrs: []string{"redis"}}, "addrs[0]"},
		{Config{Addrs: []string{"a:1", "redis://b:2"}}, "addrs[1]"},
		{Config{Addrs: []string{"a:1"}, Mode: "ring"}, "mode"},
		{Config{Addrs: []string{"a:1"}, Mode: ModeSentinel}, "master_name"},
		{Config{Addrs: []string{"a:1", "b:2"}, Mode: ModeStandalone}, "addrs"},
		{Config{Addrs: []string{"a:1"}, PasswordEnv: "REDISSTATE_TEST_SURELY_UNSET"}, "password_env"},
		{Config{Addrs: []string{"a:1"}, Timeout: 10 * time.Second}, "timeout"},
		{Config{Addrs: []string{"a:1"}, Prefix: "a{b}"}, "prefix"},
		{Config{Addrs: []string{"a:1"}, Prefix: strings.Repeat("p", 65)}, "prefix"},
		{Config{Addrs: []string{"a:1"}, BreakerFailures: -1}, "breaker_failures"},
		{Config{Addrs: []string{"a:1"}, BreakerCooldown: time.Hour}, "breaker_cooldown"},
		{Config{Addrs: []string{"a:1"}, DB: -1}, "db"},
		{Config{Addrs: []string{"a:1"}, PoolSize: -1}, "pool_size"},
	} {
		err := tc.cfg.Validate()
		var se *section.Error
		if !errors.As(err, &se) || se.FieldPath() != tc.field {
			t.Errorf("%+v: error %v; want one at %s", tc.cfg, err, tc.field)
		}
	}
	c := Config{Addrs: []string{"127.0.0.1:6379"}, PasswordEnv: "REDISSTATE_TEST_PW"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Timeout != DefaultTimeout || c.Prefix != DefaultPrefix || c.BreakerFailures != DefaultBreakerFailures || c.BreakerCooldown != DefaultBreakerCooldown || c.PoolSize != DefaultPoolSize {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

// TestBreaker: after breaker_failures failed calls the breaker answers at
// once without asking; after the cooldown one call asks, and a server
// that is back closes it.
func TestBreaker(t *testing.T) {
	srv := redistest.Start(t)
	c := Config{Addrs: []string{srv.Addr()}, Timeout: 200 * time.Millisecond, BreakerFailures: 2, BreakerCooldown: 300 * time.Millisecond}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cl := New(c)
	defer cl.Close()
	s := NewScript(`return redis.call('INCR', KEYS[1])`)
	ctx := context.Background()
	if v, err := cl.Run(ctx, s, []string{"k"}); err != nil || Int(v) != 1 {
		t.Fatalf("run: %v %v", v, err)
	}
	srv.Kill()
	for range 2 {
		if _, err := cl.Run(ctx, s, []string{"k"}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("with the server away: %v", err)
		}
	}
	start := time.Now()
	if _, err := cl.Run(ctx, s, []string{"k"}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "breaker open") {
		t.Fatalf("open breaker: %v", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("the open breaker took %s to answer; it must not ask the server", d)
	}
	if !cl.Degraded() || cl.BreakerOpens() != 1 {
		t.Fatalf("degraded %v, opens %d", cl.Degraded(), cl.BreakerOpens())
	}
	srv.Restart(t) // empty: the script is loaded again (NOSCRIPT, then EVAL)
	time.Sleep(350 * time.Millisecond)
	if v, err := cl.Run(ctx, s, []string{"k"}); err != nil || Int(v) != 1 {
		t.Fatalf("after the cooldown, with the server back: %v %v", v, err)
	}
	if cl.Degraded() {
		t.Fatal("still degraded")
	}
}

// FuzzKey: a key is bounded and distinct lists of parts give distinct
// keys, whatever the parts hold.
func FuzzKey(f *testing.F) {
	f.Add("ab", "c", "a", "bc")
	f.Add("{b}", "x", "{b}x", "")
	f.Add(strings.Repeat("A", 4096), "", "", strings.Repeat("A", 4096))
	cl := &Client{cfg: Config{Prefix: DefaultPrefix}}
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		k1 := cl.Key("b", "b", a, b)
		k2 := cl.Key("b", "b", c, d)
		if len(k1) > 64 || len(k2) > 64 {
			t.Fatalf("key longer than 64 bytes: %d", len(k1))
		}
		if !strings.HasPrefix(k1, "toolgate:{b}:b:") {
			t.Fatalf("key %q", k1)
		}
		if (a != c || b != d) && k1 == k2 {
			t.Fatalf("parts %q,%q and %q,%q share key %s", a, b, c, d, k1)
		}
	})
}
