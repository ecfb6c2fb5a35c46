package policies

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/internal/section"
)

// BundleConfig is one OPA bundle the sidecar takes policies from
// (policies.bundles): a tarball served over HTTP(S), polled with ETags,
// verified against a signing key when one is configured, and activated
// atomically; the policies in force stay as they are when a download,
// its verification or its compilation fails. docs/bundles.md describes
// the bundle's layout.
type BundleConfig struct {
	// Name identifies the bundle in /status, metrics, errors and the
	// policy version. Required and unique.
	Name string `yaml:"name"`
	// URL is where the bundle is served: an http or https URL of the
	// tarball. Required.
	URL string `yaml:"url"`
	// MinDelay and MaxDelay bound the wait between two polls: each wait
	// is drawn at random between them (jitter), so a fleet does not poll
	// in step. After a failed download the wait backs off exponentially
	// from 100ms up to MaxDelay. Whole seconds; defaults
	// DefaultBundleMinDelay (60s) and DefaultBundleMaxDelay (120s).
	MinDelay time.Duration `yaml:"min_delay"`
	MaxDelay time.Duration `yaml:"max_delay"`
	// Timeout bounds the wait for the server's response headers. Default
	// DefaultBundleTimeout (10s).
	Timeout time.Duration `yaml:"timeout"`
	// DownloadTimeout bounds a whole download, from the request to the
	// tarball's last byte, so a server that drips the body cannot hold a
	// poll open (the poll then fails with download_timeout and the
	// revision in force stays). Whole seconds, at least Timeout. Default
	// DefaultBundleDownloadTimeout (60s).
	DownloadTimeout time.Duration `yaml:"download_timeout"`
	// MaxBytes bounds the bundle: the tarball as served and each file in
	// it. Default DefaultBundleMaxBytes (32 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxExpandedBytes bounds the bytes the tarball expands to (all its
	// files together), counted while the stream is read: a gzip bomb stops
	// at the bound with bundle_too_large before its files are expanded in
	// memory or its signature is read. Default
	// DefaultBundleMaxExpandedBytes (64 MiB), and at least MaxBytes.
	MaxExpandedBytes int64 `yaml:"max_expanded_bytes"`
	// MaxFiles bounds the number of entries in the tarball (files,
	// folders, anything else). Default DefaultBundleMaxFiles (10,000).
	MaxFiles int `yaml:"max_files"`
	// AllowRollback lets a bundle whose revision is older than the one in
	// force (by RevisionOrder) be activated. Default false: it is refused
	// with reason rollback, and the revision in force stays.
	AllowRollback bool `yaml:"allow_rollback"`
	// RevisionOrder is how two revisions compare, to tell a rollback:
	// "seen" (the default: a revision that was in force and was then
	// replaced is older than every revision after it; revisions never
	// seen are newer), "numeric" (revisions are integers), "semver"
	// (semantic versions, an optional leading "v"), "timestamp" (RFC 3339
	// times) or "lexical" (byte order). With an order other than seen, a
	// revision that does not parse under it is refused, and a revision
	// replaced earlier is still refused as under seen.
	RevisionOrder string `yaml:"revision_order"`
	// BearerTokenFile is a file holding a token sent as "Authorization:
	// Bearer TOKEN"; relative to the configuration file. Default "": none.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// Pending is what happens to calls before the bundle's first
	// activation: "refuse" (the default) refuses every tool's calls with
	// reason policy_denied, naming the bundle, so no call passes
	// unchecked while the sidecar starts or the server is away; "allow"
	// lets calls through with the file's policies only.
	Pending string `yaml:"pending"`
	// Signing verifies the bundle's signature (.signatures.json, as opa
	// build --signing-key or opa sign write it). Default: none, and a
	// bundle is taken unsigned. When set, a bundle without a valid
	// signature is refused.
	Signing *BundleSigning `yaml:"signing"`
}

