// Package reload reloads a running program's configuration when its
// files change, when a signal asks, or on POST /reload, once the files have
// stopped changing. It knows nothing of what the configuration holds: a
// Target lists the files a configuration depends on, reads them, and puts
// what it read in force.
package reload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Hot reload. A reload reads the configuration's files again (Target.Load)
// and puts what it read in force (Staged.Commit); a reload that fails for
// any reason changes nothing, and says so in Status, the metrics and the
// log.
//
// Three things trigger one: a change to the configuration file or to a
// file it names (schema files, policy files and folders), SIGHUP, and
// POST /reload on the admin listener. Whatever the trigger, a reload reads
// the files only once their content has read the same for the settle time
// (reload.settle, 250ms by default): a file being written in pieces is
// never loaded half-written as long as no pause in the writing is that
// long (an atomic rename has no such pause), and a write that starts as
// the reload reads them is seen by reading their digests again after it
// (errChangedWhileRead). The settle time also
// debounces a burst (an editor's write-rename, a checkout, signals) into
// one reload; reloads never overlap.
//
// Files are watched on their folders (inotify on Linux, without its
// per-write events: see watchMask; fsnotify elsewhere), and decided by
// digests of their content, by path: an in-place write (once its writer
// closes the file), an editor's write-then-rename and a Kubernetes
// ConfigMap's symlink swap all count, and nothing else in their folders
// does. The files are also read every
// DefaultPoll, for file systems that do not notify; the settle check reads
// them itself, so it holds there too.

const (
	// DefaultPoll is how often the watched files are read for changes even
	// without a notification.
	DefaultPoll = 2 * time.Second
	// settleRounds bounds how many settle times POST /reload waits for the
	// files to stop changing before it gives up.
	settleRounds = 20
)

// ErrStopping is the outcome of a reload abandoned because the Watcher is
// stopping.
var ErrStopping = errors.New("the sidecar is stopping")

// errStillChanging is the outcome of a POST /reload whose files did not
// stop changing; nothing was reloaded.
var errStillChanging = errors.New("the configuration's files are still changing")

// errChangedWhileRead is the outcome of a reload during which one of the
// files changed: what was read may be half of a write (an in-place write
// truncates first), so it is put aside, neither put in force nor counted
// as a failure, and the files are read again once they settle.
var errChangedWhileRead = fmt.Errorf("%w: one changed while it was read; nothing was reloaded", errStillChanging)

// Target is the configuration a Watcher reloads.
type Target interface {
	// Files lists the files the configuration file at path depends on,
	// itself included, as data (its content) names them. A file that does
	// not decode still names what it can.
	Files(path string, data []byte) []string
	// Load reads the configuration's files again, ready to be put in
	// force; nothing changes yet.
	Load() (Staged, error)
}

// Staged is a configuration read by Target.Load, not yet in force.
type Staged interface {
	// Commit puts it in force, or changes nothing and says why. It returns
	// the versions then in force and the sections that changed but take
	// effect only on restart.
	Commit() (v Versions, restart []string, err error)
	// Discard releases it unused.
	Discard()
}

// Versions are the versions of a configuration in force.
type Versions struct {
	// Config is the configuration's version.
	Config string
	// Policy is its policies' version.
	Policy string
}

// Options configure a Watcher.
type Options struct {
	// Path is the configuration file. Required.
	Path string
	// Target reads and puts in force the configuration. Required.
	Target Target
	// InForce are the versions in force at start.
	InForce Versions
	// Own are files the program writes itself (and, for a file, its
	// backups path.1, ...), whose changes never ask for a reload. Default:
	// none.
	Own []string
	// Settle is how long the files must read the same before a reload
	// reads them. Required (the configuration's reload.settle).
	Settle time.Duration
	// Poll is how often the files are read even without a notification.
	// Default DefaultPoll.
	Poll time.Duration
	// Log receives what the Watcher does. Required.
	Log *slog.Logger
}

