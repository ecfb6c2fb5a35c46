package cancelwatch_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/internal/cancelwatch"
)

// TestSlotAsAfterFunc holds a Context's slot to context.AfterFunc's contract: the
// function runs once when the context ends (at once when it had), stop
// reports true only when it will never run, and a slot holds one function.
func TestSlotAsAfterFunc(t *testing.T) {
	t.Run("ends after watch", func(t *testing.T) {
		s := newCtx()
		var ran atomic.Int32
		if !s.Watch(func() { ran.Add(1) }) {
			t.Fatal("Watch refused an empty slot")
		}
		s.End()
		s.End()
		if ran.Load() != 1 {
			t.Errorf("ran %d times, want 1", ran.Load())
		}
		if s.Unwatch() {
			t.Error("Unwatch after the function ran reported it would never run")
		}
	})
	t.Run("unwatch before end", func(t *testing.T) {
		s := newCtx()
		var ran atomic.Int32
		s.Watch(func() { ran.Add(1) })
		if !s.Unwatch() {
			t.Error("Unwatch before the end reported the function ran")
		}
		s.End()
		if ran.Load() != 0 {
			t.Errorf("ran %d times after Unwatch, want 0", ran.Load())
		}
	})
	t.Run("watch after end", func(t *testing.T) {
		s := newCtx()
		s.End()
		var ran atomic.Int32
		s.Watch(func() { ran.Add(1) })
		if ran.Load() != 1 {
			t.Errorf("a Watch after the end ran its function %d times, want 1 (at once)", ran.Load())
		}
	})
	t.Run("one function at a time", func(t *testing.T) {
		s := newCtx()
		s.Watch(func() {})
		if s.Watch(func() {}) {
			t.Error("a second Watch took a held slot")
		}
		s.Unwatch()
		if !s.Watch(func() {}) {
			t.Error("Watch refused a slot freed by Unwatch")
		}
	})
	t.Run("race", func(t *testing.T) {
		// End and Unwatch at once: the function runs exactly when
		// Unwatch says it did not stop it.
		for range 200 {
			s := newCtx()
			var ran atomic.Int32
			s.Watch(func() { ran.Add(1) })
			var stopped bool
			var wg sync.WaitGroup
			wg.Go(s.End)
			wg.Go(func() { stopped = s.Unwatch() })
			wg.Wait()
			if stopped == (ran.Load() == 1) {
				t.Fatalf("Unwatch said %v and the function ran %d times", stopped, ran.Load())
			}
		}
	})
}

// newCtx is a request's context as a server makes one.
func newCtx() *cancelwatch.Context {
	c := new(cancelwatch.Context)
	c.Init(context.WithValue(context.Background(), valueKey{}, "conn"))
	return c
}

type valueKey struct{}

// wrapper is a cancelwatch.Wrapper: a context that adds a value.
type wrapper struct{ context.Context }

func (w wrapper) Wrapped() context.Context { return w.Context }

// TestFrom checks From hands out the Context only for a context that ends
// with it: the Context itself or one that adds only values, not one with a
// deadline or cancel of its own.
func TestFrom(t *testing.T) {
	req := newCtx()
	defer req.End()
	if cancelwatch.From(req) != req {
		t.Error("From(request context) is not itself")
	}
	type k struct{}
	if cancelwatch.From(context.WithValue(req, k{}, 1)) != req {
		t.Error("From(a value context over it) is not the request's")
	}
	if cancelwatch.From(wrapper{wrapper{req}}) != req {
		t.Error("From(a Wrapper over a Wrapper over it) is not the request's")
	}
	own, cancelOwn := context.WithCancel(req)
	defer cancelOwn()
	if cancelwatch.From(own) != nil || cancelwatch.From(wrapper{own}) != nil {
		t.Error("From(a context with a cancel of its own, or a Wrapper over one) handed out the request's")
	}
	dl, cancelDl := context.WithDeadline(req, time.Now().Add(time.Hour))
	defer cancelDl()
	if cancelwatch.From(dl) != nil {
		t.Error("From(a context with a deadline of its own) handed out the request's")
	}
	if cancelwatch.From(context.Background()) != nil {
		t.Error("From(a context without one) is not nil")
	}
}

