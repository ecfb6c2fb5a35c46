// Package cancelwatch is a request's context as the server that runs the
// request makes it, and lets that server tell the code under the request
// when the context ends without context.AfterFunc: one function at a
// time, in a slot the server keeps with the request, where AfterFunc
// takes a context of its own, a registration in its parent's map of
// children and a closure for each call (about 2% of a checked call's CPU
// in the upstream exchange, docs/performance.md).
//
// A Context is its own cancellation, not a context.WithCancel under the
// connection's: it ends only when the server calls End (the request is
// over, or its caller went away), so a request costs no registration in
// the connection's context's children, and no Done channel unless
// something asks for one (1.2% of a checked call's CPU went to the three).
// Contexts made under it with the context package (WithCancel,
// WithDeadline, AfterFunc) end with it through its AfterFunc method, as
// the context package arranges for a parent that has one.
//
// The code under the request uses the slot (From) only for a context that
// ends exactly when the Context does: the Context itself, one that only
// adds values, or a Wrapper; for any other, and when the slot is taken,
// it uses context.AfterFunc.
package cancelwatch

import (
	"context"
	"slices"
	"sync"
	"time"
)

type key struct{}

// Key is the context key a Context answers with itself.
var Key key

// Context is a request's context: the values (and the deadline) of the
// context it was made under, answering Key with itself, ended by End, with
// a slot for one function to run when it ends. Its zero value is not
// usable: Init it once, before it is handed out.
type Context struct {
	values context.Context

	mu    sync.Mutex
	done  chan struct{} // made by the first Done, closed by End
	err   error         // context.Canceled once End ran
	f     func()        // the slot's function
	after []*afterFunc  // what AfterFunc registered, in order
}

// afterFunc is one registration of AfterFunc; f is nil once it ran or was
// stopped.
type afterFunc struct{ f func() }

// closed is the Done of a Context asked for it only once it had ended.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Init makes c a context with the values and deadline of values, not
// ended.
func (c *Context) Init(values context.Context) {
	c.values = values
}

// Deadline is the deadline of the context c was made under.
func (c *Context) Deadline() (time.Time, bool) { return c.values.Deadline() }

// Done is closed when End runs.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			c.done = closed
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

// Err is nil until End runs, and context.Canceled after.
func (c *Context) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value answers Key with c, and any other key as the context c was made
// under.
func (c *Context) Value(k any) any {
	if k == Key {
		return c
	}
	return c.values.Value(k)
}

// String names the context, as the context package's own do.
func (c *Context) String() string { return "cancelwatch.Context" }

// AfterFunc has f run when c ends (in End's goroutine; at once, in a
// goroutine of its own, if c has ended), and returns what stops that: it
// reports true when f will never run. The context package calls it to end
// a context made under c with c (context.WithCancel, WithDeadline,
// AfterFunc, which runs its own function in a goroutine of its own).
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.after = append(c.after, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		held := a.f != nil
		a.f = nil
		// A long request (a stream) may make and end many contexts
		// under c: a stopped registration leaves the list.
		if i := slices.Index(c.after, a); i >= 0 {
			c.after = slices.Delete(c.after, i, i+1)
		}
		return held
	}
}

// From returns the Context of ctx when ctx ends exactly when it ends, and
// nil otherwise. It looks through Wrappers without asking for a Done;
// any other context ends with the Context when its Done is the same.
func From(ctx context.Context) *Context {
	for x := ctx; ; {
		switch w := x.(type) {
		case *Context:
			return w
		case Wrapper:
			if x = w.Wrapped(); x != nil {
				continue
			}
		}
		break
	}
	c, _ := ctx.Value(Key).(*Context)
	if c == nil || c.Done() != ctx.Done() {
		return nil
	}
	return c
}

// Wrapper is a context that ends exactly when the context it wraps does,
// with the same Done and Err (it adds values, or a deadline it does not
// enforce itself), for From to look through. Wrapped returns nil when
// that does not hold (any more).
type Wrapper interface {
	context.Context
	Wrapped() context.Context
}

// Watch has f run when c ends (at once, when it has), and reports false,
// doing nothing, when the slot holds another function.
func (c *Context) Watch(f func()) bool {
	c.mu.Lock()
	if c.f != nil {
		c.mu.Unlock()
		return false
	}
	if c.err != nil {
		c.mu.Unlock()
		f()
		return true
	}
	c.f = f
	c.mu.Unlock()
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

// End ends c: Err becomes context.Canceled, Done closes, the watched
// function runs, here, then what AfterFunc registered; any later Watch
// runs its own at once. Ending again does nothing.
func (c *Context) End() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	f, after := c.f, c.after
	c.f, c.after = nil, nil
	c.mu.Unlock()
	if f != nil {
		f()
	}
	for _, a := range after {
		c.mu.Lock()
		g := a.f
		a.f = nil
		c.mu.Unlock()
		if g != nil {
			g()
		}
	}
}