// BundleSigning is how a bundle's signature is verified (OPA's bundle
// signature format: a JWT over the files' hashes).
type BundleSigning struct {
	// PublicKey is a file holding the verification key: a PEM public key
	// or certificate for RS*, PS* and ES* algorithms, the shared secret
	// for HS*. Relative to the configuration file. Required.
	PublicKey string `yaml:"public_key"`
	// KeyID is the key's id (the signature's "kid"). Default "default",
	// as opa build names it.
	KeyID string `yaml:"key_id"`
	// Algorithm is the signature's algorithm. Default "RS256".
	Algorithm string `yaml:"algorithm"`
	// Scope, when set, must equal the signature's scope claim.
	Scope string `yaml:"scope"`
	// Exclude lists files (glob patterns) left out of verification, as
	// opa build --exclude-files-verify does.
	Exclude []string `yaml:"exclude"`

	key []byte // PublicKey's content, read by validate
}

// Key is the verification key as read when the section was validated.
func (s *BundleSigning) Key() []byte { return s.key }

// What calls meet before a bundle's first activation (BundleConfig.Pending).
const (
	PendingRefuse = "refuse"
	PendingAllow  = "allow"
)

// How a bundle's revisions compare (BundleConfig.RevisionOrder).
const (
	RevisionSeen      = "seen"
	RevisionNumeric   = "numeric"
	RevisionSemver    = "semver"
	RevisionTimestamp = "timestamp"
	RevisionLexical   = "lexical"
)

// Defaults of a bundle's settings.
const (
	DefaultBundleMinDelay = 60 * time.Second
	DefaultBundleMaxDelay = 120 * time.Second
	DefaultBundleTimeout  = 10 * time.Second
	DefaultBundleMaxBytes = 32 << 20
	// DefaultBundleDownloadTimeout bounds a whole download.
	DefaultBundleDownloadTimeout = 60 * time.Second
	// DefaultBundleMaxExpandedBytes bounds a tarball's expanded files.
	DefaultBundleMaxExpandedBytes = 64 << 20
	// DefaultBundleMaxFiles bounds a tarball's entries.
	DefaultBundleMaxFiles = 10000
	// maxBundleMaxFiles bounds max_files.
	maxBundleMaxFiles = 1000000
	// maxBundleMaxBytes bounds max_bytes.
	maxBundleMaxBytes = 1 << 30
)

// signingAlgorithms are the algorithms OPA verifies bundle signatures with.
var signingAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "HS256", "HS384", "HS512"}

