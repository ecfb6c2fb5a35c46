// Package opabundle reads OPA bundles into toolgate's policies.Bundle and
// keeps them fresh: Source polls a bundle's URL with OPA's own downloader
// (ETag and If-None-Match, jittered polling between min_delay and
// max_delay, exponential backoff after a failure, size limits) and
// verifies its signature with OPA's bundle package. Nothing of OPA's
// appears in its exported signatures.
package opabundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"
	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"

	"github.com/toolgate/toolgate/policies"
)

// Update is the outcome of one poll of a bundle's URL.
type Update struct {
	// Bundle is the new bundle, verified and read; nil when the server
	// answered 304 Not Modified or the poll failed.
	Bundle *policies.Bundle
	// NotModified is true when the server answered 304: the bundle in
	// force is current.
	NotModified bool
	// Err is why the poll failed: the server could not be reached or
	// answered an error status, the tarball was corrupt or too large, or
	// its signature did not verify. nil when the poll succeeded.
	Err error
	// ETag is the server's ETag of the bundle; "" after a failure.
	ETag string
	// Size is the tarball's size in bytes, when one was downloaded.
	Size int
}

// Source polls one bundle. The function given to New receives every
// poll's outcome, one at a time, on the Source's own goroutine; when it
// returns an error (the bundle did not activate), the next poll downloads
// the bundle again instead of taking a 304 for an answer.
type Source struct {
	d       *download.Downloader
	stopped atomic.Bool
	last    atomic.Pointer[error] // the bound the poll under way crossed
}

// boundsPluginName is the name under which boundsPlugin is looked up.
const boundsPluginName = "toolgate-bounds"

// authPlugin is OPA's authentication plugin of the REST service svc (its
// credentials, or none).
func authPlugin(svc map[string]any) (rest.HTTPAuthPlugin, error) {
	raw, err := json.Marshal(svc)
	if err != nil {
		return nil, err
	}
	c, err := rest.New(raw, nil, rest.Logger(logging.NewNoOpLogger()))
	if err != nil {
		return nil, err
	}
	return c.Config().AuthPlugin(nil)
}

