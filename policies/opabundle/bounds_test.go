package opabundle_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testutil"
	"github.com/toolgate/toolgate/policies/opabundle"
)

// peakHeap runs f and returns how far the heap grew above what it held
// before f, sampled every millisecond.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestReadBombs reads tarballs that expand far beyond their size: each
// stops with ErrTooLarge, and the heap grows by no more than the stated
// bound (max_expanded_bytes plus 8 MiB of buffers, docs/bundles.md)
// although the bombs expand to gigabytes.
func TestReadBombs(t *testing.T) {
	const mib = 1 << 20
	lim := opabundle.Limits{Compressed: 4 * mib, Expanded: 16 * mib, Entries: 1000, Entry: 4 * mib}
	bound := uint64(lim.Expanded + 8*mib)
	good := build(t, map[string]string{"toolgate/bounds/bounds.rego": boundsRego}, "r1")
	for _, tc := range []struct {
		name    string
		tarball []byte
	}{
		{"many entries under the entry bound, 2 GiB in all", testutil.Bomb{Entries: 512, EntrySize: 4 * mib}.Tarball()},
		{"one entry of 2 GiB", testutil.Bomb{Huge: 2 << 30}.Tarball()},
		{"a million empty entries", testutil.ManyEntries(1_000_000)},
		{"a policy then the bomb", testutil.Bomb{Files: []testutil.TarFile{{Name: "p.rego", Body: []byte(boundsRego)}}, Entries: 64, EntrySize: 3 * mib}.Tarball()},
		{"over the compressed bound", testutil.Bomb{Files: []testutil.TarFile{
			{Name: "r1.bin", Body: noise(2 * mib)}, {Name: "r2.bin", Body: noise(2 * mib)}, {Name: "r3.bin", Body: noise(2 * mib)}}}.Tarball()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			start := time.Now()
			grew := peakHeap(func() {
				_, err = opabundle.Read("main", bytes.NewReader(tc.tarball), nil, lim)
			})
			if !errors.Is(err, opabundle.ErrTooLarge) {
				t.Fatalf("Read of a %d-byte bomb: %v, want bundle_too_large", len(tc.tarball), err)
			}
			if grew > bound {
				t.Errorf("the heap grew by %d MiB reading it, over the bound of %d MiB", grew/mib, bound/mib)
			}
			t.Logf("%d KiB compressed: refused in %s, heap +%.1f MiB (%v)", len(tc.tarball)/1024, time.Since(start).Round(time.Millisecond), float64(grew)/mib, err)
		})
	}
	// The bounds leave a bundle under them alone.
	if b, err := opabundle.Read("main", bytes.NewReader(good), nil, lim); err != nil || b.Revision != "r1" {
		t.Fatalf("a good bundle under the bounds: %v, %v", b, err)
	}
	small := testutil.Bomb{Files: []testutil.TarFile{{Name: "p.rego", Body: []byte(boundsRego)}}, Entries: 3, EntrySize: 4 * mib}.Tarball()
	if _, err := opabundle.Read("main", bytes.NewReader(small), nil, lim); err != nil {
		t.Fatalf("12 MiB of files under a 16 MiB bound: %v, want read", err)
	}
}

// noise is n bytes that do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// FuzzBounded feeds arbitrary bytes through Bounded: it never panics, and
// what it hands on never expands beyond the bound.
func FuzzBounded(f *testing.F) {
	f.Add(build(f, map[string]string{"toolgate/bounds/bounds.rego": boundsRego}, "r1"))
	f.Add(testutil.Bomb{Entries: 3, EntrySize: 1000}.Tarball())
	f.Add(testutil.ManyEntries(3000))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := opabundle.Limits{Compressed: 1 << 20, Expanded: 64 << 10, Entries: 100, Entry: 16 << 10}
		r := opabundle.Bounded(bytes.NewReader(data), lim)
		defer r.Close()
		out, err := io.ReadAll(io.LimitReader(r, 4<<20))
		if err == nil && len(out) > 4<<20-1 {
			t.Fatalf("handed on %d bytes", len(out))
		}
		// What comes out is itself bounded: read it again under the
		// same bounds.
		if err == nil {
			if _, err := io.ReadAll(opabundle.Bounded(bytes.NewReader(out), lim)); err != nil && errors.Is(err, opabundle.ErrTooLarge) {
				t.Fatalf("a stream Bounded handed on is over its own bounds: %v", err)
			}
		}
	})
}
