package reload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchMask is what a watched folder reports: entries created, deleted,
// renamed in or out, their attributes, and files closed after writing. It
// leaves out IN_MODIFY, every write(2): the events file is written beside
// the configuration by default, once per call (or per batch), and each
// write would wake the watcher, a thread hand-off on every call. A file
// rewritten in place is seen when its writer closes it, or by the poll.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// newFolderWatcher watches folders through inotify.
func newFolderWatcher() (folderWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &inotifyWatcher{
		f:      os.NewFile(uintptr(fd), "inotify"), // non-blocking: reads wait in Go's poller
		fd:     fd,
		dirs:   map[int32]string{},
		events: make(chan string),
		errs:   make(chan error),
		done:   make(chan struct{}),
	}
	go w.read()
	return w, nil
}

// inotifyWatcher is a folderWatcher over inotify(7).
type inotifyWatcher struct {
	f      *os.File
	fd     int
	mu     sync.Mutex
	dirs   map[int32]string // watch descriptor → folder
	events chan string
	errs   chan error
	done   chan struct{}
	once   sync.Once
}

func (w *inotifyWatcher) Add(dir string) error {
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	w.mu.Lock()
	w.dirs[int32(wd)] = dir
	w.mu.Unlock()
	return nil
}

func (w *inotifyWatcher) Events() <-chan string { return w.events }
func (w *inotifyWatcher) Errors() <-chan error  { return w.errs }

func (w *inotifyWatcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		err = w.f.Close() // ends the pending read
	})
	return err
}

// read turns the kernel's records into paths until Close.
func (w *inotifyWatcher) read() {
	var buf [16 << 10]byte // many records; each is at most SizeofInotifyEvent+NAME_MAX+1
	for {
		n, err := w.f.Read(buf[:])
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			if !w.send(nil, fmt.Errorf("read inotify: %w", err)) {
				return
			}
			continue
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			name := buf[off+unix.SizeofInotifyEvent : end]
			off = end
			w.mu.Lock()
			dir := w.dirs[ev.Wd]
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.dirs, ev.Wd)
			}
			w.mu.Unlock()
			path := dir
			if i := indexNUL(name); i > 0 {
				path = filepath.Join(dir, string(name[:i]))
			}
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				path = "" // events were dropped: let the loop read every file again
			}
			if !w.send(&path, nil) {
				return
			}
		}
	}
}

// send hands one path or error to the loop; false after Close.
func (w *inotifyWatcher) send(path *string, err error) bool {
	if path != nil {
		select {
		case w.events <- *path:
			return true
		case <-w.done:
			return false
		}
	}
	select {
	case w.errs <- err:
		return true
	case <-w.done:
		return false
	}
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