// New returns the Source of bundle c (validated by policies.Config.Load),
// which calls f with each poll's outcome once started.
func New(c policies.BundleConfig, f func(context.Context, Update) error) (*Source, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("bundle %q: %w", c.Name, err)
	}
	base := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	resource := strings.TrimPrefix(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		resource += "?" + u.RawQuery
	}
	timeout := int64(c.Timeout.Seconds())
	// Every download goes through boundsPlugin: the configured
	// credentials authenticate it, a total deadline bounds it, and its
	// body is counted and bounded as it is read (Bounded).
	auth := map[string]any{"name": c.Name, "url": base}
	if c.BearerTokenFile != "" {
		auth["credentials"] = map[string]any{"bearer": map[string]any{"token_path": c.BearerTokenFile}}
	}
	inner, err := authPlugin(auth)
	if err != nil {
		return nil, fmt.Errorf("bundle %q: %w", c.Name, err)
	}
	s := &Source{}
	bp := &boundsPlugin{inner: inner, limits: LimitsOf(c), timeout: c.DownloadTimeout, last: &s.last}
	if bp.timeout == 0 {
		bp.timeout = policies.DefaultBundleDownloadTimeout
	}
	svc := map[string]any{"name": c.Name, "url": base, "response_header_timeout_seconds": timeout,
		"credentials": map[string]any{"plugin": boundsPluginName}}
	raw, err := json.Marshal(svc)
	if err != nil {
		return nil, err
	}
	client, err := rest.New(raw, nil, rest.Logger(logging.NewNoOpLogger()),
		rest.AuthPluginLookup(func(string) rest.HTTPAuthPlugin { return bp }))
	if err != nil {
		return nil, fmt.Errorf("bundle %q: %w", c.Name, err)
	}
	minD, maxD := int64(c.MinDelay.Seconds()), int64(c.MaxDelay.Seconds())
	trigger := plugins.TriggerPeriodic
	dc := download.Config{Trigger: &trigger, Polling: download.PollingConfig{MinDelaySeconds: &minD, MaxDelaySeconds: &maxD}}
	if err := dc.ValidateAndInjectDefaults(); err != nil {
		return nil, fmt.Errorf("bundle %q: %w", c.Name, err)
	}
	s.d = download.New(dc, client, resource).
		WithBundleName(c.Name).
		WithSizeLimitBytes(c.MaxBytes).
		WithBundleParserOpts(ast.ParserOptions{RegoVersion: ast.RegoV1})
	if vc, err := verification(c.Signing); err != nil {
		return nil, fmt.Errorf("bundle %q: %w", c.Name, err)
	} else if vc != nil {
		s.d = s.d.WithBundleVerificationConfig(vc)
	}
	s.d = s.d.WithCallback(func(ctx context.Context, u download.Update) error {
		if s.stopped.Load() {
			return nil
		}
		up := Update{ETag: u.ETag, Size: u.Size, Err: u.Error}
		if p := s.last.Swap(nil); p != nil && u.Error != nil {
			// OPA's reader words the error its own way; the bound
			// crossed is what the status names.
			up.Err = *p
		}
		switch {
		case u.Error != nil:
		case u.Bundle == nil:
			up.NotModified = true
		default:
			b, err := convert(c.Name, u.Bundle)
			if err != nil {
				up.Err, up.ETag = err, ""
			} else {
				up.Bundle = b
			}
		}
		err := f(ctx, up)
		if err != nil || up.Err != nil {
			// Download it again next time: a bundle that failed to
			// activate may activate once the configuration is fixed.
			s.d.SetCache("")
		}
		if err == nil {
			err = up.Err
		}
		return err
	})
	return s, nil
}

// verification is OPA's verification configuration for s; nil when
// bundles are not verified.
func verification(s *policies.BundleSigning) (*opabundle.VerificationConfig, error) {
	if s == nil {
		return nil, nil
	}
	key := &opabundle.KeyConfig{Key: string(s.Key()), Algorithm: s.Algorithm, Scope: s.Scope}
	return opabundle.NewVerificationConfig(map[string]*opabundle.KeyConfig{s.KeyID: key}, s.KeyID, s.Scope, s.Exclude), nil
}

// Start starts polling: at once, then after each wait.
func (s *Source) Start(ctx context.Context) { s.d.Start(ctx) }

// Stop stops polling and waits for a poll under way to end; no outcome
// is delivered after it returns.
func (s *Source) Stop(ctx context.Context) {
	s.stopped.Store(true)
	s.d.Stop(ctx)
}

// ErrNoPolicies is the error of a bundle that holds no Rego file and no
// WASM module.
var ErrNoPolicies = errors.New("the bundle holds no .rego file and no WASM module")

// ErrDelta is the error of a delta bundle (a patch of the previous
// bundle's data): toolgate takes snapshot bundles only.
var ErrDelta = errors.New("a delta bundle; serve a snapshot bundle")

// Read reads a bundle tarball (as opa build writes it), verifying its
// signature when signing is not nil; name is the bundle's name in
// errors and in the result. l bounds the tarball as Bounded does (the
// zero Limits: no bound); a bundle over a bound is an error wrapping
// ErrTooLarge.
func Read(name string, r io.Reader, signing *policies.BundleSigning, l Limits) (*policies.Bundle, error) {
	br := Bounded(r, l)
	defer br.Close()
	cr := &firstErr{r: br}
	rd := opabundle.NewReader(cr).WithRegoVersion(ast.RegoV1).WithBundleName(name)
	if l.Entry > 0 {
		rd = rd.WithSizeLimitBytes(l.Entry)
	}
	vc, err := verification(signing)
	if err != nil {
		return nil, err
	}
	if vc != nil {
		rd = rd.WithBundleVerificationConfig(vc)
	} else {
		rd = rd.WithSkipBundleVerification(true)
	}
	b, err := rd.Read()
	if err != nil {
		if cr.err != nil && errors.Is(cr.err, ErrTooLarge) {
			err = cr.err
		}
		return nil, fmt.Errorf("bundle %q: %w", name, err)
	}
	return convert(name, &b)
}

