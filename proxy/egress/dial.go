package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// FallbackDelay is how long the first address family is tried alone
// before the other starts (net.Dialer's default).
const FallbackDelay = 300 * time.Millisecond

// minAttempt is the least time one address is given when several share a
// deadline (net.Dialer's saneMinimum).
const minAttempt = 2 * time.Second

// dialParallel races the addresses of the first one's family against the
// others', the others starting FallbackDelay later or when the first
// family has failed.
func (g *Guard) dialParallel(ctx context.Context, network string, addrs []netip.AddrPort) (net.Conn, error) {
	var primaries, fallbacks []netip.AddrPort
	for _, a := range addrs {
		if a.Addr().Is4() == addrs[0].Addr().Is4() {
			primaries = append(primaries, a)
		} else {
			fallbacks = append(fallbacks, a)
		}
	}
	if len(fallbacks) == 0 {
		return g.dialSerial(ctx, network, primaries)
	}
	type result struct {
		c       net.Conn
		err     error
		primary bool
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the attempt that lost
	results := make(chan result, 2)
	start := func(primary bool, as []netip.AddrPort) {
		go func() {
			c, err := g.dialSerial(ctx, network, as)
			results <- result{c, err, primary}
		}()
	}
	start(true, primaries)
	timer := time.NewTimer(FallbackDelay)
	defer timer.Stop()
	pending, fellBack := 1, false
	var primaryErr, fallbackErr error
	for {
		select {
		case <-timer.C:
			if !fellBack {
				fellBack = true
				pending++
				start(false, fallbacks)
			}
		case r := <-results:
			pending--
			if r.err == nil {
				if pending > 0 {
					// The other attempt is cancelled; a connection it made
					// all the same is closed.
					go func() {
						if late := <-results; late.c != nil {
							late.c.Close()
						}
					}()
				}
				return r.c, nil
			}
			if r.primary {
				primaryErr = r.err
			} else {
				fallbackErr = r.err
			}
			if !fellBack {
				fellBack = true
				pending++
				start(false, fallbacks)
				continue
			}
			if pending == 0 {
				if primaryErr != nil {
					return nil, primaryErr
				}
				return nil, fallbackErr
			}
		}
	}
}

// dialSerial tries addrs in order, each with a share of the time ctx has
// left, and returns the first connection made or the first error.
func (g *Guard) dialSerial(ctx context.Context, network string, addrs []netip.AddrPort) (net.Conn, error) {
	var first error
	for i, ap := range addrs {
		if ctx.Err() != nil {
			if first == nil {
				first = context.Cause(ctx)
			}
			break
		}
		dctx, cancel := partialDeadline(ctx, len(addrs)-i)
		c, err := g.dial(dctx, network, ap.String())
		cancel()
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("egress: no address to dial")
	}
	return nil, first
}

// partialDeadline gives one of n remaining attempts its share of ctx's
// time left, at least minAttempt (never past ctx's own deadline).
func partialDeadline(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || n <= 1 {
		return ctx, func() {}
	}
	left := time.Until(dl)
	share := left / time.Duration(n)
	if share < minAttempt {
		share = min(minAttempt, left)
	}
	return context.WithTimeout(ctx, share)
}