// Watcher reloads a configuration when its files change, when a signal
// asks, or on POST /reload (its ServeHTTP). It is a prometheus.Collector of
// the toolgate_config_* series.
type Watcher struct {
	target Target
	path   string // the configuration file
	log    *slog.Logger
	settle time.Duration // how long files must read the same before a reload
	poll   time.Duration // file check interval

	mu    sync.Mutex // held for a whole reload: one at a time
	state atomic.Pointer[Status]

	wmu     sync.Mutex
	inForce []string          // the files the configuration in force depends on
	seen    map[string]string // each watched path: digest of its content when last read

	// own are the files toolgate itself writes (the events file, its
	// backups, the spool), whose changes never ask for a reload: with
	// the events file beside the configuration, each event written would
	// otherwise re-read every file the configuration depends on.
	own []string

	ctx    context.Context // ends at Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	reloadsDesc, successDesc, infoDesc *prometheus.Desc
}

// Status is the "reload" object of /status. Values are replaced
// whole, never changed in place.
type Status struct {
	// OK is false when the last reload failed; the configuration in force
	// is then older than the file. True before any reload.
	OK bool `json:"ok"`
	// Error is why the last reload failed; "" when it did not.
	Error string `json:"error"`
	// LastAttempt is when the last reload finished; null before any.
	LastAttempt *time.Time `json:"last_attempt"`
	// LastSuccess is when the last successful reload finished; null before any.
	LastSuccess *time.Time `json:"last_success"`
	// ConfigVersion is the version of the configuration in force.
	ConfigVersion string `json:"config_version"`
	// PolicyVersion is the version of the policies in force.
	PolicyVersion string `json:"policy_version"`
	// Reloads counts reloads by outcome since start.
	Reloads Counts `json:"reloads"`
}

// Counts counts reloads by outcome.
type Counts struct {
	OK     uint64 `json:"ok"`
	Failed uint64 `json:"failed"`
}

// Answer is the answer to POST /reload.
type Answer struct {
	// OK is true when the file's configuration is now in force.
	OK bool `json:"ok"`
	// Error is why the reload failed; the configuration in force is unchanged.
	Error string `json:"error,omitempty"`
	// ConfigVersion and PolicyVersion are the versions in force after the attempt.
	ConfigVersion string `json:"config_version"`
	PolicyVersion string `json:"policy_version"`
	// RestartNeeded names the sections that changed but take effect only on
	// restart (admin, events).
	RestartNeeded []string `json:"restart_needed,omitempty"`
}

// New returns a Watcher of the configuration o describes. It reloads
// only on POST /reload until Start is called.
func New(o Options) *Watcher {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	own := make([]string, len(o.Own))
	for i, p := range o.Own {
		own[i] = filepath.Clean(p)
	}
	r := &Watcher{
		target: o.Target, path: o.Path, log: o.Log,
		settle: o.Settle, poll: o.Poll, own: own,
		reloadsDesc: prometheus.NewDesc("toolgate_config_reloads_total",
			"Configuration reloads by result (ok, error).", []string{"result"}, nil),
		successDesc: prometheus.NewDesc("toolgate_config_last_reload_successful",
			"1 when the last configuration reload succeeded (or none was tried), 0 when it failed.", nil, nil),
		infoDesc: prometheus.NewDesc("toolgate_config_info",
			"The configuration and policy versions in force; always 1.", []string{"config_version", "policy_version"}, nil),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.state.Store(&Status{OK: true, ConfigVersion: o.InForce.Config, PolicyVersion: o.InForce.Policy})
	return r
}

// Start watches the configuration's files and signals (each value
// received asks for a reload) until Stop.
func (r *Watcher) Start(signals <-chan os.Signal) {
	files, cfgDigest := r.dependencies()
	r.wmu.Lock()
	r.inForce = files
	r.seen = digests(files, r.path, cfgDigest)
	r.wmu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loop(signals)
	}()
}

