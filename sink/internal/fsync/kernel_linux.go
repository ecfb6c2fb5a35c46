//go:build linux && (amd64 || arm64)

package fsync

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's asynchronous I/O interface (linux/aio_abi.h), as laid out
// on the little-endian 64-bit architectures this file builds for.
const (
	iocbCmdFsync  = 2      // IOCB_CMD_FSYNC
	iocbFlagResfd = 1 << 0 // IOCB_FLAG_RESFD: signal aio_resfd on completion
)

// iocb is struct iocb; the fields an fsync leaves at zero are blank.
type iocb struct {
	_      uint64 // aio_data
	_      uint32 // aio_key
	_      uint32 // aio_rw_flags
	opcode uint16 // aio_lio_opcode
	_      int16  // aio_reqprio
	fildes uint32 // aio_fildes
	_      uint64 // aio_buf
	_      uint64 // aio_nbytes
	_      int64  // aio_offset
	_      uint64 // aio_reserved2
	flags  uint32 // aio_flags
	resfd  uint32 // aio_resfd
}

// ioEvent is struct io_event; only res is read.
type ioEvent struct {
	_   uint64 // data
	_   uint64 // obj
	res int64
	_   int64 // res2
}

// kernel is one asynchronous I/O context and the eventfd its completions
// signal, for one fsync at a time.
type kernel struct {
	ctx uintptr  // aio_context_t
	efd *os.File // non-blocking, so in the runtime's poller
	// fd is efd's descriptor (efd.Fd would make it blocking).
	fd  int
	raw syscall.RawConn
	cb  iocb
	ev  [1]ioEvent
}

func newKernel() (*kernel, error) {
	var ctx uintptr
	if _, _, e := unix.RawSyscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return nil, fmt.Errorf("io_setup: %w", e)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.RawSyscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// A non-blocking descriptor becomes a File the poller waits on.
	efd := os.NewFile(uintptr(fd), "fsync-eventfd")
	raw, err := efd.SyscallConn()
	if err != nil {
		efd.Close()
		unix.RawSyscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &kernel{ctx: ctx, efd: efd, fd: fd, raw: raw}, nil
}

// sync fsyncs f on a kernel worker and waits for it in the poller. ok is
// false when the kernel did not take the fsync (and did nothing): the
// caller then fsyncs itself. Otherwise err is the fsync's own error.
func (k *kernel) sync(f *os.File) (ok bool, err error) {
	fc, cerr := f.SyscallConn()
	if cerr != nil {
		return false, nil
	}
	var submitted syscall.Errno
	// The kernel takes its own reference to the file at submission, so a
	// Close of f while the fsync runs does not cut it short.
	cerr = fc.Control(func(fd uintptr) {
		k.cb = iocb{opcode: iocbCmdFsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: uint32(k.fd)}
		p := &k.cb
		// io_submit with IOCB_CMD_FSYNC queues the work and returns:
		// nothing in it waits, so it needs none of the runtime's
		// bookkeeping for blocking calls.
		n, _, e := unix.RawSyscall(unix.SYS_IO_SUBMIT, k.ctx, 1, uintptr(unsafe.Pointer(&p)))
		switch {
		case e != 0:
			submitted = e
		case n != 1:
			submitted = syscall.EAGAIN
		}
	})
	if cerr != nil || submitted != 0 {
		return false, nil
	}
	return true, k.wait()
}

// wait waits for the one submitted fsync to complete and returns its
// result.
func (k *kernel) wait() error {
	var b [8]byte
	var rerr error
	err := k.raw.Read(func(fd uintptr) bool {
		_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), 8)
		if e == syscall.EAGAIN {
			return false // not yet: park in the poller
		}
		if e != 0 {
			rerr = e
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		// The eventfd failed, which it does not: the fsync was
		// submitted and its completion is still owed, so reap it
		// waiting, rather than leave it to a later Sync.
		_, rerr := k.reap(true)
		return errors.Join(fmt.Errorf("fsync: eventfd: %w", err), rerr)
	}
	// The kernel puts the completion on the ring before it signals the
	// eventfd, so it is there; if it were not, reap would wait for it.
	if done, err := k.reap(false); done {
		return err
	}
	_, err = k.reap(true)
	return err
}

// reap collects the completion and returns its result: with wait, as an
// ordinary blocking call that waits for it; without, only if it is there
// (done false otherwise), without the runtime's bookkeeping for calls
// that block.
func (k *kernel) reap(wait bool) (done bool, err error) {
	var (
		n uintptr
		e syscall.Errno
	)
	if wait {
		for {
			n, _, e = unix.Syscall6(unix.SYS_IO_GETEVENTS, k.ctx, 1, 1, uintptr(unsafe.Pointer(&k.ev[0])), 0, 0)
			if e != syscall.EINTR {
				break
			}
		}
	} else {
		var ts unix.Timespec // zero: do not wait
		n, _, e = unix.RawSyscall6(unix.SYS_IO_GETEVENTS, k.ctx, 1, 1, uintptr(unsafe.Pointer(&k.ev[0])), uintptr(unsafe.Pointer(&ts)), 0)
	}
	switch {
	case e != 0:
		return true, fmt.Errorf("fsync: io_getevents: %w", e)
	case n == 0 && wait:
		return true, errors.New("fsync: io_getevents returned no completion")
	case n == 0:
		return false, nil
	}
	return true, result(k.ev[0].res)
}

// result is an io_event's res as an error: 0, or a negated errno.
func result(res int64) error {
	if res < 0 {
		return syscall.Errno(-res)
	}
	return nil
}

// close destroys the context (which waits for an fsync still running:
// none is, as Syncs and Close take turns) and closes the eventfd.
func (k *kernel) close() error {
	_, _, e := unix.Syscall(unix.SYS_IO_DESTROY, k.ctx, 0, 0)
	err := k.efd.Close()
	if e != 0 {
		return errors.Join(fmt.Errorf("io_destroy: %w", e), err)
	}
	return err
}

// The kernel reads and writes these structures by their layout.
var (
	_ [64 - unsafe.Sizeof(iocb{})]struct{}
	_ [unsafe.Sizeof(iocb{}) - 64]struct{}
	_ [32 - unsafe.Sizeof(ioEvent{})]struct{}
	_ [unsafe.Sizeof(ioEvent{}) - 32]struct{}
	_ [unsafe.Offsetof(iocb{}.opcode) - 16]struct{}
	_ [16 - unsafe.Offsetof(iocb{}.opcode)]struct{}
	_ [unsafe.Offsetof(iocb{}.flags) - 56]struct{}
	_ [56 - unsafe.Offsetof(iocb{}.flags)]struct{}
)
