// Package mcppin is `toolgate mcp pin`: it lists every tool of a live MCP
// server with the official Go SDK's client, and writes (or, with Check,
// compares) the route's entries in a lock file of pinned tool definitions
// (proxy/mcppin), printing which tools are new, changed (and in which
// fields) or removed.
package mcppin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/proxy/mcppin"
)

// Defaults of Options.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultMaxPages = 100
	// maxAnswerBytes bounds one HTTP answer body read from the server.
	maxAnswerBytes = 32 << 20
)

// ErrOutOfDate is Run's error with Check when the server's tools differ
// from the lock file.
var ErrOutOfDate = errors.New("the lock file is out of date")

// Options configures Run.
type Options struct {
	// URL is the server's MCP endpoint (streamable HTTP), such as
	// http://127.0.0.1:8080/mcp. Required.
	URL string
	// Route is the name of the MCP route (tools[].name) the pins are for.
	// Required.
	Route string
	// LockFile is the lock file to write (created when missing). Required.
	LockFile string
	// Header is sent with every request (an Authorization the server
	// wants). Default none.
	Header http.Header
	// Check compares without writing: Run returns ErrOutOfDate when the
	// lock file would change. Default false.
	Check bool
	// Timeout bounds the whole run. Default 30s.
	Timeout time.Duration
	// MaxPages bounds the tools/list pages followed. Default 100.
	MaxPages int
	// Now is the clock for pinned_at. Default time.Now.
	Now func() time.Time
}

// Run lists the server's tools (every page) and updates the route's
// entries for that server in the lock file, then prints a summary to out:
// each new, changed (with the fields that changed, never their values) and
// removed tool. Other routes' and servers' entries are kept. The lock is
// replaced atomically. With Check, nothing is written and ErrOutOfDate is
// returned when anything would change.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	switch {
	case opts.URL == "":
		return errors.New("mcp pin: the server's URL is required")
	case opts.Route == "":
		return errors.New("mcp pin: the route's name is required (--route)")
	case opts.LockFile == "":
		return errors.New("mcp pin: the lock file is required (--lock)")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("mcp pin: %q is not an http(s) URL", opts.URL)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxPages <= 0 {
		opts.MaxPages = DefaultMaxPages
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	lock, err := mcppin.ReadLock(opts.LockFile)
	if err != nil {
		return fmt.Errorf("mcp pin: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	tools, err := listTools(ctx, opts)
	if err != nil {
		return fmt.Errorf("mcp pin: list the tools of %s: %w", opts.URL, err)
	}
	server := mcppin.ServerKey(u)
	upd := lock.Merge(opts.Route, server, tools, opts.Now())
	changed := len(upd.New)+len(upd.Changed)+len(upd.Removed) > 0
	summary(out, opts, server, upd)
	if opts.Check {
		if changed {
			return fmt.Errorf("mcp pin: %s: %w", opts.LockFile, ErrOutOfDate)
		}
		return nil
	}
	if err := mcppin.WriteLock(opts.LockFile, lock); err != nil {
		return fmt.Errorf("mcp pin: %w", err)
	}
	return nil
}

// summary prints what Merge found.
func summary(out io.Writer, opts Options, server string, u mcppin.Update) {
	verb := "pinned"
	if opts.Check {
		verb = "checked"
	}
	fmt.Fprintf(out, "%s %d tools of %s (route %s) in %s\n", verb, u.Same+len(u.New)+len(u.Changed), server, opts.Route, opts.LockFile)
	for _, n := range u.New {
		fmt.Fprintf(out, "  new      %s\n", n)
	}
	for _, n := range u.Changed {
		fmt.Fprintf(out, "  changed  %s (%s)\n", n, strings.Join(u.Fields[n], ", "))
	}
	for _, n := range u.Removed {
		fmt.Fprintf(out, "  removed  %s\n", n)
	}
	fmt.Fprintf(out, "  same     %d\n", u.Same)
	if u.Skipped > 0 {
		fmt.Fprintf(out, "  skipped  %d (without a name, or with one over %d bytes: not pinned; the proxy refuses calls to such a tool)\n", u.Skipped, mcppin.MaxToolName)
	}
}

// listTools connects with the SDK's client and follows tools/list pages.
// Each page is read from the raw JSON-RPC result (capture), not from the
// SDK's typed Tool, which drops members it does not know (execution) and
// reads numbers as float64: the digest must be the proxy's, taken over
// what the server sent.
func listTools(ctx context.Context, opts Options) ([]map[string]any, error) {
	hc := &http.Client{Transport: &headerTransport{header: opts.Header, base: http.DefaultTransport}}
	capt := &capture{Transport: &mcp.StreamableClientTransport{Endpoint: opts.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-mcp-pin", Version: "1"}, nil)
	session, err := client.Connect(ctx, capt, nil)
	if err != nil {
		return nil, err
	}
	defer session.Close()
	var all []map[string]any
	cursor := ""
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page == opts.MaxPages {
			return nil, fmt.Errorf("more than %d pages of tools", opts.MaxPages)
		}
		if _, err := session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor}); err != nil {
			return nil, err
		}
		raw := capt.take()
		if raw == nil {
			return nil, errors.New("the tools/list answer was not seen")
		}
		tools, next, err := mcppin.ParseTools(raw)
		if err != nil {
			return nil, err
		}
		all = append(all, tools...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, errors.New("the server's tools/list pages loop (a cursor came back)")
		}
		seen[next] = true
		cursor = next
	}
}

// capture is an SDK transport that keeps the raw result of the last
// tools/list answer its connection read.
type capture struct {
	mcp.Transport
	mu     sync.Mutex
	ids    map[any]bool // tools/list requests written, by ID
	result []byte
}

func (c *capture) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, c: c}, nil
}

// take returns the last tools/list result read, and forgets it.
func (c *capture) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.result
	c.result = nil
	return r
}

type captureConn struct {
	mcp.Connection
	c *capture
}

func (cc *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		cc.c.mu.Lock()
		if cc.c.ids == nil {
			cc.c.ids = map[any]bool{}
		}
		cc.c.ids[req.ID.Raw()] = true
		cc.c.mu.Unlock()
	}
	return cc.Connection.Write(ctx, msg)
}

func (cc *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := cc.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil && resp.ID.IsValid() {
		cc.c.mu.Lock()
		if cc.c.ids[resp.ID.Raw()] {
			delete(cc.c.ids, resp.ID.Raw())
			cc.c.result = append([]byte(nil), resp.Result...)
		}
		cc.c.mu.Unlock()
	}
	return msg, err
}

// headerTransport adds the configured headers to every request and bounds
// every answer body.
type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.header {
			r.Header[k] = append([]string(nil), vs...)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxAnswerBytes}
	return resp, nil
}

// errAnswerTooLarge ends an answer body past maxAnswerBytes.
var errAnswerTooLarge = fmt.Errorf("an answer is larger than %d bytes", maxAnswerBytes)

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// ParseHeaders reads --header values, each "Name: value", into a header;
// an error names the value's position, never its text.
func ParseHeaders(values []string) (http.Header, error) {
	h := http.Header{}
	for i, v := range values {
		name, value, ok := strings.Cut(v, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
			// The value is not echoed: it may be a token.
			return nil, fmt.Errorf("mcp pin: --header number %d is not 'Name: value'", i+1)
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
	}
	return h, nil
}