// Stop ends the watching and the signal handling, and waits for a reload
// the watcher started to end; its outcome is dropped.
func (r *Watcher) Stop() {
	r.cancel()
	r.wg.Wait()
}

// loop turns file changes and signals into reloads, once the files have
// read the same for r.settle.
func (r *Watcher) loop(signals <-chan os.Signal) {
	tick := time.NewTicker(r.poll)
	defer tick.Stop()
	// The folder watcher tells at once that something in a watched folder changed;
	// the content hashes decide whether it matters. The slow poll is the
	// safety net for file systems that do not notify (NFS, some volumes).
	var events <-chan string
	var werrs <-chan error
	w, err := newFolderWatcher()
	if err != nil {
		r.log.Warn("file notifications unavailable; polling only", "err", err, "every", r.poll)
	} else {
		defer w.Close()
		events, werrs = w.Events(), w.Errors()
	}
	watched := map[string]bool{}
	sync := func() {
		if w == nil {
			return
		}
		for _, d := range r.watchDirs() {
			if !watched[d] {
				if err := w.Add(d); err == nil {
					watched[d] = true
				}
			}
		}
	}
	sync()
	settle := time.NewTimer(r.settle)
	settle.Stop()
	defer settle.Stop()
	trigger := ""                // what asked for the pending reload; "" when none is pending
	var before map[string]string // the files' digests when the settle time started
	ask := func(what string) {
		if trigger == "" {
			trigger = what
		} else if !strings.Contains(trigger, what) {
			trigger += "+" + what
		}
		before = r.snapshot()
		settle.Reset(r.settle)
	}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-signals:
			ask("signal")
		case name := <-events:
			if r.IsOwn(name) {
				continue
			}
			if r.changed() {
				ask("file")
			}
		case err := <-werrs:
			r.log.Warn("file notification error", "err", err)
		case <-tick.C:
			sync()
			if r.changed() {
				ask("file")
			}
		case <-settle.C:
			// Read again rather than trust notifications: a file system
			// that does not notify, or a write between two events, shows
			// here, and the settle time starts over.
			if now := r.snapshot(); !maps.Equal(now, before) {
				before = now
				settle.Reset(r.settle)
				continue
			}
			what := trigger
			trigger = ""
			if _, err := r.reload(r.ctx, what); errors.Is(err, errChangedWhileRead) {
				ask(what) // read them again once they settle
			}
			sync()
		}
	}
}

// IsOwn reports whether name is one of Options.Own or a backup of one
// (path.1, ...): a file the program writes itself.
func (r *Watcher) IsOwn(name string) bool {
	name = filepath.Clean(name)
	for _, p := range r.own {
		if name == p || strings.HasPrefix(name, p+".") {
			return true
		}
	}
	return false
}

// watchDirs are the folders to watch: each watched file's folder (editors
// and Kubernetes replace files by rename or symlink swap), and every folder
// inside a watched policy folder.
func (r *Watcher) watchDirs() []string {
	r.wmu.Lock()
	paths := make([]string, 0, len(r.seen))
	for p := range r.seen {
		paths = append(paths, p)
	}
	r.wmu.Unlock()
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[filepath.Dir(p)] = true
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			filepath.WalkDir(p, func(d string, e fs.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					dirs[d] = true
				}
				return nil
			})
		}
	}
	return slices.Sorted(maps.Keys(dirs))
}

// snapshot reads the digests of the files the configuration file names
// now, and of those the configuration in force depends on.
func (r *Watcher) snapshot() map[string]string {
	files, cfgDigest := r.dependencies()
	r.wmu.Lock()
	inForce := r.inForce
	r.wmu.Unlock()
	return digests(union(files, inForce), r.path, cfgDigest)
}

