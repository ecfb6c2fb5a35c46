package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/internal/testutil"
)

// The bundle group of the adversarial suite: whoever answers a bundle's
// URL (a bucket, a plain-HTTP path, a man in the middle) serves what it
// likes. Each attack is judged by the process's state: the sidecar stays
// up, its heap stays within the stated bound, the revision in force is
// the last good one, and it still decides what a real upstream receives.

// attackServer serves whatever its handler says, on 127.0.0.1.
type attackServer struct {
	addr string
	h    atomic.Pointer[http.HandlerFunc]
	srv  *http.Server
}

func startAttackServer(t *testing.T) *attackServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &attackServer{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.h.Load())(w, r) })}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// serve answers every request with b (ETag: its hash; 304 on a match).
func (s *attackServer) serve(b []byte) {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	f := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Write(b)
	})
	s.h.Store(&f)
}

// drip answers with b's first bytes, then one byte a second.
func (s *attackServer) drip(b []byte) {
	f := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"drip"`)
		w.WriteHeader(http.StatusOK)
		w.Write(b[:16])
		w.(http.Flusher).Flush()
		for _, c := range b[16:] {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
			w.Write([]byte{c})
			w.(http.Flusher).Flush()
		}
	})
	s.h.Store(&f)
}

// attackRig is a sidecar polling an attackServer, with a real upstream.
type attackRig struct {
	srv          *attackServer
	keys         string
	sc           *sidecar.Sidecar
	up           *demotools.Server
	admin, proxy *http.Client
	logs         *testutil.SyncBuffer
}

// bundleBounds are the bounds of the attacked bundle: 4 MiB tarball and
// file, 16 MiB expanded, 1,000 entries, 3s for a whole download.
const bundleBounds = `      max_bytes: 4194304
      max_expanded_bytes: 16777216
      max_files: 1000
      timeout: 1s
      download_timeout: 3s
`

func startAttackRig(t *testing.T, first []byte, keys, extra string) *attackRig {
	t.Helper()
	return startAttackRigWith(t, first, keys, extra, func(c string) string { return c })
}

// startAttackRigWith is startAttackRig with the configuration edited.
func startAttackRigWith(t *testing.T, first []byte, keys, extra string, edit func(string) string) *attackRig {
	t.Helper()
	r := &attackRig{srv: startAttackServer(t), keys: keys, logs: new(testutil.SyncBuffer)}
	r.srv.serve(first)
	dir := t.TempDir()
	cfg := strings.NewReplacer("URL", "http://"+r.srv.addr+"/bundle.tar.gz", "KEY", filepath.Join(keys, "public.pem"),
		"      max_delay: 1s\n", "      max_delay: 1s\n"+bundleBounds+extra).Replace(bundleConfig)
	writeFile(t, filepath.Join(dir, "toolgate.yaml"), edit(cfg))
	writeFile(t, filepath.Join(dir, "pubmed_search.json"), pubmedSchema(1000))
	lc, err := config.Load(filepath.Join(dir, "toolgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r.sc, err = sidecar.Start(lc, sidecar.Options{Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), ReloadPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sidecar.ShutdownGrace)
		defer cancel()
		r.sc.Stop(ctx)
	})
	r.up = startUpstream(t)
	r.admin, r.proxy = directClient(t), proxyClient(t, r.sc.ProxyAddr("forward", 0))
	return r
}

// decides checks that the bundle in force bounds retmax at bound, by what
// the upstream received: a call over it never arrives, one under it does.
func (r *attackRig) decides(t *testing.T, what string, bound int) {
	t.Helper()
	before := r.up.TotalHits()
	esearch(t, r.proxy, r.up.URL(), bound+10)
	if got := r.up.TotalHits(); got != before {
		t.Errorf("%s: retmax=%d reached the upstream; the bound %d in force should refuse it", what, bound+10, bound)
	}
	esearch(t, r.proxy, r.up.URL(), bound-10)
	if got := r.up.TotalHits(); got != before+1 {
		t.Errorf("%s: retmax=%d did not reach the upstream (%d hits, want %d)", what, bound-10, got, before+1)
	}
}

// untar reads a gzipped tarball's regular files.
func untar(t *testing.T, b []byte) []testutil.TarFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []testutil.TarFile
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeReg {
			out = append(out, testutil.TarFile{Name: h.Name, Body: body})
		}
	}
}

// signedBomb is the signed bundle at path with entries files of size
// zero bytes added, and a signature over all of them made with the
// private key in keys: a bomb whose signature is valid.
func signedBomb(t *testing.T, path, keys string, entries int, size int64) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, raw)
	var infos []opabundle.FileInfo
	for i, f := range files {
		if strings.HasSuffix(f.Name, ".signatures.json") {
			var sc struct{ Signatures []string }
			if err := json.Unmarshal(f.Body, &sc); err != nil || len(sc.Signatures) != 1 {
				t.Fatalf(".signatures.json: %v", err)
			}
			payload, err := base64.RawURLEncoding.DecodeString(strings.Split(sc.Signatures[0], ".")[1])
			if err != nil {
				t.Fatal(err)
			}
			var claims struct{ Files []opabundle.FileInfo }
			if err := json.Unmarshal(payload, &claims); err != nil {
				t.Fatal(err)
			}
			infos = claims.Files
			files = append(files[:i:i], files[i+1:]...)
			break
		}
	}
	zero := sha256.Sum256(make([]byte, size))
	for i := range entries {
		infos = append(infos, opabundle.FileInfo{Name: fmt.Sprintf("junk/z%d.bin", i), Hash: hex.EncodeToString(zero[:]), Algorithm: "SHA-256"})
	}
	tok, err := opabundle.GenerateSignedToken(infos, opabundle.NewSigningConfig(filepath.Join(keys, "private.pem"), "RS256", ""), "default")
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := json.Marshal(map[string][]string{"signatures": {tok}})
	files = append([]testutil.TarFile{{Name: "/.signatures.json", Body: sig}}, files...)
	return testutil.Bomb{Files: files, Entries: entries, EntrySize: size}.Tarball()
}

// heapWatch samples the heap until stopped and reports its peak growth.
func heapWatch() func() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(stop)
		<-done
		return peak - base
	}
}

// TestAdversarialBundles serves a signed sidecar's bundle URL with bombs,
// a drip feed and rollbacks. Not parallel: it measures the heap.
func TestAdversarialBundles(t *testing.T) {
	const mib = 1 << 20
	keys := writeKeyPair(t)
	r1 := buildBundle(t, bundleSrc{bound: 50}, "r1", keys)
	r1b, err := os.ReadFile(r1)
	if err != nil {
		t.Fatal(err)
	}
	r := startAttackRig(t, r1b, keys, "")
	admin := r.sc.AdminAddr()
	waitBundle(t, r.admin, admin, "at r1", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r1" })
	r.decides(t, "r1", 50)

	otherKeys := writeKeyPair(t)
	var inner bytes.Buffer
	tw := tar.NewWriter(&inner)
	nested := testutil.Bomb{Entries: 256, EntrySize: 4 * mib}.Tarball()
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "inner.tar.gz", Size: int64(len(nested)), Mode: 0o644})
	tw.Write(nested)
	tw.Close()
	noManifest := []testutil.TarFile{}
	for _, f := range untar(t, r1b) {
		if !strings.HasSuffix(f.Name, ".manifest") {
			noManifest = append(noManifest, f)
		}
	}
	var nestedGz bytes.Buffer
	zw := gzip.NewWriter(&nestedGz)
	zw.Write(inner.Bytes())
	zw.Close()
	// Every payload is made before the heap is watched.
	serve := func(b []byte) func() { return func() { r.srv.serve(b) } }
	attacks := []struct {
		name   string
		serve  func()
		reason string
	}{
		{"gzip bomb, unsigned: 512 files of 4 MiB", serve(testutil.Bomb{Entries: 512, EntrySize: 4 * mib}.Tarball()), "bundle_too_large"},
		{"gzip bomb with a valid signature", serve(signedBomb(t, r1, keys, 512, 4*mib)), "bundle_too_large"},
		{"gzip bomb signed with another key", serve(signedBomb(t, r1, otherKeys, 512, 4*mib)), "bundle_too_large"},
		{"a million tiny entries", serve(testutil.ManyEntries(1_000_000)), "bundle_too_large"},
		{"one entry of 8 GiB", serve(testutil.Bomb{Huge: 8 << 30}.Tarball()), "bundle_too_large"},
		{"a bomb nested in a tarball", serve(nestedGz.Bytes()), "download"},
		{"r1 without its manifest (no revision: a new name)", serve(testutil.Bomb{Files: noManifest}.Tarball()), "download"},
		{"drip feed, one byte a second", func() { r.srv.drip(r1b) }, "download_timeout"},
	}
	var tried, refused, harmed int
	for _, a := range attacks {
		tried++
		failedBefore := t.Failed()
		before := bundleStatus(t, r.admin, admin)
		start := time.Now()
		peak := heapWatch()
		a.serve()
		st := waitBundle(t, r.admin, admin, a.name+": refused", 60*time.Second, func(st sidecar.BundleStatus) bool {
			return st.Downloads.Failed > before.Downloads.Failed
		})
		grew := peak()
		if st.Revision != "r1" || st.LastErrorReason != a.reason {
			t.Errorf("%s: revision %q, last_error_reason %q (%s); want r1 kept, %s", a.name, st.Revision, st.LastErrorReason, st.LastError, a.reason)
		}
		// The stated bound is max_expanded_bytes (16 MiB) plus 8 MiB; the
		// sidecar polls, logs and serves /status meanwhile, and the
		// garbage of an earlier attack may not be collected yet, so the
		// test allows 16 MiB more. Unbounded, each bomb is 2 to 8 GiB.
		if grew > 16*mib+24*mib {
			t.Errorf("%s: the heap grew by %d MiB", a.name, grew/mib)
		}
		t.Logf("%s: refused in %s (%s), heap +%.1f MiB", a.name, time.Since(start).Round(time.Millisecond), st.LastError, float64(grew)/mib)
		r.decides(t, a.name, 50)
		if st.Revision == "r1" {
			refused++
		}
		if t.Failed() && !failedBefore {
			harmed++
		}
	}
	if v := metricValue(t, r.admin, admin, `toolgate_bundle_refusals_total{bundle="main",reason="bundle_too_large"}`); v < "5" || len(v) != 1 {
		t.Errorf("toolgate_bundle_refusals_total bundle_too_large = %q, want at least 5 (one per bomb)", v)
	}
	if !strings.Contains(r.logs.String(), `"reason":"bundle_too_large"`) {
		t.Errorf("the log names no bundle_too_large refusal")
	}

	// The control: the same signed construction under the bounds (two
	// files of 4 MiB) is a valid bundle, and activates.
	r.srv.serve(signedBomb(t, buildBundle(t, bundleSrc{bound: 30}, "r2", keys), keys, 2, 4*mib))
	waitBundle(t, r.admin, admin, "at r2", 60*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r2" })
	r.decides(t, "r2", 30)

	// r1, validly signed, was replaced by r2: serving it again is a
	// rollback, refused.
	r.srv.serve(r1b)
	st := waitBundle(t, r.admin, admin, "refusing r1", 60*time.Second, func(st sidecar.BundleStatus) bool { return st.Refused.Rollback > 0 })
	if st.Revision != "r2" || st.LastErrorReason != "rollback" {
		t.Errorf("after r1 served again: revision %q, reason %q; want r2 kept, rollback", st.Revision, st.LastErrorReason)
	}
	r.decides(t, "r2 after a rollback refused", 30)
	tried++
	if st.Revision == "r2" {
		refused++
	}
	t.Logf("bundle attacks: %d tried, %d refused with the last good revision kept, %d changed state or let a call through (want 0)", tried, refused, harmed)
	if v := metricValue(t, r.admin, admin, `toolgate_bundle_refusals_total{bundle="main",reason="rollback"}`); v == "0" || v == "" {
		t.Errorf("toolgate_bundle_refusals_total rollback = %q, want above 0", v)
	}
}

// TestAdversarialBundleRevisionOrder refuses, under revision_order
// numeric, a validly signed revision that was never in force but is
// older than the one in force, and one that is not a number; with
// allow_rollback, the operator's choice, the older revision activates.
func TestAdversarialBundleRevisionOrder(t *testing.T) {
	t.Parallel()
	keys := writeKeyPair(t)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r10 := read(buildBundle(t, bundleSrc{bound: 50}, "10", keys))
	r9 := read(buildBundle(t, bundleSrc{bound: 30}, "9", keys))
	abc := read(buildBundle(t, bundleSrc{bound: 30}, "abc", keys))
	for _, allow := range []bool{false, true} {
		extra := "      revision_order: numeric\n"
		if allow {
			extra += "      allow_rollback: true\n"
		}
		r := startAttackRig(t, r10, keys, extra)
		admin := r.sc.AdminAddr()
		waitBundle(t, r.admin, admin, "at 10", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "10" })
		if allow {
			r.srv.serve(r9)
			waitBundle(t, r.admin, admin, "at 9 (allow_rollback)", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "9" })
			r.decides(t, "9 allowed", 30)
			continue
		}
		for _, b := range [][]byte{r9, abc} {
			before := bundleStatus(t, r.admin, admin)
			r.srv.serve(b)
			st := waitBundle(t, r.admin, admin, "refusing", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Refused.Rollback > before.Refused.Rollback })
			if st.Revision != "10" || st.LastErrorReason != "rollback" {
				t.Errorf("revision %q, reason %q (%s); want 10 kept, rollback", st.Revision, st.LastErrorReason, st.LastError)
			}
			r.decides(t, "10 kept", 50)
		}
	}
}

// TestBundlePlainHTTPWarning starts a sidecar on an unsigned bundle served
// over plain HTTP: the log warns that whoever answers the URL decides the
// policies; with signing, it does not.
func TestBundlePlainHTTPWarning(t *testing.T) {
	t.Parallel()
	keys := writeKeyPair(t)
	b, err := os.ReadFile(buildBundle(t, bundleSrc{bound: 50}, "r1", ""))
	if err != nil {
		t.Fatal(err)
	}
	unsigned := startAttackRigWith(t, b, keys, "", func(c string) string {
		return strings.Replace(c, "      signing:\n        public_key: "+filepath.Join(keys, "public.pem")+"\n", "", 1)
	})
	waitBundle(t, unsigned.admin, unsigned.sc.AdminAddr(), "at r1", 30*time.Second, func(st sidecar.BundleStatus) bool { return st.Revision == "r1" })
	if !strings.Contains(unsigned.logs.String(), "plain HTTP without signing") {
		t.Errorf("no warning for an unsigned bundle over plain HTTP; log:\n%s", unsigned.logs.String())
	}
	signed := startAttackRig(t, b, keys, "")
	if strings.Contains(signed.logs.String(), "plain HTTP without signing") {
		t.Errorf("a warning for a signed bundle")
	}
}
