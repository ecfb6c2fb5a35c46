package upstream

import (
	"context"
	"time"
)

// CallContext is the context of one upstream call with a timeout: the
// caller's context (which ends when the caller goes away) and the call's
// deadline. How the deadline is kept is left to the transport until it
// knows the call's path. On the fast path the connection's own deadline
// keeps it (the dial gets a deadline context of its own): no timer, no
// context of its own and no registration with the caller's, which cost
// about ten allocations and 3% of a checked call's CPU
// (docs/performance.md). Every other path arms it (Arm): from then on it is
// context.WithDeadline's, and ends at the deadline as that does.
//
// Unarmed, Done and Err are the caller's context's, so a read or write cut
// off by the deadline returns context.DeadlineExceeded from the transport
// (as an armed context's cut would), not from Err. Code that must see the
// deadline end the context itself (a step that waits on Done) arms it
// before the call goes upstream.
type CallContext struct {
	context.Context
	deadline time.Time
	cancel   context.CancelFunc // set once armed
}

// NewCallContext is parent with the deadline d (parent's own, when that is
// earlier).
func NewCallContext(parent context.Context, d time.Time) *CallContext {
	return NewCallContextIn(new(CallContext), parent, d)
}

// NewCallContextIn is NewCallContext made in c, storage its caller owns
// for as long as the context is used (a call's own).
func NewCallContextIn(c *CallContext, parent context.Context, d time.Time) *CallContext {
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	*c = CallContext{Context: parent, deadline: d}
	return c
}

// Wrapped is the context c's Done and Err are: its parent, or the
// context Arm made (cancelwatch.Wrapper). The deadline c adds is not
// enforced until Arm.
func (c *CallContext) Wrapped() context.Context { return c.Context }

// Deadline is the call's deadline.
func (c *CallContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Arm gives the deadline a timer of its own (context.WithDeadline). It is
// for the context's owner before the context goes to anything that may
// keep it or hand it to another goroutine; armed again, it does nothing.
func (c *CallContext) Arm() {
	if c.cancel == nil {
		c.Context, c.cancel = context.WithDeadline(c.Context, c.deadline)
	}
}

// Cancel is an armed context's context.CancelFunc, and does nothing
// otherwise (nor on nil).
func (c *CallContext) Cancel() {
	if c != nil && c.cancel != nil {
		c.cancel()
	}
}

// lazy is the context whose deadline the fast path keeps itself, nil for
// any other.
func lazy(ctx context.Context) *CallContext {
	if c, ok := ctx.(*CallContext); ok && c.cancel == nil {
		return c
	}
	return nil
}
