//go:build !linux

package reload

import "github.com/fsnotify/fsnotify"

// newFolderWatcher watches folders through fsnotify.
func newFolderWatcher() (folderWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	fw := &fsWatcher{w: w, events: make(chan string), done: make(chan struct{})}
	go fw.names()
	return fw, nil
}

// fsWatcher is a folderWatcher over fsnotify.
type fsWatcher struct {
	w      *fsnotify.Watcher
	events chan string
	done   chan struct{}
}

func (f *fsWatcher) names() {
	for ev := range f.w.Events {
		select {
		case f.events <- ev.Name:
		case <-f.done:
			return
		}
	}
}

func (f *fsWatcher) Add(dir string) error  { return f.w.Add(dir) }
func (f *fsWatcher) Events() <-chan string { return f.events }
func (f *fsWatcher) Errors() <-chan error  { return f.w.Errors }
func (f *fsWatcher) Close() error          { close(f.done); return f.w.Close() }
