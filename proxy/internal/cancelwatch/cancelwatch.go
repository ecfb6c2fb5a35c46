// Package cancelwatch lets the server that made a request's context tell
// the code under the request when that context ends, without
// context.AfterFunc: one function at a time, in a slot the server keeps
// with the request, where AfterFunc takes a context of its own, a
// registration in its parent's map of children and a closure for each
// call (about 2% of a checked call's CPU in the upstream exchange,
// docs/performance.md).
//
// The server makes each request's context a Context and ends it (End)
// whenever the context under it ends. The code under the request uses it
// (From) only for a context whose Done is the Context's own (a context
// that only adds values, or a deadline it keeps itself); for any other,
// and when the slot is taken, it uses context.AfterFunc.
package cancelwatch

import (
	"context"
	"sync"
)

type key struct{}

// Key is the context key a Context answers with itself.
var Key key

// Context is a request's context as a server makes it: the context under
// it (its Done, Err, Deadline and values), answering Key with itself, and
// a slot for one function to run when it ends. The server calls End when
// the context under it ends; a Watch that finds that context ended runs
// its function itself, so an end the server has not passed on yet is not
// missed.
type Context struct {
	context.Context

	mu    sync.Mutex
	f     func()
	ended bool
}

// Value answers Key with c, and any other key as the context under it.
func (c *Context) Value(k any) any {
	if k == Key {
		return c
	}
	return c.Context.Value(k)
}

// From returns the Context of ctx when ctx ends exactly when it ends (its
// Done is the same), and nil otherwise.
func From(ctx context.Context) *Context {
	c, _ := ctx.Value(Key).(*Context)
	if c == nil || c.Done() != ctx.Done() {
		return nil
	}
	return c
}

// Watch has f run when c ends (at once, when it has), and reports false,
// doing nothing, when the slot holds another function.
func (c *Context) Watch(f func()) bool {
	c.mu.Lock()
	if c.f != nil {
		c.mu.Unlock()
		return false
	}
	if c.ended {
		c.mu.Unlock()
		f()
		return true
	}
	c.f = f
	c.mu.Unlock()
	if c.Err() != nil {
		c.End()
	}
	return true
}

// Unwatch takes the function back. It reports true when the function will
// never run, false when it ran or runs, as the stop of context.AfterFunc.
func (c *Context) Unwatch() bool {
	c.mu.Lock()
	held := c.f != nil
	c.f = nil
	c.mu.Unlock()
	return held
}

// End ends the slot: the watched function runs, here, and any later Watch
// runs its own at once.
func (c *Context) End() {
	c.mu.Lock()
	f := c.f
	c.f, c.ended = nil, true
	c.mu.Unlock()
	if f != nil {
		f()
	}
}