// settled waits until the files have read the same for r.settle, for at
// most settleRounds settle times.
func (r *Watcher) settled(ctx context.Context) error {
	before := r.snapshot()
	t := time.NewTimer(r.settle)
	defer t.Stop()
	for range settleRounds {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.ctx.Done():
			return ErrStopping
		case <-t.C:
		}
		now := r.snapshot()
		if maps.Equal(now, before) {
			return nil
		}
		before = now
		t.Reset(r.settle)
	}
	return fmt.Errorf("%w after %s; nothing was reloaded", errStillChanging, settleRounds*r.settle)
}

// changed reads the watched files and reports whether any differs from
// when it was last read.
func (r *Watcher) changed() bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	changed := false
	for p, d := range r.seen {
		if now := digestPath(p); now != d {
			r.seen[p] = now
			changed = true
		}
	}
	return changed
}

// reload reads the configuration file and puts it in force, or leaves the
// configuration in force as it is and reports why. trigger names what asked
// for it in the log.
func (r *Watcher) reload(ctx context.Context, trigger string) (Answer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		return r.answer(nil), ErrStopping
	}
	// The files settled before this reload, but a write may start between
	// then and the read: their digests are read around it (before by
	// rewatch), and what was read is put aside when they differ.
	files, read := r.rewatch()
	staged, err := r.target.Load()
	if ctx.Err() != nil {
		if err == nil {
			staged.Discard()
		}
		return r.answer(nil), ErrStopping
	}
	if !maps.Equal(read, r.snapshot()) {
		if err == nil {
			staged.Discard()
		}
		r.log.Info("a configuration file changed while it was read; reading again once the files settle", "trigger", trigger)
		return r.answer(nil), errChangedWhileRead
	}
	var v Versions
	var restart []string
	if err == nil {
		v, restart, err = staged.Commit()
	}
	now := time.Now()
	st := *r.state.Load()
	st.LastAttempt = &now
	if err != nil {
		st.OK, st.Error = false, err.Error()
		st.Reloads.Failed++
		// Logged first: whoever sees the outcome in /status finds it in the log.
		r.log.Error("reload failed; the configuration in force is unchanged", "trigger", trigger, "err", err,
			"config_version", st.ConfigVersion, "policy_version", st.PolicyVersion)
		r.state.Store(&st)
		return r.answer(nil), err
	}

	r.wmu.Lock()
	r.inForce = files
	for p := range r.seen {
		if !slices.Contains(files, p) {
			delete(r.seen, p)
		}
	}
	r.wmu.Unlock()

	st.OK, st.Error, st.LastSuccess = true, "", &now
	st.ConfigVersion, st.PolicyVersion = v.Config, v.Policy
	st.Reloads.OK++
	if len(restart) > 0 {
		r.log.Warn("configuration sections changed that take effect only on restart; the rest is in force",
			"sections", restart)
	}
	r.log.Info("configuration reloaded", "trigger", trigger,
		"config_version", st.ConfigVersion, "policy_version", st.PolicyVersion)
	r.state.Store(&st)
	return r.answer(restart), nil
}

// rewatch derives the files to watch from the configuration file as it is
// now, before the reload reads them, so a change made while it runs is
// seen afterwards. Until a reload succeeds, the files of the configuration
// in force stay watched too: fixing either the file or what it names
// reloads. It returns the files the file names now, and the digests it
// read (snapshot's).
func (r *Watcher) rewatch() ([]string, map[string]string) {
	files, cfgDigest := r.dependencies()
	r.wmu.Lock()
	defer r.wmu.Unlock()
	read := digests(union(files, r.inForce), r.path, cfgDigest)
	r.seen = maps.Clone(read) // changed updates seen in place
	return files, read
}

func (r *Watcher) answer(restart []string) Answer {
	st := r.state.Load()
	return Answer{OK: st.OK, Error: st.Error, ConfigVersion: st.ConfigVersion,
		PolicyVersion: st.PolicyVersion, RestartNeeded: restart}
}

// Status is the state of reloads, for a status page.
func (r *Watcher) Status() Status { return *r.state.Load() }

