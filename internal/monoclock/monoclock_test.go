package monoclock

import (
	"testing"
	"time"
)

// TestNowMeasuresElapsedTime holds Now's differences (and Since) to the
// time that passed: never backwards, and a sleep's length within what time.Now
// measured around it.
func TestNowMeasuresElapsedTime(t *testing.T) {
	prev := Now()
	for range 1000 {
		n := Now()
		if n < prev {
			t.Fatalf("Now went backwards: %d after %d", n, prev)
		}
		prev = n
	}
	outerStart := time.Now()
	a := Now()
	time.Sleep(20 * time.Millisecond)
	got := Since(a)
	outer := time.Since(outerStart)
	if got < 20*time.Millisecond || got > outer {
		t.Fatalf("Now measured %v across a 20ms sleep; time.Now measured %v around it", got, outer)
	}
}

func BenchmarkNow(b *testing.B) {
	var s int64
	for b.Loop() {
		s += Now()
	}
	_ = s
}

func BenchmarkTimeNow(b *testing.B) {
	var s int64
	for b.Loop() {
		s += time.Now().UnixNano()
	}
	_ = s
}