// validate applies a bundle's defaults and checks it; dir is where
// relative paths resolve.
func (b *BundleConfig) validate(dir string) error {
	if b.Name == "" {
		return section.Errorf("name", "required")
	}
	if strings.ContainsAny(b.Name, "=;, \t\n") {
		return section.Errorf("name", "%q: a bundle's name may not hold spaces, '=', ';' or ','", b.Name)
	}
	u, err := url.Parse(b.URL)
	if b.URL == "" {
		return section.Errorf("url", "required")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return section.Errorf("url", "%q is not an http or https URL", b.URL)
	}
	if u.User != nil {
		return section.Errorf("url", "holds credentials; use bearer_token_file")
	}
	if b.MinDelay == 0 {
		b.MinDelay = DefaultBundleMinDelay
	}
	if b.MaxDelay == 0 {
		b.MaxDelay = max(DefaultBundleMaxDelay, b.MinDelay)
	}
	switch {
	case b.MinDelay < time.Second || b.MinDelay%time.Second != 0:
		return section.Errorf("min_delay", "%s: whole seconds, at least 1s", b.MinDelay)
	case b.MaxDelay%time.Second != 0:
		return section.Errorf("max_delay", "%s: whole seconds", b.MaxDelay)
	case b.MaxDelay < b.MinDelay:
		return section.Errorf("max_delay", "%s is shorter than min_delay (%s)", b.MaxDelay, b.MinDelay)
	}
	switch {
	case b.Timeout == 0:
		b.Timeout = DefaultBundleTimeout
	case b.Timeout < time.Second || b.Timeout%time.Second != 0:
		return section.Errorf("timeout", "%s: whole seconds, at least 1s", b.Timeout)
	}
	switch {
	case b.MaxBytes == 0:
		b.MaxBytes = DefaultBundleMaxBytes
	case b.MaxBytes < 0 || b.MaxBytes > maxBundleMaxBytes:
		return section.Errorf("max_bytes", "must be between 1 and %d", maxBundleMaxBytes)
	}
	switch {
	case b.MaxExpandedBytes == 0:
		b.MaxExpandedBytes = max(DefaultBundleMaxExpandedBytes, b.MaxBytes)
	case b.MaxExpandedBytes < b.MaxBytes || b.MaxExpandedBytes > maxBundleMaxBytes:
		return section.Errorf("max_expanded_bytes", "must be between max_bytes (%d) and %d", b.MaxBytes, maxBundleMaxBytes)
	}
	switch {
	case b.MaxFiles == 0:
		b.MaxFiles = DefaultBundleMaxFiles
	case b.MaxFiles < 0 || b.MaxFiles > maxBundleMaxFiles:
		return section.Errorf("max_files", "must be between 1 and %d", maxBundleMaxFiles)
	}
	switch {
	case b.DownloadTimeout == 0:
		b.DownloadTimeout = max(DefaultBundleDownloadTimeout, b.Timeout)
	case b.DownloadTimeout%time.Second != 0 || b.DownloadTimeout < b.Timeout:
		return section.Errorf("download_timeout", "%s: whole seconds, at least timeout (%s)", b.DownloadTimeout, b.Timeout)
	}
	switch b.RevisionOrder {
	case "":
		b.RevisionOrder = RevisionSeen
	case RevisionSeen, RevisionNumeric, RevisionSemver, RevisionTimestamp, RevisionLexical:
	default:
		return section.Errorf("revision_order", "unknown value %q; expected seen, numeric, semver, timestamp or lexical", b.RevisionOrder)
	}
	switch b.Pending {
	case "":
		b.Pending = PendingRefuse
	case PendingRefuse, PendingAllow:
	default:
		return section.Errorf("pending", "unknown value %q; expected refuse or allow", b.Pending)
	}
	if b.BearerTokenFile != "" {
		b.BearerTokenFile = section.Resolve(dir, b.BearerTokenFile)
		if _, err := os.Stat(b.BearerTokenFile); err != nil {
			return section.At("bearer_token_file", err)
		}
	}
	if s := b.Signing; s != nil {
		if s.PublicKey == "" {
			return section.Errorf("signing.public_key", "required")
		}
		if s.KeyID == "" {
			s.KeyID = "default"
		}
		if s.Algorithm == "" {
			s.Algorithm = "RS256"
		}
		if !slices.Contains(signingAlgorithms, s.Algorithm) {
			return section.Errorf("signing.algorithm", "unknown algorithm %q; expected one of %s", s.Algorithm, strings.Join(signingAlgorithms, ", "))
		}
		s.PublicKey = section.Resolve(dir, s.PublicKey)
		key, err := os.ReadFile(s.PublicKey)
		if err != nil {
			return section.At("signing.public_key", err)
		}
		if len(bytes.TrimSpace(key)) == 0 {
			return section.Errorf("signing.public_key", "%s is empty", s.PublicKey)
		}
		if !strings.HasPrefix(s.Algorithm, "HS") && !bytes.Contains(key, []byte("-----BEGIN ")) {
			return section.Errorf("signing.public_key", "%s holds no PEM block; %s needs a PEM public key or certificate", s.PublicKey, s.Algorithm)
		}
		s.key = key
		for i, p := range s.Exclude {
			if _, err := path.Match(p, ""); err != nil {
				return section.Errorf(fmt.Sprintf("signing.exclude[%d]", i), "%q is not a glob pattern", p)
			}
		}
	}
	return nil
}

// ValidateBundles applies the defaults of the bundles section and checks
// it; dir is where relative paths resolve. Load calls it; the sidecar
// reads the result.
func (c *Config) ValidateBundles(dir string) error {
	seen := map[string]bool{}
	for i := range c.Bundles {
		b := &c.Bundles[i]
		if b.Signing != nil {
			s := *b.Signing
			b.Signing = &s
		}
		if err := b.validate(dir); err != nil {
			return section.Under(fmt.Sprintf("bundles[%d]", i), err)
		}
		if seen[b.Name] {
			return section.Errorf(fmt.Sprintf("bundles[%d].name", i), "bundle %q is defined twice", b.Name)
		}
		seen[b.Name] = true
	}
	return nil
}

