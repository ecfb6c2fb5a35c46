package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/redistest"
)

// The adversarial group for limits kept in Redis (state.redis): each
// attack spreads calls over three sidecar processes sharing one real
// Redis, or spells its session and agent ids to collide with another
// caller's counters or to grow Redis. It is judged by what the real
// upstream executed and by what Redis holds, never by toolgate's answers.

// fleetSearchTools is a tool whose arguments come from a JSON body.
const fleetSearchTools = `
tools:
  - name: search
    match: {host: 127.0.0.1, method: POST, path: /search}
    schema:
      type: object
      properties:
        term: {type: string}
        retmax: {type: number}
`

// TestAdversarialFleetSpreadCalls: a caller bursts calls for one session,
// white-space spellings of it, respelled arguments and other sessions,
// all at once and round-robin over three sidecars, to get more calls
// executed than the budgets and loop breaking allow in total.
func TestAdversarialFleetSpreadCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := startExecUpstream(t)
	fleet := startFleet(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 2s}", srv.Addr()), fleetSearchTools+`
budgets:
  limits:
    - {name: per_session, per: [session], calls: 4, window: 10m, on_unavailable: deny}
    - {name: all, calls: 10, window: 10m, on_unavailable: deny}
  loops: {max_repeats: 2, window: 10m, on_unavailable: deny}
`)
	var tally limitsTally
	var mu sync.Mutex
	send := func(i int, session, body string) {
		st := postThrough(fleet[i%3].client, up.srv.URL+"/search", body, map[string]string{"X-Toolgate-Session": session})
		mu.Lock()
		tally.tried++
		if st != http.StatusOK {
			tally.refused++
		}
		mu.Unlock()
	}
	// One session, spelled with white space, 30 different calls at once.
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(i, []string{"s1", " s1", "s1 ", "\ts1"}[i%4], fmt.Sprintf(`{"term":"t%d"}`, i))
		}()
	}
	wg.Wait()
	if got := up.executed(); got > 4 {
		tally.overLimit += got - 4
		t.Errorf("one session spread over three sidecars: the upstream executed %d calls; per_session allows 4", got)
	}
	// One call spelled six ways, in a fresh session, over the three.
	before := up.executed()
	for i, body := range []string{`{"term":"x","retmax":5}`, `{"retmax":5.0,"term":"x"}`, `{"term":"\u0078","retmax":5e0}`, `{"term":"x","retmax":50e-1}`, `{"retmax":0.5e1,"term":"x"}`, `{"term":"x","retmax":5}`} {
		send(i, "s-loop", body)
	}
	if got := up.executed() - before; got > 2 {
		tally.overLimit += got - 2
		t.Errorf("one call respelled over three sidecars: the upstream executed it %d times; loops.max_repeats is 2", got)
	}
	// Many sessions at once: the budget without per holds them all.
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(i, "s-many-"+strconv.Itoa(i), fmt.Sprintf(`{"term":"m%d"}`, i))
		}()
	}
	wg.Wait()
	if got := up.executed(); got > 10 {
		tally.overLimit += got - 10
		t.Errorf("40 sessions over three sidecars: the upstream executed %d calls; the budget 'all' allows 10", got)
	}
	if tally.overLimit != 0 {
		t.Errorf("%d calls executed past the limits", tally.overLimit)
	}
	t.Logf("spread over three sidecars: tried %d, refused %d, executed past the limit %d", tally.tried, tally.refused, tally.overLimit)
}

// TestAdversarialFleetKeySpelling: session and agent ids made to collide
// with another caller's counter (ids that concatenate alike, that hold
// Redis's hash-tag braces, the key separator or another key's very text)
// or to grow Redis (32 KiB ids, a thousand sessions). Each id must get
// its own budget, neither shared nor lost, by the upstream's count; every
// key in Redis is short, holds no id, and expires. (Ids are counted as the
// proxy records them, cut to limits.max_caller_id_bytes, so the long ids
// here differ within their first 256 bytes.)
func TestAdversarialFleetKeySpelling(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	up := startExecUpstream(t)
	fleet := startFleet(t, 3, fmt.Sprintf("{addrs: [%s], timeout: 2s}", srv.Addr()), fleetSearchTools+`
budgets:
  limits:
    - {name: pair, per: [agent, session], calls: 2, window: 10m, on_unavailable: deny}
`)
	big := strings.Repeat("A", 32<<10)
	pairs := [][2]string{
		{"ab", "c"}, {"a", "bc"}, {"a\tb", "c"},
		{"x}", "{y"}, {"x", "}{y"}, {"{b}", "toolgate:{b}:b:00"}, {"*", "?"},
		{big, big}, {"B" + big, big}, {big, "B" + big},
	}
	ids := map[string]bool{}
	for _, p := range pairs {
		ids[p[0]], ids[p[1]] = true, true
	}
	for j, p := range pairs {
		before := up.executed()
		for i := range 3 {
			postThrough(fleet[(i+j)%3].client, up.srv.URL+"/search", fmt.Sprintf(`{"term":"k%d"}`, i),
				map[string]string{"X-Toolgate-Agent": p[0], "X-Toolgate-Session": p[1]})
		}
		if got := up.executed() - before; got != 2 {
			t.Errorf("agent %.12q session %.12q: the upstream executed %d of 3 calls; its own budget allows exactly 2 (0, 1: another id's counter was used; 3: over)", p[0], p[1], got)
		}
	}
	// A thousand sessions of 1 KiB ids: one key each, bounded.
	pad := strings.Repeat("z", 1<<10)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1000; i += 8 {
				postThrough(fleet[i%3].client, up.srv.URL+"/search", `{"term":"g"}`,
					map[string]string{"X-Toolgate-Agent": "g", "X-Toolgate-Session": strconv.Itoa(i) + pad})
			}
		}()
	}
	wg.Wait()
	keys := redisKeys(t, srv)
	if len(keys) != len(pairs)+1000 {
		t.Errorf("Redis holds %d keys for %d counters; want one each", len(keys), len(pairs)+1000)
	}
	for _, k := range keys {
		if len(k) > 64 || strings.Contains(k, "zzzz") || strings.Contains(k, "AAAA") {
			t.Fatalf("key %.80q is not a bounded hash (%d bytes)", k, len(k))
		}
		if ttl, err := srv.Do("PTTL", k); err != nil || ttl == "-1" {
			t.Fatalf("key %q has no TTL (%q, %v)", k, ttl, err)
		}
	}
	mem, _ := srv.Do("MEMORY", "USAGE", keys[0])
	t.Logf("%d keys after %d distinct (agent, session) pairs of up to 32 KiB; one key %s bytes", len(keys), len(pairs)+1000, mem)
}

// redisKeys lists every key of srv with SCAN.
func redisKeys(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	var out []string
	iter := rdb.Scan(context.Background(), 0, "*", 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("Redis holds no keys")
	}
	return out
}

// TestSecurityDocFleetRows checks that every test docs/security.md's
// "Limits hold across a fleet" table names exists.
func TestSecurityDocFleetRows(t *testing.T) {
	checkSecurityDocSection(t, "Limits hold across a fleet (state.redis)", "`((?:Test|Fuzz|Benchmark)[A-Za-z]+)`", 6,
		".", "../../policies/budget", "../../policies/approval", "../../internal/redisstate")
}
