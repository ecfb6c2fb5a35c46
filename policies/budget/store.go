package budget

import (
	"sync"
)

// shards is the number of independently locked parts of the store; a
// power of two.
const shards = 64

// evictSample is how many counters a full shard looks at to pick one to
// drop (the way Redis samples for its LRU).
const evictSample = 8

// store holds the counters: fixed windows keyed by a 64-bit hash, in
// shards that each hold at most perShard keys.
type store struct {
	perShard int
	m        *Metrics
	shards   [shards]shard
}

type shard struct {
	mu sync.Mutex
	m  map[uint64]entry
	_  [40]byte // keep shards on their own cache lines
}

// entry is one counter's window: it started at start and ends at until
// (unix nanoseconds).
type entry struct {
	start, until int64
	calls        int64
	cost         float64
}

func newStore(maxKeys int, m *Metrics) *store {
	s := &store{perShard: max(1, (maxKeys+shards-1)/shards), m: m}
	for i := range s.shards {
		s.shards[i].m = make(map[uint64]entry)
	}
	return s
}

func (s *store) shard(key uint64) *shard { return &s.shards[key>>58] }

// add charges dCalls and dCost to key's counter at now, in a window of
// window nanoseconds, unless that would take it past maxCalls or maxCost
// (0: no cap). It returns the counter's calls and cost before the charge,
// the end of its window, and whether it was charged.
func (s *store) add(key uint64, now, window, dCalls int64, dCost float64, maxCalls int64, maxCost float64) (int64, float64, int64, bool) {
	sh := s.shard(key)
	sh.mu.Lock()
	e, found := sh.m[key]
	if !found || now >= e.until {
		e = entry{start: now, until: now + window}
	}
	if maxCalls > 0 && e.calls+dCalls > maxCalls || maxCost > 0 && dCost > 0 && e.cost+dCost > maxCost {
		sh.mu.Unlock()
		return e.calls, e.cost, e.until, false
	}
	calls, cost := e.calls, e.cost
	e.calls += dCalls
	e.cost += dCost
	if !found && len(sh.m) >= s.perShard {
		s.evict(sh, now)
	}
	sh.m[key] = e
	sh.mu.Unlock()
	return calls, cost, e.until, true
}

// undo adds dCalls and dCost to key's counter if it is still in the
// window that held start (a refund, or a cost learned from the answer).
func (s *store) undo(key uint64, start int64, dCalls int64, dCost float64) {
	sh := s.shard(key)
	sh.mu.Lock()
	if e, ok := sh.m[key]; ok && e.start <= start && start < e.until {
		e.calls = max(0, e.calls+dCalls)
		e.cost = max(0, e.cost+dCost)
		sh.m[key] = e
	}
	sh.mu.Unlock()
}

// get returns key's counter at now: calls, cost and the end of its window
// (zeros when it has none or its window ended).
func (s *store) get(key uint64, now int64) (int64, float64, int64) {
	sh := s.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[key]
	sh.mu.Unlock()
	if !ok || now >= e.until {
		return 0, 0, 0
	}
	return e.calls, e.cost, e.until
}

// evict makes room in a full shard: it drops the expired counters among a
// sample, or else the sampled counter whose window ends first. Go's map
// iteration starts at a random place, which is what makes it a sample.
func (s *store) evict(sh *shard, now int64) {
	var victim uint64
	var victimUntil int64
	have := false
	expired, n := 0, 0
	for k, e := range sh.m {
		if now >= e.until {
			delete(sh.m, k)
			expired++
		} else if !have || e.until < victimUntil {
			victim, victimUntil, have = k, e.until, true
		}
		n++
		if n >= evictSample {
			break
		}
	}
	if expired > 0 {
		s.m.evictExpired.Add(float64(expired))
		return
	}
	delete(sh.m, victim)
	s.m.evictLive.Inc()
}

// keys counts the counters held, expired or not.
func (s *store) keys() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