// bundleFiles lists the files the bundles section reads (signing keys,
// token files), for hot reload.
func (c Config) bundleFiles(dir string) []string {
	var files []string
	for _, b := range c.Bundles {
		if b.BearerTokenFile != "" {
			files = append(files, section.Resolve(dir, b.BearerTokenFile))
		}
		if b.Signing != nil && b.Signing.PublicKey != "" {
			files = append(files, section.Resolve(dir, b.Signing.PublicKey))
		}
	}
	return files
}

// Bundle is an activated bundle's content as toolgate reads it: plain
// data, read-only once made (package policies/opabundle makes it from an
// OPA bundle).
type Bundle struct {
	// Name is the bundle's name in policies.bundles.
	Name string
	// Revision is the manifest's revision; "" when the bundle has none.
	Revision string
	// Rego holds the bundle's Rego files by path in the bundle
	// ("/toolgate/bounds/bounds.rego"), *_test.rego files included.
	Rego map[string][]byte
	// Packages names each Rego file's package ("toolgate.bounds"), by
	// path.
	Packages map[string]string
	// Wasm holds the bundle's WASM modules by path ("/policy.wasm").
	Wasm map[string][]byte
	// Settings are toolgate's settings from the bundle's data
	// (data.toolgate); nil when the bundle has none.
	Settings *BundleSettings
}

// BundleSettings are toolgate's own settings carried in a bundle, at
// data.toolgate (a file toolgate/data.json in the bundle): which policies
// the bundle holds, their modes, and which tools they bind to. Without
// them, every Rego package in the bundle is one policy named after its
// package ("toolgate.bounds"), enforced, and bound to every tool.
type BundleSettings struct {
	// Policies are the bundle's policies.
	Policies []BundlePolicy `json:"policies"`
	// Global names the bundle's policies that decide every tool's calls.
	Global []string `json:"global"`
	// Tools binds the bundle's policies to tools by tool name. A tool
	// this sidecar does not have is skipped: one bundle serves a fleet.
	Tools map[string][]string `json:"tools"`
}

// BundlePolicy is one policy of a bundle.
type BundlePolicy struct {
	// Name identifies the policy, as a policies.rego entry's name does;
	// unique across the configuration and every bundle. Required.
	Name string `json:"name"`
	// Package is a Rego policy's package ("toolgate.bounds"): its files
	// are the bundle's files of that package, and the *_test.rego files
	// of that package or of PACKAGE_test. One of Package and Path is
	// required.
	Package string `json:"package"`
	// Path is, for a Rego policy, a .rego file or a folder in the bundle
	// ("/toolgate/bounds"), whose .rego files below are the policy; for a
	// WASM policy, the module's path ("/policy.wasm"). Paths are as the
	// bundle holds them: opa build -b DIR keeps DIR in them.
	Path string `json:"path"`
	// Mode is "enforce" (the default), "dry_run" or "off".
	Mode string `json:"mode"`
	// Engine is a Rego policy's engine; default: the section's.
	Engine string `json:"engine"`
}

// DecodeBundleSettings decodes data.toolgate from a bundle's data (any
// JSON value); unknown fields are errors, so a misspelt setting is not
// dropped.
func DecodeBundleSettings(v any) (*BundleSettings, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("data.toolgate: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s BundleSettings
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("data.toolgate: %w", err)
	}
	return &s, nil
}

// settings returns the bundle's settings, or the default ones: one
// enforced, global policy per Rego package.
func (b *Bundle) settings() (*BundleSettings, error) {
	if b.Settings != nil {
		return b.Settings, nil
	}
	// Without settings each package is one policy, named after it.
	pkgs := map[string]bool{}
	for p, pkg := range b.Packages {
		if !strings.HasSuffix(p, "_test.rego") {
			pkgs[pkg] = true
		}
	}
	s := &BundleSettings{}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		s.Policies = append(s.Policies, BundlePolicy{Name: pkg, Package: pkg})
		s.Global = append(s.Global, pkg)
	}
	return s, nil
}

