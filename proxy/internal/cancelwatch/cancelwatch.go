// Package cancelwatch lets the server that made a request's context tell
// the code under the request when that context ends, without
// context.AfterFunc: one function at a time, in a slot the server keeps
// with the request, where AfterFunc takes a context of its own, a
// registration in its parent's map of children and a closure for each
// call (about 2% of a checked call's CPU in the upstream exchange,
// docs/performance.md).
//
// The server puts a Watcher in the request's context (under Key) and
// ends it whenever the request's context ends. The code under the request
// uses it only for a context whose Done is the Watcher's own (a context
// that only adds values or a deadline it keeps itself); for any other,
// and when the slot is taken, it uses context.AfterFunc.
package cancelwatch

import (
	"context"
	"sync"
)

// Watcher runs one function when a request's context ends.
type Watcher interface {
	// Done is the watched context's Done.
	Done() <-chan struct{}
	// Watch has f run once the context ends (at once, when it has). It
	// reports false, doing nothing, when another function is watched.
	Watch(f func()) bool
	// Unwatch takes the watched function back. It reports true when the
	// function will never run, false when it ran or runs, as the stop of
	// context.AfterFunc.
	Unwatch() bool
}

type key struct{}

// Key is the context key a server's request context answers with its
// Watcher.
var Key key

// From returns the Watcher of ctx when ctx ends exactly when the
// Watcher's context ends (its Done is the same), and nil otherwise.
func From(ctx context.Context) Watcher {
	w, _ := ctx.Value(Key).(Watcher)
	if w == nil || w.Done() != ctx.Done() {
		return nil
	}
	return w
}

// Slot is a Watcher for a server: the server sets Ctx, the watched
// context, and calls End when Ctx ends. A Watch that finds Ctx ended runs
// its function itself, so a context that ended before the server could
// call End is not missed.
type Slot struct {
	Ctx context.Context

	mu    sync.Mutex
	f     func()
	ended bool
}

// Watch has f run when the slot ends (at once, when it has), and
// reports false when the slot holds another function.
func (s *Slot) Watch(f func()) bool {
	s.mu.Lock()
	if s.f != nil {
		s.mu.Unlock()
		return false
	}
	if s.ended {
		s.mu.Unlock()
		f()
		return true
	}
	s.f = f
	s.mu.Unlock()
	if s.Ctx.Err() != nil {
		s.End()
	}
	return true
}

// Done is Ctx's.
func (s *Slot) Done() <-chan struct{} { return s.Ctx.Done() }

// Unwatch takes the function back: true when it will never run.
func (s *Slot) Unwatch() bool {
	s.mu.Lock()
	held := s.f != nil
	s.f = nil
	s.mu.Unlock()
	return held
}

// End ends the slot: the watched function runs, here, and any later
// Watch runs its own at once.
func (s *Slot) End() {
	s.mu.Lock()
	f := s.f
	s.f, s.ended = nil, true
	s.mu.Unlock()
	if f != nil {
		f()
	}
}
