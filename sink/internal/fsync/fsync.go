// Package fsync makes files durable without a thread of the process
// waiting in fsync(2).
//
// A Go program's fsync is an ordinary blocking system call: the runtime
// hands the thread's processor to another thread for its duration and, if
// the program was idle, wakes its monitor thread (sysmon), which then naps
// in 20 µs steps until the program is idle again. For a sidecar that
// fsyncs its event log ten times a second while answering one call at a
// time, those wake-ups and hand-offs cost more than the fsyncs' own work
// (docs/performance.md, "Events and crashes").
//
// On Linux, a Syncer submits the fsync to the kernel's asynchronous I/O
// interface (io_submit with IOCB_CMD_FSYNC, Linux 4.18 and later), which
// runs it on a kernel worker, and waits for its completion on an eventfd
// through the runtime's network poller, like a socket read: the goroutine
// parks, no thread blocks, and the monitor is not woken. The fsync is the
// same fsync (the file's data and metadata, and the disk's cache flushed);
// only where it waits differs. Where the interface is missing or refused
// (another operating system or architecture, a kernel built without it, a
// seccomp profile that denies io_setup, a file system without fsync for
// asynchronous I/O), Sync calls (*os.File).Sync instead, with the same
// results.
package fsync

import (
	"os"
	"sync"
)

// A Syncer fsyncs files. Its Syncs run one at a time; the zero value is
// not usable, New returns one. It is safe for concurrent use.
type Syncer struct {
	mu     sync.Mutex
	k      *kernel // nil: (*os.File).Sync
	closed bool
	// why is what made the Syncer fall back, for Mode.
	why string
}

// New returns a Syncer that uses the kernel's asynchronous fsync where it
// can. It does not fail: a Syncer that cannot uses (*os.File).Sync, and
// Mode says why.
func New() *Syncer {
	k, err := newKernel()
	if err != nil {
		return &Syncer{why: err.Error()}
	}
	return &Syncer{k: k}
}

// Mode describes how s fsyncs: "kernel" (the asynchronous interface) or
// "blocking: REASON" ((*os.File).Sync, and why).
func (s *Syncer) Mode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.k != nil {
		return "kernel"
	}
	return "blocking: " + s.why
}

// Sync commits f's contents to stable storage, as (*os.File).Sync does,
// and returns the same errors: os.ErrClosed for a closed file, and the
// fsync's own error wrapped in an *os.PathError naming the file.
func (s *Syncer) Sync(f *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.k == nil || s.closed {
		return f.Sync()
	}
	ok, err := s.k.sync(f)
	if !ok {
		// The kernel would not take this file's fsync (a file system
		// without one for asynchronous I/O, or a resource limit): this
		// one blocks.
		return f.Sync()
	}
	if err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return nil
}

// Close releases what s holds in the kernel. Syncs after Close block as
// (*os.File).Sync does.
func (s *Syncer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.k == nil {
		return nil
	}
	return s.k.close()
}
