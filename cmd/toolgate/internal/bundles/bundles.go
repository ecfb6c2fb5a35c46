// Package bundles polls a running sidecar's policy bundles
// (policies.bundles) and hands each new one to an Activator, which puts it
// in force; it keeps each bundle's status and the toolgate_bundle_*
// metrics. It knows nothing of how a bundle is put in force.
package bundles

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/opabundle"
)

// Policy bundles. Each bundle in policies.bundles is polled by its own
// opabundle.Source (OPA's downloader: If-None-Match with the last ETag,
// a wait drawn between min_delay and max_delay, exponential backoff after
// a failure). A new bundle is activated as a reload is: its policies are
// compiled beside the file's (unchanged ones taken over), every policy's
// unit tests run, and the new snapshot is swapped in; calls under way
// finish on the snapshot they started with. Activations and reloads hold
// the reloader's lock, so they never overlap. Whatever fails (the server,
// the tarball, the signature, a compile error, a failing test) leaves the
// policies in force as they were: the last good bundle keeps deciding.
//
// Nothing of this is on the data path: polling and activation run on
// their own goroutines, and a call reads its snapshot with one atomic load
// as it always does.

// Activator puts a bundle in force beside the configuration in force.
type Activator interface {
	// Activate puts b in force, or changes nothing and says why.
	Activate(b *policies.Bundle) (Activation, error)
}

// Activation is a bundle put in force.
type Activation struct {
	// Revision is the bundle's revision now in force.
	Revision string
	// Took is how long the activation took: compiling the bundle's
	// policies, running every policy's tests, swapping; a wait for a lock
	// left out.
	Took time.Duration
	// PolicyVersion is the version of the policies then in force.
	PolicyVersion string
}

// Poller polls the configured bundles and activates what they serve. It
// is a prometheus.Collector of the toolgate_bundle_* series.
type Poller struct {
	activator Activator
	log       *slog.Logger
	sources   []*opabundle.Source
	states    map[string]*atomic.Pointer[Status] // by bundle name; values replaced whole
	names     []string                           // in configuration order
	configs   map[string]policies.BundleConfig   // by bundle name
	// history is each bundle's revisions put in force, to refuse a
	// rollback; only the bundle's own poller goroutine touches it.
	history map[string]*policies.RevisionHistory
	stopped atomic.Bool

	once sync.Once

	infoDesc, downloadsDesc, activationsDesc, activatedDesc, durationDesc, okDesc, refusalsDesc *prometheus.Desc
}

// Why a bundle was refused (Status.LastErrorReason, the reason
// label of toolgate_bundle_refusals_total).
const (
	bundleTooLarge        = "bundle_too_large" // over max_bytes, max_expanded_bytes or max_files
	bundleDownloadTimeout = "download_timeout" // the download took over download_timeout
	bundleRollback        = "rollback"         // older than the revision in force
	bundleDownloadFailed  = "download"         // the server, the network, a corrupt tarball, the signature
	bundleActivation      = "activation"       // compile errors, failing tests
)

// Status is one bundle in /status. Values are replaced whole, never
// changed in place.
type Status struct {
	// Name and URL are the bundle's, from policies.bundles.
	Name string `json:"name"`
	URL  string `json:"url"`
	// Revision is the revision in force (the manifest's, or sha256:HASH of
	// the bundle's files when it has none); "" before one was activated.
	Revision string `json:"revision"`
	// ETag is the server's ETag of the bundle in force.
	ETag string `json:"etag"`
	// ActivatedAt is when the revision in force was activated; null
	// before one was.
	ActivatedAt *time.Time `json:"activated_at"`
	// ActivationMS is how long that activation took: compiling the
	// bundle's policies, running every policy's tests, swapping.
	ActivationMS float64 `json:"activation_ms"`
	// OK is false when the last poll or activation failed: the revision
	// in force is then older than what the server offers, or the server
	// could not be reached.
	OK bool `json:"ok"`
	// LastPoll is when the last poll ended, whatever its outcome.
	LastPoll *time.Time `json:"last_poll"`
	// LastError is why the last failed poll or activation failed; ""
	// when none has. LastErrorAt is when.
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
	// LastErrorReason is LastError's kind: bundle_too_large (over
	// max_bytes, max_expanded_bytes or max_files), download_timeout (over
	// download_timeout), rollback (older than the revision in force),
	// download (the server, the network, a corrupt tarball, a bad
	// signature) or activation (compile errors, failing tests); "" when
	// none has failed.
	LastErrorReason string `json:"last_error_reason"`
	// Refused counts bundles refused for a bound or as a rollback; each
	// refusal is also logged and counted in toolgate_bundle_refusals_total.
	Refused Refusals `json:"refused"`
	// Downloads counts polls by outcome: a new bundle, 304 Not Modified,
	// failed (server, network, corrupt tarball, bad signature).
	Downloads Downloads `json:"downloads"`
	// Activations counts activations of downloaded bundles by outcome.
	Activations reload.Counts `json:"activations"`
}