// packageFiles returns the bundle's .rego files of package pkg, and the
// test files of pkg and pkg_test.
func (b *Bundle) packageFiles(pkg string) map[string][]byte {
	files := map[string][]byte{}
	for f, src := range b.Rego {
		got := b.Packages[f]
		if got == pkg || (strings.HasSuffix(f, "_test.rego") && got == pkg+"_test") {
			files[f] = src
		}
	}
	return files
}

// regoFiles returns the bundle's .rego files at p: the file itself, or
// every file below the folder p.
func (b *Bundle) regoFiles(p string) map[string][]byte {
	p = "/" + strings.Trim(p, "/")
	files := map[string][]byte{}
	for f, src := range b.Rego {
		if f == p || strings.HasPrefix(f, strings.TrimSuffix(p, "/")+"/") || p == "/" {
			files[f] = src
		}
	}
	return files
}

// BundleVersion is the policy version of bundles in force: the one
// bundle's revision, or name=revision for each, sorted, joined by ";". A
// bundle without a revision stands as its content hash.
func BundleVersion(revs map[string]string) string {
	if len(revs) == 1 {
		for _, r := range revs {
			return r
		}
	}
	names := make([]string, 0, len(revs))
	for n := range revs {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + revs[n]
	}
	return strings.Join(parts, ";")
}

// Bundles are the bundles section as validated: defaults applied, paths
// resolved, signing keys read.
func (l *Loaded) Bundles() []BundleConfig { return l.cfg.Bundles }

// Revisions are the revisions of the bundles whose policies l holds, by
// bundle name; empty when it holds none.
func (l *Loaded) Revisions() map[string]string { return l.revisions }

// addBundles adds the policies of o.Bundles to l, each with add (Load's),
// Rego policies compiled by loadRego; their bindings go to l.bound and
// l.global. Errors name the bundle: bundles[NAME].policies[I].
func (l *Loaded) addBundles(c Config, o LoadOptions, add func(p, name, mode string, load func() (*loadedPolicy, error)) error,
	loadRego func(p, at, name, engine string, files map[string][]byte) (*loadedPolicy, error), h io.Writer) error {
	ctx := context.Background()
	for _, bc := range c.Bundles {
		if bc.Pending != PendingRefuse || slices.ContainsFunc(o.Bundles, func(b *Bundle) bool { return b.Name == bc.Name }) {
			continue
		}
		name := "bundle:" + bc.Name
		err := add(fmt.Sprintf("bundles[%s]", bc.Name), name, ModeEnforce, func() (*loadedPolicy, error) {
			return &loadedPolicy{eval: pendingBundle{name: name, bundle: bc.Name}, kind: "pending", engine: "none", key: "pending"}, nil
		})
		if err != nil {
			return err
		}
		l.global = append(l.global, name)
	}
	for _, b := range o.Bundles {
		if !slices.ContainsFunc(c.Bundles, func(bc BundleConfig) bool { return bc.Name == b.Name }) {
			continue // the bundle is no longer configured
		}
		bp := fmt.Sprintf("bundles[%s]", b.Name)
		st, err := b.settings()
		if err != nil {
			return section.At(bp, err)
		}
		if l.revisions == nil {
			l.revisions = map[string]string{}
		}
		rev := b.EffectiveRevision()
		l.revisions[b.Name] = rev
		fmt.Fprintf(h, "bundle=%s:%s;", b.Name, rev)
		mine := map[string]bool{}
		for i, bpol := range st.Policies {
			p := fmt.Sprintf("%s.policies[%d]", bp, i)
			err := add(p, bpol.Name, bpol.Mode, func() (*loadedPolicy, error) {
				var files map[string][]byte
				switch {
				case (bpol.Path == "") == (bpol.Package == ""):
					return nil, section.Errorf(p+".package", "name either a package or a path")
				case bpol.Package != "":
					if files = b.packageFiles(bpol.Package); len(files) == 0 {
						return nil, section.Errorf(p+".package", "no .rego file of package %s in bundle %q", bpol.Package, b.Name)
					}
				default:
					if mod, ok := b.Wasm["/"+strings.Trim(bpol.Path, "/")]; ok {
						return l.bundleWasm(ctx, p, bpol.Name, mod, c, o)
					}
					if files = b.regoFiles(bpol.Path); len(files) == 0 {
						return nil, section.Errorf(p+".path", "no .rego file or WASM module at %s in bundle %q", bpol.Path, b.Name)
					}
				}
				if o.Rego == nil {
					return nil, section.Errorf(p+".path", "no Rego host was given to load Rego policies")
				}
				return loadRego(p, p+".path", bpol.Name, bpol.Engine, files)
			})
			if err != nil {
				return err
			}
			mine[bpol.Name] = true
		}
		for i, name := range st.Global {
			if !mine[name] {
				return section.Errorf(fmt.Sprintf("%s.global[%d]", bp, i), "bundle %q has no policy named %q", b.Name, name)
			}
			l.global = append(l.global, name)
		}
		for _, tool := range slices.Sorted(maps.Keys(st.Tools)) {
			for i, name := range st.Tools[tool] {
				if !mine[name] {
					return section.Errorf(fmt.Sprintf("%s.tools[%s][%d]", bp, tool, i), "bundle %q has no policy named %q", b.Name, name)
				}
				if l.bound == nil {
					l.bound = map[string][]string{}
				}
				l.bound[tool] = append(l.bound[tool], name)
				fmt.Fprintf(h, "bind=%s:%s;", tool, name)
			}
		}
	}
	return nil
}

