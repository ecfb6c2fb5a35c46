package cancelwatch_test

import (
	"context"
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
	newSlot := func() (*cancelwatch.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		return &cancelwatch.Context{Context: ctx}, cancel
	}
	t.Run("ends after watch", func(t *testing.T) {
		s, cancel := newSlot()
		var ran atomic.Int32
		if !s.Watch(func() { ran.Add(1) }) {
			t.Fatal("Watch refused an empty slot")
		}
		cancel()
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
		s, cancel := newSlot()
		var ran atomic.Int32
		s.Watch(func() { ran.Add(1) })
		if !s.Unwatch() {
			t.Error("Unwatch before the end reported the function ran")
		}
		cancel()
		s.End()
		if ran.Load() != 0 {
			t.Errorf("ran %d times after Unwatch, want 0", ran.Load())
		}
	})
	t.Run("watch after end", func(t *testing.T) {
		s, cancel := newSlot()
		cancel()
		s.End()
		var ran atomic.Int32
		s.Watch(func() { ran.Add(1) })
		if ran.Load() != 1 {
			t.Errorf("a Watch after the end ran its function %d times, want 1 (at once)", ran.Load())
		}
	})
	t.Run("context ended before End", func(t *testing.T) {
		// The server has not called End yet: Watch finds the context
		// ended itself.
		s, cancel := newSlot()
		cancel()
		var ran atomic.Int32
		s.Watch(func() { ran.Add(1) })
		if ran.Load() != 1 {
			t.Errorf("ran %d times, want 1", ran.Load())
		}
		s.End()
		if ran.Load() != 1 {
			t.Errorf("End ran it again: %d", ran.Load())
		}
	})
	t.Run("one function at a time", func(t *testing.T) {
		s, cancel := newSlot()
		defer cancel()
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
			s, cancel := newSlot()
			var ran atomic.Int32
			s.Watch(func() { ran.Add(1) })
			var stopped bool
			var wg sync.WaitGroup
			wg.Go(func() { cancel(); s.End() })
			wg.Go(func() { stopped = s.Unwatch() })
			wg.Wait()
			if stopped == (ran.Load() == 1) {
				t.Fatalf("Unwatch said %v and the function ran %d times", stopped, ran.Load())
			}
		}
	})
}

// TestFrom checks From hands out the Context only for a context that ends
// with it: the Context itself or one that adds only values, not one with a
// deadline or cancel of its own.
func TestFrom(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := &cancelwatch.Context{Context: base}
	if cancelwatch.From(req) != req {
		t.Error("From(request context) is not itself")
	}
	type k struct{}
	if cancelwatch.From(context.WithValue(req, k{}, 1)) != req {
		t.Error("From(a value context over it) is not the request's")
	}
	own, cancelOwn := context.WithCancel(req)
	defer cancelOwn()
	if cancelwatch.From(own) != nil {
		t.Error("From(a context with a cancel of its own) handed out the request's")
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
