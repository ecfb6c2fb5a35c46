// Package redisstate is toolgate's connection to the Redis that holds the
// fleet's shared state (the `state.redis` section): budgets, loop
// counters, outbound rate limits and approval grant uses, counted once for
// every sidecar that shares the server. It wraps go-redis's universal
// client (standalone, Sentinel or Cluster) with what every caller needs:
// a short timeout per call, no retries (a retried script could count a
// call twice), a circuit breaker that stops asking a server that is away
// and asks again after a cooldown, and Lua scripts run by EVALSHA with a
// fallback to EVAL. go-redis reconnects by itself.
//
// Keys are "<prefix>:{<tag>}:<kind>:<hex>": the hex is a SHA-256 of the
// key's parts, never a raw value, so a key's size is fixed whatever the
// session or agent id, and the hash tag puts the keys one script touches
// on one Cluster slot.
package redisstate

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/section"
)

// Defaults and bounds of Config.
const (
	DefaultTimeout         = 50 * time.Millisecond
	MaxTimeout             = 5 * time.Second
	DefaultPrefix          = "toolgate"
	DefaultBreakerFailures = 3
	DefaultBreakerCooldown = time.Second
	MaxBreakerCooldown     = time.Minute
	DefaultPoolSize        = 64
	maxPrefixBytes         = 64
	maxAddrs               = 64
)

// Modes of Config.Mode.
const (
	ModeAuto       = ""
	ModeStandalone = "standalone"
	ModeSentinel   = "sentinel"
	ModeCluster    = "cluster"
)

// ErrUnavailable is the error of a call made while the breaker is open,
// or that failed or timed out: the server could not confirm it.
var ErrUnavailable = errors.New("redis state unavailable")

// Config is the state.redis section.
type Config struct {
	// Addrs are the servers, host:port: one standalone server, the
	// Sentinels (with MasterName), or some of a Cluster's nodes. Required
	// to turn the fleet state on.
	Addrs []string `yaml:"addrs"`
	// Mode is standalone, sentinel or cluster. Default: sentinel when
	// master_name is set, cluster when addrs holds several addresses,
	// else standalone.
	Mode string `yaml:"mode"`
	// MasterName is the Sentinel master's name. Default: none.
	MasterName string `yaml:"master_name"`
	// Username is the ACL user. Default: none (the default user).
	Username string `yaml:"username"`
	// PasswordEnv names the environment variable holding the password.
	// Default: none.
	PasswordEnv string `yaml:"password_env"`
	// DB is the database number (standalone and Sentinel). Default 0.
	DB int `yaml:"db"`
	// TLS connects with TLS, verifying the server's certificate against
	// the system's roots. Default false.
	TLS bool `yaml:"tls"`
	// Timeout bounds one round trip (a call's one script); past it the
	// call is decided by each limit's on_unavailable. Default 50ms; at
	// most 5s.
	Timeout time.Duration `yaml:"timeout"`
	// Prefix starts every key; sidecars that share counters share it.
	// Default "toolgate"; letters, digits, '_', '-', '.', at most 64
	// bytes.
	Prefix string `yaml:"prefix"`
	// BreakerFailures is how many failed calls in a row open the breaker:
	// then calls are decided locally at once, without asking Redis, for
	// BreakerCooldown, after which one call asks again. Default 3.
	BreakerFailures int `yaml:"breaker_failures"`
	// BreakerCooldown is how long an open breaker stays open. Default 1s;
	// at most 1m.
	BreakerCooldown time.Duration `yaml:"breaker_cooldown"`
	// PoolSize bounds the connections per server. Default 64.
	PoolSize int `yaml:"pool_size"`
}

// Enabled reports whether the section turns the fleet state on.
func (c *Config) Enabled() bool { return len(c.Addrs) > 0 }