// firstErr is a reader that keeps the first error its reader returned.
type firstErr struct {
	r   io.Reader
	err error
}

func (f *firstErr) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF && f.err == nil {
		f.err = err
	}
	return n, err
}

// convert makes toolgate's Bundle from OPA's.
func convert(name string, b *opabundle.Bundle) (*policies.Bundle, error) {
	if b.Type() == opabundle.DeltaBundleType {
		return nil, fmt.Errorf("bundle %q: %w", name, ErrDelta)
	}
	out := &policies.Bundle{Name: name, Revision: b.Manifest.Revision,
		Rego: map[string][]byte{}, Packages: map[string]string{}, Wasm: map[string][]byte{}}
	for _, m := range b.Modules {
		p := m.RelativePath
		if p == "" {
			p = m.Path
		}
		out.Rego[bundlePath(p)] = m.Raw
		if m.Parsed != nil {
			out.Packages[bundlePath(p)] = strings.TrimPrefix(m.Parsed.Package.Path.String(), "data.")
		}
	}
	for _, m := range b.WasmModules {
		out.Wasm[bundlePath(m.Path)] = m.Raw
	}
	if len(out.Rego) == 0 && len(out.Wasm) == 0 {
		return nil, fmt.Errorf("bundle %q: %w", name, ErrNoPolicies)
	}
	if v, ok := b.Data["toolgate"]; ok {
		st, err := policies.DecodeBundleSettings(v)
		if err != nil {
			return nil, fmt.Errorf("bundle %q: %w", name, err)
		}
		out.Settings = st
	}
	return out, nil
}

// bundlePath is a file's path in its bundle, rooted at "/": the reader
// gives a downloaded bundle's files as URLs below the bundle's.
func bundlePath(p string) string {
	if u, err := url.Parse(p); err == nil && u.Scheme != "" {
		p = u.Path
	}
	return "/" + strings.TrimLeft(p, "/")
}

// BuildOptions are how Build builds a bundle.
type BuildOptions struct {
	// Revision is the manifest's revision. Default "": none.
	Revision string
	// SigningKey, when set, signs the bundle (.signatures.json, key id
	// "default"): a file holding the PEM private key (or the HS* secret),
	// or the key itself.
	SigningKey string
	// SigningAlg is the signature's algorithm. Default "RS256".
	SigningAlg string
}

// Build writes to w the bundle of the folder dir as opa build --bundle
// dir does (OPA's compiler with the rego target): its .rego files and
// data files (data.json, data.yaml) by their paths below dir, with
// revision and signature as o says. toolgate's settings go in
// dir/toolgate/data.json.
func Build(ctx context.Context, dir string, o BuildOptions, w io.Writer) error {
	// Read through the folder's own file system, so paths in the bundle
	// start at dir ("/toolgate/bounds/bounds.rego"), not at the folder
	// as named on the command line.
	c := compile.New().WithTarget(compile.TargetRego).WithAsBundle(true).WithFS(os.DirFS(dir)).WithPaths(".").
		WithRevision(o.Revision).WithRegoVersion(ast.RegoV1).WithOutput(w)
	if o.SigningKey != "" {
		c = c.WithBundleSigningConfig(opabundle.NewSigningConfig(o.SigningKey, o.SigningAlg, ""))
	}
	if err := c.Build(ctx); err != nil {
		return fmt.Errorf("build bundle %s: %w", dir, err)
	}
	return nil
}