// Exclusive runs f while no reload runs, for a change put in force beside
// the reloads (a policy bundle activated); when f succeeds, the policy
// version it returns is in force.
func (r *Watcher) Exclusive(f func() (policyVersion string, err error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pv, err := f()
	if err != nil {
		return err
	}
	st := *r.state.Load()
	st.PolicyVersion = pv
	r.state.Store(&st)
	return nil
}

// ServeHTTP answers POST /reload once the reload it runs has ended: 200
// with the versions in force, 422 with the error (the configuration in
// force is unchanged), 409 when the files did not stop changing (nothing
// was reloaded), or 503 when the Watcher is stopping. Like every reload,
// it first waits for the files to read the same for the settle time, and
// waits again when one changed while the reload read them.
func (r *Watcher) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var a Answer
	var err error
	for range settleRounds {
		if err = r.settled(req.Context()); err != nil {
			a = r.answer(nil)
			a.OK, a.Error = false, err.Error()
			break
		}
		if a, err = r.reload(r.ctx, "admin"); !errors.Is(err, errChangedWhileRead) {
			break
		}
		a.OK, a.Error = false, err.Error()
	}
	code := http.StatusOK
	switch {
	case errors.Is(err, errStillChanging):
		code = http.StatusConflict
	case errors.Is(err, ErrStopping):
		code, a.OK, a.Error = http.StatusServiceUnavailable, false, err.Error()
	case err != nil:
		code = http.StatusUnprocessableEntity
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(a)
}

// Describe implements prometheus.Collector.
func (r *Watcher) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.reloadsDesc
	ch <- r.successDesc
	ch <- r.infoDesc
}

// Collect implements prometheus.Collector.
func (r *Watcher) Collect(ch chan<- prometheus.Metric) {
	st := r.state.Load()
	ok := 0.0
	if st.OK {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(r.reloadsDesc, prometheus.CounterValue, float64(st.Reloads.OK), "ok")
	ch <- prometheus.MustNewConstMetric(r.reloadsDesc, prometheus.CounterValue, float64(st.Reloads.Failed), "error")
	ch <- prometheus.MustNewConstMetric(r.successDesc, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(r.infoDesc, prometheus.GaugeValue, 1, st.ConfigVersion, st.PolicyVersion)
}

var _ prometheus.Collector = (*Watcher)(nil)

// dependencies reads the configuration file and returns the files it
// depends on, itself included, as Target.Files lists them, and the digest
// of the bytes it read.
func (r *Watcher) dependencies() (files []string, digest string) {
	data, err := os.ReadFile(r.path)
	if err != nil {
		return []string{r.path}, digestErr(err)
	}
	return union(r.target.Files(r.path, data), nil), digestBytes(data)
}

// digests reads every file and returns its digest by path; cfg, already
// read, has cfgDigest.
func digests(files []string, cfg, cfgDigest string) map[string]string {
	m := make(map[string]string, len(files))
	for _, p := range files {
		if p == cfg {
			m[p] = cfgDigest
		} else {
			m[p] = digestPath(p)
		}
	}
	return m
}

// digestPath is a digest of a file's content or, for a folder, of the
// names and contents of the .rego files below it, as rego.Load
// reads them.
func digestPath(p string) string {
	info, err := os.Stat(p)
	if err != nil {
		return digestErr(err)
	}
	h := sha256.New()
	if !info.IsDir() {
		if err := hashFile(h, p); err != nil {
			return digestErr(err)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	err = filepath.WalkDir(p, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(f, ".rego") {
			return err
		}
		io.WriteString(h, f+"\x00")
		return hashFile(h, f)
	})
	if err != nil {
		return digestErr(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hashFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func digestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// digestErr stands for a file that could not be read; it changes when the
// file appears.
func digestErr(err error) string { return "error: " + err.Error() }

// union returns the paths of a and b, sorted, each once.
func union(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	var out []string
	for _, p := range append(append([]string(nil), a...), b...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
