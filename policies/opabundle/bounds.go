package opabundle

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/rest"

	"github.com/toolgate/toolgate/policies"
)

// ErrTooLarge is the error of a bundle over one of its bounds (the
// tarball's bytes, the bytes its files expand to, the number of entries,
// one entry's size): the download stops at the bound, before the files
// are expanded in memory or the signature is read.
var ErrTooLarge = errors.New("bundle_too_large")

// ErrDownloadTimeout is the error of a download that did not end within
// the bundle's download_timeout (a server that drips the body).
var ErrDownloadTimeout = errors.New("download_timeout")

// Limits bound what reading one bundle may cost.
type Limits struct {
	// Compressed bounds the tarball as served (gzip bytes); 0: no bound.
	Compressed int64
	// Expanded bounds the bytes the tarball expands to (the tar stream:
	// headers, files, padding); 0: no bound.
	Expanded int64
	// Entries bounds the number of tar entries of any type; 0: no bound.
	Entries int
	// Entry bounds one entry's size; 0: no bound.
	Entry int64
}

// DefaultLimits are the limits of a bundle configured with the defaults.
var DefaultLimits = Limits{Compressed: policies.DefaultBundleMaxBytes, Expanded: policies.DefaultBundleMaxExpandedBytes,
	Entries: policies.DefaultBundleMaxFiles, Entry: policies.DefaultBundleMaxBytes}

// LimitsOf is what bundle c allows: max_bytes for the tarball and for
// each entry, max_expanded_bytes for the whole, max_files entries.
func LimitsOf(c policies.BundleConfig) Limits {
	return Limits{Compressed: c.MaxBytes, Expanded: c.MaxExpandedBytes, Entries: c.MaxFiles, Entry: c.MaxBytes}
}

// tooLarge is an ErrTooLarge naming the bound crossed.
func tooLarge(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrTooLarge, fmt.Sprintf(format, a...))
}

// Bounded returns the tarball r (gzip) as a new gzip stream OPA's reader
// can take, checked while it is read: the compressed bytes, the expanded
// bytes, the number of entries and each entry's declared size stop at
// the bounds of l with ErrTooLarge before the entry is handed on, so
// what OPA's reader holds in memory stays below l.Expanded. Only regular
// files and folders are handed on (OPA's reader takes nothing else); the
// files are re-written as stored (uncompressed) gzip, which costs a CRC
// and a copy, not a compression. The stream is produced on a goroutine
// that ends when the stream ends or when the returned reader is closed.
func Bounded(r io.Reader, l Limits) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(rewrite(r, l, pw)) }()
	return pr
}

// rewrite copies the tarball r to w as Bounded describes.
func rewrite(r io.Reader, l Limits, w io.Writer) error {
	if l.Compressed > 0 {
		r = &capped{r: r, left: l.Compressed, err: tooLarge("the tarball is over %d bytes", l.Compressed)}
	}
	gr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("archive read failed: %w", err)
	}
	var in io.Reader = gr
	if l.Expanded > 0 {
		in = &capped{r: gr, left: l.Expanded, err: tooLarge("the files expand to over %d bytes", l.Expanded)}
	}
	gw, err := gzip.NewWriterLevel(w, gzip.NoCompression)
	if err != nil {
		return err
	}
	tr, tw := tar.NewReader(in), tar.NewWriter(gw)
	var expanded int64
	buf := make([]byte, 32<<10) // one copy buffer for all entries
	for n := 1; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if l.Entries > 0 && n > l.Entries {
			return tooLarge("over %d entries", l.Entries)
		}
		if l.Entry > 0 && h.Size > l.Entry {
			return tooLarge("entry %q declares %d bytes, over %d", h.Name, h.Size, l.Entry)
		}
		if expanded += h.Size; l.Expanded > 0 && expanded > l.Expanded {
			return tooLarge("the files expand to over %d bytes", l.Expanded)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			continue
		}
		// Keep what OPA's reader reads (name, type, size, mode); the
		// rest (owners, times, PAX records) it ignores.
		out := &tar.Header{Typeflag: h.Typeflag, Name: h.Name, Size: h.Size, Mode: h.Mode & 0o777}
		if h.Typeflag == tar.TypeDir {
			out.Size = 0
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if _, err := io.CopyBuffer(struct{ io.Writer }{tw}, tr, buf); err != nil {
			return err
		}
	}
	// Drain the end of the archive, so the compressed bound and the
	// gzip checksum see the whole stream.
	if _, err := io.CopyBuffer(io.Discard, in, buf); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gw.Close()
}

