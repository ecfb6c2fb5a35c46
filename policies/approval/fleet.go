package approval

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// useScript takes one use of a grant when it has fewer than uses: one
// atomic step on the server. KEYS[1] is the grant's use counter; ARGV:
// uses, the uses the audit store already records (the counter never goes
// below them, so a Redis that lost its data does not give used grants
// back), and the counter's TTL in ms. It returns 1 when the use was taken,
// 0 when the grant is used up.
var useScript = redisstate.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local seen = tonumber(ARGV[2])
if seen > n then n = seen end
if n >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], n + 1, 'PX', ARGV[3])
return 1
`)

// FleetStore is a Store whose grant uses are decided in the fleet's Redis
// (state.redis): the request and decision rows stay in the audit store it
// wraps (the file or ClickHouse), and each use is one atomic check and
// count in Redis, so a grant of n uses goes upstream at most n times
// across any number of sidecars. When Redis cannot confirm a use, the use
// fails and the call is refused as approval_unavailable (retryable); a use
// never falls back to a local count.
type FleetStore struct {
	Store
	rc  *redisstate.Client
	ttl time.Duration
}

// NewFleetStore returns audit with its uses kept in rc. ttl is how long a
// grant's counter lives: at least pending_ttl plus decision_ttl, a
// grant's whole life.
func NewFleetStore(audit Store, rc *redisstate.Client, ttl time.Duration) *FleetStore {
	return &FleetStore{Store: audit, rc: rc, ttl: ttl}
}

// Use takes one use of the grant d.ID in Redis when it has fewer than
// uses, then appends the use row d to the audit store, and reports
// whether it took it. An error (Redis away or slow, or the audit row not
// written) means the call must not go upstream.
func (s *FleetStore) Use(ctx context.Context, d audit.ApprovalDecision, uses int) (bool, error) {
	if !validID(d.ID) {
		return false, nil
	}
	seen := 0
	rec, found, err := s.Store.Find(ctx, d.ID, "")
	if err != nil {
		return false, err
	}
	if !found {
		return false, nil
	}
	seen = rec.Uses()
	key := s.rc.Key("g", "use", d.ID)
	v, err := s.rc.Run(ctx, useScript, []string{key}, uses, seen, max(s.ttl, time.Minute).Milliseconds())
	if err != nil {
		return false, fmt.Errorf("take a use of approval %s: %w", d.ID, err)
	}
	if redisstate.Int(v) != 1 {
		return false, nil
	}
	if err := s.Store.PutDecision(ctx, d); err != nil {
		return false, fmt.Errorf("record the use of approval %s: %w", d.ID, err)
	}
	return true, nil
}

// CountPending counts the pending requests of the store it wraps.
func (s *FleetStore) CountPending(ctx context.Context, since, now time.Time, limit int) (int, error) {
	return countPending(ctx, s.Store, since, now, limit)
}

var (
	_ UseStore       = (*FleetStore)(nil)
	_ PendingCounter = (*FleetStore)(nil)
)
