package sidecar

import (
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
)

// Hot reload (package reload watches the files and decides when): a reload
// reads the configuration file again (config.LoadAfter: schemas compiled,
// policies compiled and their unit tests run) and puts the resulting
// snapshot in force with proxy.Server.Swap. Calls under way finish on the
// snapshot they started with; a reload that fails for any reason (YAML,
// schema, Rego, a failing policy test, a listener change Swap refuses)
// changes nothing.

// The reload section of /status and the answer to POST /reload.
type (
	ReloadStatus = reload.Status
	ReloadCounts = reload.Counts
	ReloadAnswer = reload.Answer
)

// testHookLoad, when set by a test, is called right before a reload reads
// the files ("before") and right after ("after").
var testHookLoad func(stage string)

// newReloader returns the reloader of a sidecar started with lc. It
// reloads only on POST /reload until Start is called. The files toolgate
// writes itself (the events file, its backups, the spool) never ask for a
// reload: with the events file beside the configuration, each event
// written would otherwise re-read every file the configuration depends on.
// o.ReloadPoll and o.ReloadSettle, when positive, override the poll and
// reload.settle.
func newReloader(sc *Sidecar, lc *config.Loaded, o Options) *reload.Watcher {
	settle := lc.Reload.Settle
	if o.ReloadSettle > 0 {
		settle = o.ReloadSettle
	}
	return reload.New(reload.Options{
		Path: lc.Path, Target: reloadTarget{sc, lc.Path},
		InForce: reload.Versions{Config: lc.Version, Policy: lc.Snapshot.PolicyVersion},
		Own:     []string{lc.Events.File.Path, lc.Events.Spool.Dir},
		Settle:  settle, Poll: o.ReloadPoll, Log: sc.log.With("component", "reload"),
	})
}

// reloadTarget is the sidecar's configuration, as package reload sees it.
type reloadTarget struct {
	sc   *Sidecar
	path string // the configuration file
}

// Files implements reload.Target with config.Files.
func (t reloadTarget) Files(path string, data []byte) []string { return config.Files(path, data) }

// Load implements reload.Target: the configuration file read again after
// the one in force.
func (t reloadTarget) Load() (reload.Staged, error) {
	prev := t.sc.cfg.Load()
	if testHookLoad != nil {
		testHookLoad("before")
	}
	lc, err := config.LoadAfter(t.path, prev)
	if testHookLoad != nil {
		testHookLoad("after")
	}
	if err != nil {
		return nil, err
	}
	return staged{t.sc, prev, lc}, nil
}

// staged is a configuration read to replace prev.
type staged struct {
	sc         *Sidecar
	prev, next *config.Loaded
}

// Commit implements reload.Staged: the proxy's snapshot swapped, unless the
// policy bundles changed or the proxy refuses it.
func (s staged) Commit() (reload.Versions, []string, error) {
	if !sameBundles(s.prev, s.next) {
		s.Discard()
		return reload.Versions{}, nil, errBundlesChanged
	}
	if err := s.sc.proxy.Swap(s.next.Snapshot); err != nil {
		s.Discard()
		return reload.Versions{}, nil, err
	}
	// The event path and the admin listener were built at start: a change
	// to them waits for a restart, and what is in force stays on record.
	lc, restart := s.next.KeepStartSections(s.prev)
	s.sc.cfg.Store(lc)
	s.prev.ClosePolicies(lc)
	return reload.Versions{Config: lc.Version, Policy: lc.Snapshot.PolicyVersion}, restart, nil
}

// Discard implements reload.Staged.
func (s staged) Discard() { s.next.ClosePolicies(s.prev) }

var (
	_ reload.Target = reloadTarget{}
	_ reload.Staged = staged{}
)