// Downloads counts a bundle's polls by outcome.
type Downloads struct {
	OK          uint64 `json:"ok"`
	NotModified uint64 `json:"not_modified"`
	Failed      uint64 `json:"failed"`
}

// Refusals counts a bundle's refusals by reason.
type Refusals struct {
	TooLarge        uint64 `json:"bundle_too_large"`
	DownloadTimeout uint64 `json:"download_timeout"`
	Rollback        uint64 `json:"rollback"`
}

// New returns the Poller of the bundles the policies in force were
// configured with, which hands each new one to a; it polls nothing until
// Start.
func New(bundles []policies.BundleConfig, a Activator, log *slog.Logger) (*Poller, error) {
	b := &Poller{activator: a, log: log, states: map[string]*atomic.Pointer[Status]{},
		configs: map[string]policies.BundleConfig{}, history: map[string]*policies.RevisionHistory{},
		refusalsDesc: prometheus.NewDesc("toolgate_bundle_refusals_total",
			"Bundles refused by reason: bundle_too_large, download_timeout, rollback.", []string{"bundle", "reason"}, nil),
		infoDesc: prometheus.NewDesc("toolgate_bundle_info",
			"The revision of each policy bundle in force; always 1.", []string{"bundle", "revision"}, nil),
		downloadsDesc: prometheus.NewDesc("toolgate_bundle_downloads_total",
			"Bundle polls by result: ok (a new bundle), not_modified (304), error.", []string{"bundle", "result"}, nil),
		activationsDesc: prometheus.NewDesc("toolgate_bundle_activations_total",
			"Bundle activations by result (ok, error).", []string{"bundle", "result"}, nil),
		activatedDesc: prometheus.NewDesc("toolgate_bundle_last_activation_timestamp_seconds",
			"When the revision in force was activated (Unix time); 0 before any was.", []string{"bundle"}, nil),
		durationDesc: prometheus.NewDesc("toolgate_bundle_last_activation_duration_seconds",
			"How long the last successful activation took (compile, tests, swap).", []string{"bundle"}, nil),
		okDesc: prometheus.NewDesc("toolgate_bundle_last_poll_successful",
			"1 when the bundle's last poll and activation succeeded, 0 when either failed.", []string{"bundle"}, nil),
	}
	for _, c := range bundles {
		st := &atomic.Pointer[Status]{}
		st.Store(&Status{Name: c.Name, URL: c.URL, OK: true})
		b.states[c.Name] = st
		b.names = append(b.names, c.Name)
		b.configs[c.Name] = c
		b.history[c.Name] = &policies.RevisionHistory{}
		if strings.HasPrefix(c.URL, "http://") && c.Signing == nil {
			b.log.Warn("bundle is fetched over plain HTTP without signing: whoever can answer its URL decides the policies; set signing or use https",
				"bundle", c.Name, "url", c.URL)
		}
		name := c.Name
		src, err := opabundle.New(c, func(ctx context.Context, u opabundle.Update) error {
			return b.update(name, u)
		})
		if err != nil {
			return nil, err
		}
		b.sources = append(b.sources, src)
	}
	return b, nil
}

// Start starts polling every bundle.
func (b *Poller) Start() {
	for _, s := range b.sources {
		s.Start(context.Background())
	}
}

// Stop stops polling and waits for polls and activations under way.
func (b *Poller) Stop() {
	b.once.Do(func() {
		b.stopped.Store(true)
		for _, s := range b.sources {
			s.Stop(context.Background())
		}
	})
}

// Ready reports whether every bundle has been activated once: until then
// the sidecar is not ready (/readyz), as OPA is not.
func (b *Poller) Ready() bool {
	for _, st := range b.states {
		if st.Load().ActivatedAt == nil {
			return false
		}
	}
	return true
}

// Status lists the bundles' states in configuration order.
func (b *Poller) Status() []Status {
	out := make([]Status, 0, len(b.names))
	for _, n := range b.names {
		out = append(out, *b.states[n].Load())
	}
	return out
}

