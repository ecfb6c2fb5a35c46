package reload

// folderWatcher tells that something in a watched folder changed: the
// loop reads Events (the changed entry's path; a folder's own path when the
// kernel dropped events) and Errors, and decides by content digests
// whether it matters.
type folderWatcher interface {
	// Add watches a folder.
	Add(dir string) error
	// Events gives the path of each changed entry.
	Events() <-chan string
	// Errors gives the watcher's failures.
	Errors() <-chan error
	// Close stops watching.
	Close() error
}
