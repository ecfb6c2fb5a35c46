package sink

import (
	"fmt"
	"time"
)

// Prober is a Writer that can tell, without writing an event, whether a
// write would now have room: File and Spool look at the free space of
// their file system (and a Spool at the room left in its open segment).
// Queue.Durable calls it while writes fail, so that a Queue whose calls
// are all refused (events.on_write_failure: refuse) finds out when space
// returns without a write of its own.
type Prober interface {
	Probe() error
}

// probeEvery is the shortest time between two Probes by Durable.
const probeEvery = 100 * time.Millisecond

// Durable reports whether an event recorded now would be kept: nil unless
// the Queue's last write failed and no write succeeded since, and then
// ErrEventsUnavailable wrapped with that write's error. While writes fail
// it asks a Writer that is a Prober, at most every 100 ms, whether there
// is room again; when the Prober finds some, the mark is cleared and the
// next write decides. The proxy calls it before it forwards a call under
// events.on_write_failure: refuse, so that a call whose event cannot be
// written never reaches upstream.
func (q *Queue) Durable() error {
	if !q.failing.Load() {
		return nil
	}
	if p, ok := q.w.(Prober); ok {
		now := q.opts.now().UnixNano()
		last := q.lastProbe.Load()
		if now-last >= int64(probeEvery) && q.lastProbe.CompareAndSwap(last, now) && p.Probe() == nil {
			q.wrote()
			return nil
		}
	}
	var cause error = ErrEventsUnavailable
	if e := q.lastErr.Load(); e != nil {
		cause = *e
	}
	return fmt.Errorf("%w: %v", ErrEventsUnavailable, cause)
}