// Validate applies the defaults and checks the section. Errors are
// section.Error values relative to it.
func (c *Config) Validate() error {
	if !c.Enabled() {
		if c.MasterName != "" || c.Mode != "" {
			return section.Errorf("addrs", "is required when mode or master_name is set")
		}
		return nil
	}
	if len(c.Addrs) > maxAddrs {
		return section.Errorf("addrs", "%d addresses; at most %d", len(c.Addrs), maxAddrs)
	}
	for i, a := range c.Addrs {
		if a == "" || strings.ContainsAny(a, "/ @?#") || !strings.Contains(a, ":") {
			return section.Errorf(fmt.Sprintf("addrs[%d]", i), "%q is not host:port", a)
		}
	}
	switch c.Mode {
	case ModeAuto, ModeStandalone, ModeCluster:
		if c.MasterName != "" && c.Mode != ModeAuto {
			return section.Errorf("master_name", "is for mode sentinel")
		}
	case ModeSentinel:
		if c.MasterName == "" {
			return section.Errorf("master_name", "is required in mode sentinel")
		}
	default:
		return section.Errorf("mode", "%q is not standalone, sentinel or cluster", c.Mode)
	}
	if c.Mode == ModeStandalone && len(c.Addrs) > 1 {
		return section.Errorf("addrs", "mode standalone takes one address")
	}
	if c.PasswordEnv != "" {
		if _, ok := os.LookupEnv(c.PasswordEnv); !ok {
			return section.Errorf("password_env", "environment variable %s is not set", c.PasswordEnv)
		}
	}
	if c.DB < 0 || c.DB > 1000 {
		return section.Errorf("db", "%d is outside 0 to 1000", c.DB)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < time.Millisecond || c.Timeout > MaxTimeout {
		return section.Errorf("timeout", "%s is outside 1ms to %s", c.Timeout, MaxTimeout)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if len(c.Prefix) > maxPrefixBytes {
		return section.Errorf("prefix", "is longer than %d bytes", maxPrefixBytes)
	}
	for i := 0; i < len(c.Prefix); i++ {
		b := c.Prefix[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.') {
			return section.Errorf("prefix", "%q holds %q; use letters, digits, '_', '-' and '.'", c.Prefix, b)
		}
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFailures
	}
	if c.BreakerFailures < 1 || c.BreakerFailures > 1000 {
		return section.Errorf("breaker_failures", "%d is outside 1 to 1000", c.BreakerFailures)
	}
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	if c.BreakerCooldown < time.Millisecond || c.BreakerCooldown > MaxBreakerCooldown {
		return section.Errorf("breaker_cooldown", "%s is outside 1ms to %s", c.BreakerCooldown, MaxBreakerCooldown)
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.PoolSize < 1 || c.PoolSize > 10000 {
		return section.Errorf("pool_size", "%d is outside 1 to 10000", c.PoolSize)
	}
	return nil
}

// Client runs scripts on the configured Redis. It is safe for concurrent
// use.
type Client struct {
	cfg Config
	rdb redis.UniversalClient

	mu        sync.Mutex
	failures  int       // consecutive failures
	openUntil time.Time // the breaker is open until then
	probing   bool      // one call is asking after the cooldown
	degraded  atomic.Bool
	errs      atomic.Int64
	opens     atomic.Int64
	now       func() time.Time
}

// New returns a client for a validated, enabled Config. It does not
// connect: the first call does, and a server that is away only makes calls
// fail (ErrUnavailable).
func New(cfg Config) *Client {
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	o := &redis.UniversalOptions{
		Addrs: cfg.Addrs, MasterName: cfg.MasterName, Username: cfg.Username, DB: cfg.DB,
		DialTimeout: max(cfg.Timeout, 100*time.Millisecond) * 4, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
		ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: cfg.PoolSize,
		MaxRedirects:    3,
		DisableIdentity: true,
		IsClusterMode:   cfg.Mode == ModeCluster,
	}
	if cfg.PasswordEnv != "" {
		o.Password = os.Getenv(cfg.PasswordEnv)
	}
	if cfg.TLS {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.Mode == ModeStandalone && len(cfg.Addrs) == 1 {
		o.IsClusterMode = false
	}
	var rdb redis.UniversalClient
	if cfg.Mode == ModeCluster || cfg.Mode == ModeAuto && cfg.MasterName == "" && len(cfg.Addrs) > 1 {
		rdb = redis.NewClusterClient(o.Cluster())
	} else {
		rdb = redis.NewUniversalClient(o)
	}
	return &Client{cfg: cfg, rdb: rdb, now: time.Now}
}

// quiet drops go-redis's own log lines (a dial that failed, a pool that
// could not fill): a Redis that is away is counted (Errors), shown in
// /status and the metrics, and decided by on_unavailable, not logged per
// connection attempt.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// Config is the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// Close closes the connections.
func (c *Client) Close() error { return c.rdb.Close() }

// Degraded reports whether the last call failed or the breaker is open:
// calls are decided locally (or refused, or allowed) by on_unavailable.
func (c *Client) Degraded() bool { return c.degraded.Load() }

// Errors counts the calls that failed or timed out.
func (c *Client) Errors() int64 { return c.errs.Load() }

// BreakerOpens counts the times the breaker opened.
func (c *Client) BreakerOpens() int64 { return c.opens.Load() }

// Key returns the key of kind for parts, under tag (which decides its
// Cluster slot): "<prefix>:{<tag>}:<kind>:<sha256 of the parts, hex>".
// Parts are length-prefixed before hashing, so no two lists of parts
// share a key.
func (c *Client) Key(tag, kind string, parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		l := uint64(len(p))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	sum := h.Sum(nil)
	return c.cfg.Prefix + ":{" + tag + "}:" + kind + ":" + hex.EncodeToString(sum[:16])
}

// Script is a Lua script run by EVALSHA, loaded by EVAL when the server
// does not know it (NOSCRIPT: a restarted or new server).
type Script struct{ s *redis.Script }

// NewScript returns a script for src.
func NewScript(src string) *Script { return &Script{s: redis.NewScript(src)} }

// Run runs s with keys and args in one round trip, bounded by the
// configured timeout. It returns the script's reply (nil, int64, string,
// or []any of those), or an error wrapping ErrUnavailable when the breaker
// is open or the server did not answer in time.
func (c *Client) Run(ctx context.Context, s *Script, keys []string, args ...any) (any, error) {
	if !c.allow() {
		return nil, fmt.Errorf("%w: circuit breaker open", ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	v, err := s.s.Run(ctx, c.rdb, keys, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		c.fail()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	c.ok()
	return v, nil
}

// Ping asks the server (for the breaker's probe and /status).
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// allow reports whether a call may ask the server: the breaker is closed,
// or its cooldown passed and no other call is probing.
func (c *Client) allow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failures < c.cfg.BreakerFailures {
		return true
	}
	if c.now().Before(c.openUntil) || c.probing {
		return false
	}
	c.probing = true
	return true
}

func (c *Client) fail() {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		// A master that died: ask the nodes again which holds the slots,
		// so a promoted replica is found (go-redis otherwise reloads its
		// map only every minute, or on MOVED).
		cc.ReloadState(context.Background())
	}
	c.errs.Add(1)
	c.degraded.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	c.probing = false
	if c.failures >= c.cfg.BreakerFailures {
		if c.failures == c.cfg.BreakerFailures {
			c.opens.Add(1)
		}
		c.openUntil = c.now().Add(c.cfg.BreakerCooldown)
	}
}

func (c *Client) ok() {
	c.degraded.Store(false)
	c.mu.Lock()
	c.failures, c.probing = 0, false
	c.mu.Unlock()
}

// Reply helpers for scripts' answers.

// Int reads an integer reply (0 when v is not one).
func Int(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		var n int64
		_, _ = fmt.Sscan(x, &n)
		return n
	}
	return 0
}

// Float reads a number a script returned as a string (0 when v is not
// one).
func Float(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case string:
		var f float64
		_, _ = fmt.Sscan(x, &f)
		return f
	}
	return 0
}
