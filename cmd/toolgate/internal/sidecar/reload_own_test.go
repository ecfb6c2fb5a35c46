package sidecar

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
)

// TestReloaderIgnoresOwnFiles checks that the files toolgate writes itself
// (the events file, its backups, the spool) are not taken for changes of
// the configuration's files: with the events file beside the configuration
// (the default), every event written notified the watcher, which then read
// and hashed every file the configuration depends on.
func TestReloaderIgnoresOwnFiles(t *testing.T) {
	dir := t.TempDir()
	lc, err := config.Parse(filepath.Join(dir, "toolgate.yaml"), []byte("listen:\n  forward: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc := &Sidecar{log: slog.New(slog.DiscardHandler)}
	r := newReloader(sc, lc, Options{})
	for _, c := range []struct {
		name string
		own  bool
	}{
		{lc.Events.File.Path, true},
		{lc.Events.File.Path + ".1", true},
		{lc.Events.Spool.Dir, true},
		{filepath.Join(dir, "toolgate.yaml"), false},
		{filepath.Join(dir, "schemas"), false},
		{filepath.Join(dir, "..data"), false},
	} {
		if got := r.IsOwn(c.name); got != c.own {
			t.Errorf("isOwn(%s) = %v, want %v", c.name, got, c.own)
		}
	}
}
