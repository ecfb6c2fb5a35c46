package sidecar

import (
	"errors"
	"reflect"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/bundles"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
	"github.com/toolgate/toolgate/policies"
)

// BundleStatus is one bundle in /status.
type BundleStatus = bundles.Status

// bundleActivator puts a polled bundle in force beside the configuration
// in force (package bundles polls).
type bundleActivator struct{ sc *Sidecar }

// Activate implements bundles.Activator: the configuration in force with
// bu, its policies compiled and tested, swapped in. It holds the
// reloader's lock, so a reload and an activation never overlap.
func (a bundleActivator) Activate(bu *policies.Bundle) (bundles.Activation, error) {
	sc := a.sc
	var act bundles.Activation
	err := sc.reload.Exclusive(func() (string, error) {
		if sc.bundles.Stopping() {
			return "", reload.ErrStopping
		}
		start := time.Now()
		prev := sc.cfg.Load()
		next, err := prev.WithBundle(bu)
		if err != nil {
			return "", err
		}
		if err := sc.proxy.Swap(next.Snapshot); err != nil {
			next.ClosePolicies(prev)
			return "", err
		}
		sc.cfg.Store(next)
		prev.ClosePolicies(next)
		act = bundles.Activation{Revision: next.LoadedPolicies.Revisions()[bu.Name], Took: time.Since(start),
			PolicyVersion: next.Snapshot.PolicyVersion}
		return act.PolicyVersion, nil
	})
	if err != nil {
		return bundles.Activation{}, err
	}
	return act, nil
}

var _ bundles.Activator = bundleActivator{}

// errBundlesChanged is the outcome of a reload whose policies.bundles
// differ from the bundles being polled: the sources are set up at start.
var errBundlesChanged = errors.New("policies.bundles changed (url, polling, signing, pending); bundle sources take effect only on restart, so nothing was reloaded")

// sameBundles reports whether next configures the bundles prev does.
func sameBundles(prev, next *config.Loaded) bool {
	return reflect.DeepEqual(prev.LoadedPolicies.Bundles(), next.LoadedPolicies.Bundles())
}
