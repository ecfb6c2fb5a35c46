package policytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/policies/opabundle"
	"github.com/toolgate/toolgate/policies/rego"
)

// IsBundle reports whether path names an OPA bundle tarball (.tar.gz).
func IsBundle(path string) bool { return strings.HasSuffix(path, ".tar.gz") }

// RunBundle runs the unit tests of every Rego policy in the bundle at
// path (as opa build writes it), chosen and compiled as a sidecar
// activating the bundle would (its data.toolgate settings, or one policy
// per package), printing one PASS or FAIL line per test, then "N passed,
// M failed". The signature is not checked. A policy that does not compile
// is one failure. The error is about the run itself: a file that cannot
// be read or is not a bundle.
func RunBundle(ctx context.Context, out io.Writer, path string) (Report, error) {
	pt := &policyTest{out: out}
	l, err := LoadBundle(path)
	var perr *os.PathError
	if errors.As(err, &perr) {
		return Report{}, err
	}
	if err != nil {
		pt.fail("bundle (does not load)", err.Error())
		fmt.Fprintf(out, "%d passed, %d failed\n", pt.Passed, pt.Failed)
		return pt.Report, nil
	}
	defer l.Close(ctx, nil)
	ctx, cancel := context.WithTimeout(ctx, regoTestTimeout)
	defer cancel()
	rep, err := l.RunTests(ctx)
	if err != nil {
		return Report{}, err
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Results)) {
		pt.results(name, rep.Results[name])
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", pt.Passed, pt.Failed)
	return pt.Report, nil
}

// LoadBundle reads the bundle tarball at path and compiles its policies
// as a sidecar activating it would, without running their tests. The
// signature is not checked. The caller closes the result.
func LoadBundle(path string) (*policies.Loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := opabundle.Read("bundle", f, nil, opabundle.DefaultLimits)
	if err != nil {
		return nil, err
	}
	// The bundle as a sidecar would take it; the URL is never fetched.
	c := policies.Config{Bundles: []policies.BundleConfig{{Name: b.Name, URL: "http://bundle.invalid/", Pending: policies.PendingAllow}}}
	return c.Load("", policies.LoadOptions{Rego: rego.Host{}, Bundles: []*policies.Bundle{b}})
}