// update handles one poll's outcome: it activates a new bundle and
// records the outcome. It returns the activation's error, if any.
func (b *Poller) update(name string, u opabundle.Update) error {
	if b.stopped.Load() {
		return nil // the sidecar is stopping: a poll cut short is no failure
	}
	now := time.Now()
	ptr := b.states[name]
	st := *ptr.Load()
	st.LastPoll = &now
	fail := func(reason string, err error) {
		st.OK, st.LastError, st.LastErrorAt, st.LastErrorReason = false, err.Error(), &now, reason
	}
	switch {
	case u.Err != nil:
		st.Downloads.Failed++
		reason := bundleDownloadFailed
		switch {
		case errors.Is(u.Err, opabundle.ErrTooLarge):
			reason = bundleTooLarge
			st.Refused.TooLarge++
		case errors.Is(u.Err, opabundle.ErrDownloadTimeout):
			reason = bundleDownloadTimeout
			st.Refused.DownloadTimeout++
		}
		fail(reason, u.Err)
		b.log.Warn("bundle download failed; the revision in force is kept", "bundle", name, "reason", reason, "err", u.Err, "revision", st.Revision)
		ptr.Store(&st)
		return nil
	case u.NotModified:
		st.Downloads.NotModified++
		st.OK = true // a failed poll or activation clears the ETag: a 304 follows a success
		ptr.Store(&st)
		return nil
	}
	st.Downloads.OK++
	c, hist := b.configs[name], b.history[name]
	if err := hist.Check(c.RevisionOrder, u.Bundle.EffectiveRevision()); err != nil {
		if !c.AllowRollback {
			st.Refused.Rollback++
			fail(bundleRollback, err)
			b.log.Error("bundle refused as a rollback; the revision in force is kept (allow_rollback lets it in)",
				"bundle", name, "err", err, "revision", st.Revision)
			ptr.Store(&st)
			return err
		}
		b.log.Warn("bundle rolls back to an older revision (allow_rollback)", "bundle", name, "err", err, "revision", st.Revision)
	}
	act, err := b.activator.Activate(u.Bundle)
	rev, took := act.Revision, act.Took
	if err != nil {
		st.Activations.Failed++
		fail(bundleActivation, err)
		b.log.Error("bundle activation failed; the revision in force is kept", "bundle", name, "err", err, "revision", st.Revision)
		ptr.Store(&st)
		return err
	}
	done := time.Now()
	st.Activations.OK++
	st.OK, st.Revision, st.ETag, st.ActivatedAt = true, rev, u.ETag, &done
	st.ActivationMS = float64(took.Microseconds()) / 1000
	hist.Activated(rev)
	b.log.Info("bundle activated", "bundle", name, "revision", rev, "took", took,
		"policy_version", act.PolicyVersion)
	ptr.Store(&st)
	return nil
}

// Stopping reports whether Stop was called: an Activator checks it once
// it holds its lock, and refuses with reload.ErrStopping.
func (b *Poller) Stopping() bool { return b.stopped.Load() }

// Describe implements prometheus.Collector.
func (b *Poller) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{b.infoDesc, b.downloadsDesc, b.activationsDesc, b.activatedDesc, b.durationDesc, b.okDesc, b.refusalsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (b *Poller) Collect(ch chan<- prometheus.Metric) {
	for _, st := range b.Status() {
		n := st.Name
		if st.Revision != "" {
			ch <- prometheus.MustNewConstMetric(b.infoDesc, prometheus.GaugeValue, 1, n, st.Revision)
		}
		ch <- prometheus.MustNewConstMetric(b.downloadsDesc, prometheus.CounterValue, float64(st.Downloads.OK), n, "ok")
		ch <- prometheus.MustNewConstMetric(b.downloadsDesc, prometheus.CounterValue, float64(st.Downloads.NotModified), n, "not_modified")
		ch <- prometheus.MustNewConstMetric(b.downloadsDesc, prometheus.CounterValue, float64(st.Downloads.Failed), n, "error")
		ch <- prometheus.MustNewConstMetric(b.activationsDesc, prometheus.CounterValue, float64(st.Activations.OK), n, "ok")
		ch <- prometheus.MustNewConstMetric(b.activationsDesc, prometheus.CounterValue, float64(st.Activations.Failed), n, "error")
		at := 0.0
		if st.ActivatedAt != nil {
			at = float64(st.ActivatedAt.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(b.activatedDesc, prometheus.GaugeValue, at, n)
		ch <- prometheus.MustNewConstMetric(b.durationDesc, prometheus.GaugeValue, st.ActivationMS/1000, n)
		ch <- prometheus.MustNewConstMetric(b.refusalsDesc, prometheus.CounterValue, float64(st.Refused.TooLarge), n, bundleTooLarge)
		ch <- prometheus.MustNewConstMetric(b.refusalsDesc, prometheus.CounterValue, float64(st.Refused.DownloadTimeout), n, bundleDownloadTimeout)
		ch <- prometheus.MustNewConstMetric(b.refusalsDesc, prometheus.CounterValue, float64(st.Refused.Rollback), n, bundleRollback)
		ok := 0.0
		if st.OK {
			ok = 1
		}
		ch <- prometheus.MustNewConstMetric(b.okDesc, prometheus.GaugeValue, ok, n)
	}
}

var _ prometheus.Collector = (*Poller)(nil)
