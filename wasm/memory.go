package wasm

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory backs one instance's linear memory. It reserves the
// memory's whole limit of address space when the instance is made and
// commits pages as the module grows, so a grow never copies (wazero's own
// memory grows a Go slice, copying everything so far: a module growing a
// page at a time to 16 MiB copied about 80 MiB, 50 ms alone and over a
// second under the race detector). On Unix the memory is mapped outside
// the Go heap and returned to the system when the instance is closed.
//
// The module's memory is declared one page larger than its limit (see
// instrument), so wazero asks for the page past the limit; linearMemory
// refuses it, records the refusal and raises the instance's interrupt
// flag. The module sees memory.grow fail, as WebAssembly says it must, and
// traps at its next check: the call ends with ErrMemoryLimit at once,
// whether the module would have trapped, exited or retried the grow
// forever.
type linearMemory struct {
	limit    uint64 // bytes the module may grow to
	onRefuse func() // raises the instance's interrupt flag

	refused atomic.Bool // a grow past limit was refused

	mu    sync.Mutex
	buf   []byte // the mapping; nil until reserved and after it is released
	size  uint64 // committed bytes
	busy  bool   // a goroutine is running or reading the instance
	freed bool   // wazero closed the module: release when no longer busy
}

var _ experimental.LinearMemory = (*linearMemory)(nil)

// committed counts the bytes of linear memory committed by every instance
// in the process, and peakCommitted its highest value, for tests.
var committed, peakCommitted atomic.Int64

func addCommitted(n int64) {
	now := committed.Add(n)
	for {
		peak := peakCommitted.Load()
		if now <= peak || peakCommitted.CompareAndSwap(peak, now) {
			return
		}
	}
}

// newLinearMemory returns a memory of at most limit bytes, held busy by
// the goroutine making the instance.
func newLinearMemory(limit uint64) *linearMemory {
	return &linearMemory{limit: limit, busy: true}
}

// allocator hands wazero the instance's memory.
func (m *linearMemory) allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return m })
}

// Reallocate implements experimental.LinearMemory: it commits the memory
// up to size bytes, or refuses (nil) past the limit or when the system has
// no memory to give.
func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.refuse()
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil {
		if m.freed {
			return nil
		}
		b, err := reserveMemory(m.limit)
		if err != nil {
			return nil
		}
		m.buf = b
	}
	if size > m.size {
		b, err := commitMemory(m.buf, m.size, size, m.limit)
		if err != nil {
			m.refuse()
			return nil
		}
		addCommitted(int64(size - m.size))
		m.buf, m.size = b, size
	}
	return m.buf[:size]
}

func (m *linearMemory) refuse() {
	m.refused.Store(true)
	if m.onRefuse != nil {
		m.onRefuse()
	}
}

// Free implements experimental.LinearMemory: wazero calls it when the
// module is closed, perhaps from another goroutine (Engine.Close) while a
// call still runs in it; the memory is then released when that call ends.
func (m *linearMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.freed = true
	if !m.busy {
		m.unmap()
	}
}

// acquire marks the memory in use by the calling goroutine; false when it
// was freed.
func (m *linearMemory) acquire() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed {
		return false
	}
	m.busy = true
	return true
}

// release ends acquire (or the hold newLinearMemory starts with), and
// releases a freed memory.
func (m *linearMemory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.busy = false
	if m.freed {
		m.unmap()
	}
}

func (m *linearMemory) unmap() {
	if m.buf != nil {
		releaseMemory(m.buf)
		addCommitted(-int64(m.size))
		m.buf, m.size = nil, 0
	}
}