// TestContext holds a Context to a context's contract: not done until End,
// then Done closed (made before the end or after) and Err
// context.Canceled; the values of the context it was made under, and
// itself for Key; no deadline where that has none.
func TestContext(t *testing.T) {
	for _, doneFirst := range []bool{true, false} {
		c := newCtx()
		var done <-chan struct{}
		if doneFirst {
			done = c.Done()
		}
		if c.Err() != nil {
			t.Fatalf("Err before End = %v", c.Err())
		}
		if c.Value(valueKey{}) != "conn" || c.Value(cancelwatch.Key) != c {
			t.Fatalf("Value: %v, %v", c.Value(valueKey{}), c.Value(cancelwatch.Key))
		}
		if _, ok := c.Deadline(); ok {
			t.Fatal("a deadline where the context under it has none")
		}
		c.End()
		c.End()
		if !doneFirst {
			done = c.Done()
		}
		select {
		case <-done:
		default:
			t.Fatalf("Done (asked for before End: %v) not closed after End", doneFirst)
		}
		if c.Err() != context.Canceled || context.Cause(c) != context.Canceled {
			t.Fatalf("after End: Err %v, Cause %v; want context.Canceled", c.Err(), context.Cause(c))
		}
	}
}

// TestContextsUnder: contexts the context package makes under a Context
// end with it, through its AfterFunc, without a goroutine each; one ended
// before leaves nothing registered; context.AfterFunc's function runs
// once, unless stopped.
func TestContextsUnder(t *testing.T) {
	c := newCtx()
	before := runtime.NumGoroutine()
	var kids []context.Context
	for i := range 100 {
		var k context.Context
		var cancel context.CancelFunc
		if i%2 == 0 {
			k, cancel = context.WithCancel(c)
		} else {
			k, cancel = context.WithTimeout(c, time.Hour)
		}
		defer cancel()
		kids = append(kids, k)
	}
	early, cancelEarly := context.WithCancel(c)
	cancelEarly()
	if early.Err() == nil {
		t.Fatal("a context ended under c is not done")
	}
	var ran, stoppedRan atomic.Int32
	fired := make(chan struct{})
	context.AfterFunc(c, func() { ran.Add(1); close(fired) })
	stop := context.AfterFunc(c, func() { stoppedRan.Add(1) })
	if !stop() {
		t.Fatal("stop before the end reported the function ran")
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Fatalf("%d goroutines after making 100 contexts under a Context, %d before: one each?", n, before)
	}
	for _, k := range kids {
		if k.Err() != nil {
			t.Fatal("a context under c ended before c")
		}
	}
	c.End()
	for i, k := range kids {
		if k.Err() != context.Canceled {
			t.Fatalf("context %d under c: Err %v after c ended", i, k.Err())
		}
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("context.AfterFunc's function did not run when c ended")
	}
	time.Sleep(10 * time.Millisecond)
	if ran.Load() != 1 || stoppedRan.Load() != 0 {
		t.Fatalf("AfterFunc's function ran %d times, the stopped one %d; want 1 and 0", ran.Load(), stoppedRan.Load())
	}
	// After the end: a context made under c is done at once.
	late, cancelLate := context.WithCancel(c)
	defer cancelLate()
	if late.Err() != context.Canceled {
		t.Fatalf("a context made under an ended Context: Err %v", late.Err())
	}
	lateRan := make(chan struct{})
	context.AfterFunc(c, func() { close(lateRan) })
	select {
	case <-lateRan:
	case <-time.After(10 * time.Second):
		t.Fatal("context.AfterFunc on an ended Context did not run its function")
	}
}