// bundleWasm loads a bundle's WASM module with the default limits; the
// host reads modules from files, so it is written to a temporary one.
func (l *Loaded) bundleWasm(ctx context.Context, p, name string, mod []byte, c Config, o LoadOptions) (*loadedPolicy, error) {
	opts := WasmOptions{Deadline: c.Deadline}
	lp := &loadedPolicy{kind: "wasm", engine: EngineWasm,
		key: fmt.Sprintf("wasm/%s/%d/%s/%d", section.Version(mod), opts.MemoryLimit, opts.Deadline, opts.PoolSize)}
	if prev := o.Previous.reusable(name, lp.key); prev != nil {
		lp.eval = prev.eval
		return lp, nil
	}
	if o.Wasm == nil {
		return nil, section.Errorf(p+".path", "WASM policies are not available here")
	}
	f, err := os.CreateTemp("", "toolgate-bundle-*.wasm")
	if err != nil {
		return nil, section.At(p+".path", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(mod)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, section.At(p+".path", err)
	}
	ev, err := o.Wasm.LoadWasm(ctx, name, f.Name(), opts)
	if err != nil {
		return nil, section.At(p+".path", err)
	}
	lp.eval = ev
	return lp, nil
}

// bundleDigest is a content hash of a bundle's files, for a bundle
// without a revision.
// EffectiveRevision is the bundle's revision as /status shows it: the
// manifest's, or sha256:HASH of its files when it has none.
func (b *Bundle) EffectiveRevision() string {
	if b.Revision != "" {
		return b.Revision
	}
	return "sha256:" + bundleDigest(b)
}

func bundleDigest(b *Bundle) string {
	h := sha256.New()
	for _, m := range []map[string][]byte{b.Rego, b.Wasm} {
		for _, p := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(m[p]))
			h.Write(m[p])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// pendingBundle is the policy standing for a bundle not activated yet
// (pending: refuse): it refuses every call.
type pendingBundle struct{ name, bundle string }

func (p pendingBundle) Name() string { return p.name }

func (p pendingBundle) Eval(context.Context, *Input) (Result, error) {
	return Result{Allowed: true, Denies: []Violation{{Reason: bucketing.ReasonPolicyDenied,
		Message: fmt.Sprintf("policy bundle %q has not been activated yet; calls are refused until it is", p.bundle)}}}, nil
}