// capped reads at most left bytes from r and then fails with err, so a
// stream one byte over its bound is told from one at it.
type capped struct {
	r    io.Reader
	left int64
	err  error
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, c.err
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 {
		return n - 1, c.err
	}
	return n, err
}

// boundsPlugin is the OPA REST client's authentication plugin through
// which every bundle download goes: it delegates authentication to the
// configured plugin (bearer token or none) and bounds each response as
// bounds says (a total deadline, then Bounded on a 200's body).
type boundsPlugin struct {
	inner   rest.HTTPAuthPlugin
	limits  Limits
	timeout time.Duration
	last    *atomic.Pointer[error] // the last download's bound error, for the Source
	// deadline is when the poll under way must have ended (Unix ns), set
	// by Prepare.
	deadline atomic.Int64
}

// NewClient implements rest.HTTPAuthPlugin.
func (p *boundsPlugin) NewClient(c rest.Config) (*http.Client, error) {
	hc, err := p.inner.NewClient(c)
	if err != nil {
		return nil, err
	}
	out := *hc
	next := out.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = &boundsTransport{next: next, p: p}
	return &out, nil
}

// Prepare implements rest.HTTPAuthPlugin. It is called once per poll,
// before the request and any redirect it leads to: the poll's deadline
// starts here, so redirects share it.
func (p *boundsPlugin) Prepare(r *http.Request) error {
	p.deadline.Store(time.Now().Add(p.timeout).UnixNano())
	return p.inner.Prepare(r)
}

// boundsTransport bounds each download in time and its body in size.
type boundsTransport struct {
	next http.RoundTripper
	p    *boundsPlugin
}

func (t *boundsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.p.last.Store(nil)
	deadline := time.Now().Add(t.p.timeout)
	if d := t.p.deadline.Load(); d != 0 && time.Unix(0, d).Before(deadline) {
		deadline = time.Unix(0, d)
	}
	ctx, cancel := context.WithDeadlineCause(r.Context(), deadline,
		fmt.Errorf("%w: the download took over %s", ErrDownloadTimeout, t.p.timeout))
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		if c := context.Cause(ctx); errors.Is(c, ErrDownloadTimeout) {
			err = c
			t.p.last.Store(&err)
		}
		cancel()
		return nil, err
	}
	body := resp.Body
	if resp.StatusCode == http.StatusOK {
		body = Bounded(resp.Body, t.p.limits)
	}
	resp.Body = &boundedBody{ReadCloser: body, orig: resp.Body, ctx: ctx, cancel: cancel, last: t.p.last}
	return resp, nil
}

// boundedBody is a response body that ends its download's deadline when
// closed and records why a read failed when a bound was crossed.
type boundedBody struct {
	io.ReadCloser
	orig   io.Closer
	ctx    context.Context
	cancel context.CancelFunc
	last   *atomic.Pointer[error]
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		if c := context.Cause(b.ctx); errors.Is(c, ErrDownloadTimeout) {
			err = c
		}
		if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrDownloadTimeout) {
			b.last.Store(&err)
		}
	}
	return n, err
}

func (b *boundedBody) Close() error {
	b.cancel()
	err := b.orig.Close()
	b.ReadCloser.Close()
	return err
}
