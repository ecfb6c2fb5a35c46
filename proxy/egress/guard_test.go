package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/egress"
)

// upstream is a real HTTP server on 127.0.0.1 that counts what reached it.
type upstream struct {
	srv  *httptest.Server
	hits atomic.Int64
	port string
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") }
	}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

// resolver answers names from a table: each lookup of a name takes the
// next of its answers (the last one repeats), so a test can rebind.
type resolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(answers map[string][]string) *resolver {
	r := &resolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for name, seq := range answers {
		for _, ans := range seq {
			var as []netip.Addr
			for _, s := range strings.Split(ans, ",") {
				as = append(as, netip.MustParseAddr(s))
			}
			r.answers[name] = append(r.answers[name], as)
		}
	}
	return r
}

func (r *resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	n := r.calls[host]
	r.calls[host]++
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return seq[min(n, len(seq)-1)], nil
}

func (r *resolver) lookups(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

var errUnreachable = errors.New("test dialer: only loopback is dialled in tests")

// dialer records every address dialled and really connects only to
// loopback ones: tests never send traffic anywhere else. A name (other
// than localhost) it resolves with res, as a real dialer would resolve it
// again, and tries the answers in order.
type dialer struct {
	res   *resolver
	mu    sync.Mutex
	addrs []string
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "localhost" {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else if d.res != nil {
		if addrs, err = d.res.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, err
		}
	}
	for _, a := range addrs {
		if a.Unmap().IsLoopback() {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		}
	}
	return nil, errUnreachable
}

func (d *dialer) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// guard returns a guard over cfg, the test resolver and dialer.
func guard(t *testing.T, cfg egress.Config, res egress.Resolver, d *dialer, tools ...string) *egress.Guard {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := egress.New(&cfg, egress.Options{ToolHosts: tools, Resolver: res, Dial: d.dial})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// client is a real HTTP client whose connections go through the guard.
func client(g *egress.Guard) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: g.DialContext, DisableKeepAlives: true},
		Timeout:   30 * time.Second,
	}
}

// get fetches url and returns the body, or the error.
func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// wantDenied checks that err is the guard's refusal of class.
func wantDenied(t *testing.T, err error, class egress.Class) {
	t.Helper()
	var d *egress.DeniedError
	if !errors.As(err, &d) || !errors.Is(err, egress.ErrDenied) {
		t.Fatalf("err = %v, want the egress guard's refusal", err)
	}
	if d.Class != class {
		t.Errorf("refused as %s, want %s", d.Class, class)
	}
}

func TestGuardRefusesNameResolvingToLoopback(t *testing.T) {
	up := newUpstream(t, nil)
	res := newResolver(map[string][]string{"internal.test": {"127.0.0.1"}})
	d := &dialer{}
	c := client(guard(t, egress.Config{}, res, d))

	_, err := get(c, "http://internal.test:"+up.port+"/")
	wantDenied(t, err, egress.ClassLoopback)
	_, err = get(c, "http://127.0.0.1:"+up.port+"/")
	wantDenied(t, err, egress.ClassLoopback)
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the upstream received %d requests, want 0", n)
	}
	if got := d.dialled(); len(got) != 0 {
		t.Errorf("dialled %v, want nothing", got)
	}
}

func TestGuardAllowList(t *testing.T) {
	up := newUpstream(t, nil)
	other := newUpstream(t, nil)
	res := newResolver(map[string][]string{"internal.test": {"127.0.0.1"}, "a.corp.test": {"127.0.0.1"}})
	tests := []struct {
		name  string
		allow []string
		url   string
		ok    bool
	}{
		{"address", []string{"127.0.0.1"}, "http://internal.test:" + up.port + "/", true},
		{"prefix", []string{"127.0.0.0/8"}, "http://internal.test:" + up.port + "/", true},
		{"address and port", []string{"127.0.0.1:" + up.port}, "http://internal.test:" + up.port + "/", true},
		{"address, another port", []string{"127.0.0.1:" + up.port}, "http://internal.test:" + other.port + "/", false},
		{"name", []string{"internal.test"}, "http://internal.test:" + up.port + "/", true},
		{"name in another case", []string{"Internal.Test."}, "http://INTERNAL.test:" + up.port + "/", true},
		{"name and port", []string{"internal.test:" + up.port}, "http://internal.test:" + up.port + "/", true},
		{"name, another port", []string{"internal.test:" + up.port}, "http://internal.test:" + other.port + "/", false},
		{"name does not allow its address", []string{"internal.test"}, "http://127.0.0.1:" + up.port + "/", false},
		{"another name", []string{"other.test"}, "http://internal.test:" + up.port + "/", false},
		{"wildcard", []string{"*.corp.test"}, "http://a.corp.test:" + up.port + "/", true},
		{"wildcard is not its own name", []string{"*.corp.test"}, "http://corp.test:" + up.port + "/", false},
		{"another prefix", []string{"10.0.0.0/8"}, "http://internal.test:" + up.port + "/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.hits.Load() + other.hits.Load()
			body, err := get(client(guard(t, egress.Config{Allow: tt.allow}, res, &dialer{})), tt.url)
			after := up.hits.Load() + other.hits.Load()
			if tt.ok {
				if err != nil || body != "secret" || after != before+1 {
					t.Fatalf("get = %q, %v; upstream hits +%d; want it allowed", body, err, after-before)
				}
				return
			}
			if err == nil || after != before {
				t.Fatalf("get = %q, %v; upstream hits +%d; want it refused", body, err, after-before)
			}
			if tt.name != "wildcard is not its own name" { // corp.test does not resolve
				wantDenied(t, err, egress.ClassLoopback)
			}
		})
	}
}

func TestGuardToolHosts(t *testing.T) {
	tool := newUpstream(t, nil)
	other := newUpstream(t, nil)
	res := newResolver(map[string][]string{"alias.test": {"127.0.0.1"}})
	d := &dialer{}
	c := client(guard(t, egress.Config{}, res, d, "127.0.0.1:"+tool.port, "localhost:"+tool.port))

	for _, u := range []string{"http://127.0.0.1:" + tool.port + "/", "http://localhost:" + tool.port + "/"} {
		if body, err := get(c, u); err != nil || body != "secret" {
			t.Errorf("get %s (a tool host) = %q, %v; want it through", u, body, err)
		}
	}
	// The tool host on another port, and another name for it, are not
	// tool hosts.
	_, err := get(c, "http://127.0.0.1:"+other.port+"/")
	wantDenied(t, err, egress.ClassLoopback)
	_, err = get(c, "http://alias.test:"+tool.port+"/")
	wantDenied(t, err, egress.ClassLoopback)
	if tool.hits.Load() != 2 || other.hits.Load() != 0 {
		t.Errorf("tool saw %d, other saw %d; want 2 and 0", tool.hits.Load(), other.hits.Load())
	}
	if res.lookups("localhost") != 0 {
		t.Error("a tool host was resolved by the guard; it is dialled as given")
	}
}

func TestGuardRoutedHost(t *testing.T) {
	tool := newUpstream(t, nil)
	d := &dialer{}
	g := guard(t, egress.Config{}, newResolver(nil), d, "api.tool.test")
	// A transparently redirected call routed as the tool host, dialled at
	// its original destination, is the tool's.
	ctx := egress.WithRoutedHost(context.Background(), "api.tool.test")
	c, err := g.DialContext(ctx, "tcp", "127.0.0.1:"+tool.port)
	if err != nil {
		t.Fatalf("dial routed as a tool host = %v", err)
	}
	c.Close()
	// Routed as another host, the address decides.
	ctx = egress.WithRoutedHost(context.Background(), "evil.test")
	_, err = g.DialContext(ctx, "tcp", "127.0.0.1:"+tool.port)
	wantDenied(t, err, egress.ClassLoopback)
	// Routed as a name egress.allow lists, too: the routed host is the
	// caller's Host header or SNI, and an allowed name is not a pass for
	// whatever address the connection goes to.
	g = guard(t, egress.Config{Allow: []string{"allowed.test"}}, newResolver(nil), d)
	ctx = egress.WithRoutedHost(context.Background(), "allowed.test")
	_, err = g.DialContext(ctx, "tcp", "127.0.0.1:"+tool.port)
	wantDenied(t, err, egress.ClassLoopback)
	if n := tool.hits.Load(); n != 0 {
		t.Errorf("the upstream received %d requests; a dial is not a request, want 0", n)
	}
}

// TestGuardRebinding: a name that answers a public address when checked
// and a loopback one afterwards can never make the dial reach loopback:
// the guard dials the address it checked and looks nothing up again. A
// name that answers both at once is refused (any address, not all).
func TestGuardRebinding(t *testing.T) {
	up := newUpstream(t, nil)
	t.Run("second lookup", func(t *testing.T) {
		res := newResolver(map[string][]string{"rebind.test": {"8.8.8.8", "127.0.0.1"}})
		d := &dialer{res: res} // a dial by name would look it up again
		g := guard(t, egress.Config{}, res, d)
		// Checked as 8.8.8.8, dialled at 8.8.8.8 only (which the test
		// dialer fails, as a firewall would): the failure does not send
		// the dial back to the resolver, which now answers loopback.
		if _, err := get(client(g), "http://rebind.test:"+up.port+"/"); !errors.Is(err, errUnreachable) {
			t.Errorf("get = %v, want the public address's dial failure", err)
		}
		if got := d.dialled(); len(got) != 1 || got[0] != "8.8.8.8:"+up.port {
			t.Errorf("dialled %v; only the checked 8.8.8.8 may be", got)
		}
		if n := res.lookups("rebind.test"); n != 1 {
			t.Errorf("%d lookups for one dial; want 1", n)
		}
		// The next connection is checked anew, and refused.
		_, err := get(client(g), "http://rebind.test:"+up.port+"/")
		wantDenied(t, err, egress.ClassLoopback)
	})
	t.Run("one answer, public first", func(t *testing.T) {
		res := newResolver(map[string][]string{"rebind.test": {"8.8.8.8,127.0.0.1"}})
		d := &dialer{}
		_, err := get(client(guard(t, egress.Config{}, res, d)), "http://rebind.test:"+up.port+"/")
		wantDenied(t, err, egress.ClassLoopback)
		if got := d.dialled(); len(got) != 0 {
			t.Errorf("dialled %v, want nothing", got)
		}
	})
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the loopback upstream received %d requests, want 0", n)
	}
}

// TestGuardRedirect: a redirect is a new request, and its connection is
// checked like the first: an allowed upstream cannot send the client on to
// a forbidden one.
func TestGuardRedirect(t *testing.T) {
	target := newUpstream(t, nil)
	front := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://metadata.test:"+target.port+"/latest/meta-data/", http.StatusFound)
	})
	res := newResolver(map[string][]string{"front.test": {"127.0.0.1"}, "metadata.test": {"127.0.0.1"}})
	c := client(guard(t, egress.Config{Allow: []string{"front.test"}}, res, &dialer{}))
	_, err := get(c, "http://front.test:"+front.port+"/")
	wantDenied(t, err, egress.ClassLoopback)
	if front.hits.Load() != 1 || target.hits.Load() != 0 {
		t.Errorf("front saw %d, target saw %d; want 1 and 0", front.hits.Load(), target.hits.Load())
	}
}

func TestGuardIPv6Forms(t *testing.T) {
	up := newUpstream(t, nil)
	tests := []struct {
		name, answer string
		class        egress.Class
	}{
		{"mapped loopback", "::ffff:127.0.0.1", egress.ClassLoopback},
		{"loopback", "::1", egress.ClassLoopback},
		{"mapped metadata", "::ffff:169.254.169.254", egress.ClassMetadata},
		{"NAT64 metadata", "64:ff9b::a9fe:a9fe", egress.ClassMetadata},
		{"IPv4-compatible loopback", "::127.0.0.1", egress.ClassLoopback},
		{"6to4 private", "2002:a00:1::1", egress.ClassPrivate},
		{"AWS IPv6 metadata", "fd00:ec2::254", egress.ClassMetadata},
		{"link-local", "fe80::1", egress.ClassLinkLocal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := newResolver(map[string][]string{"v6.test": {tt.answer}})
			d := &dialer{}
			_, err := get(client(guard(t, egress.Config{}, res, d)), "http://v6.test:"+up.port+"/")
			wantDenied(t, err, tt.class)
			if got := d.dialled(); len(got) != 0 {
				t.Errorf("dialled %v, want nothing", got)
			}
		})
	}
	t.Run("literal", func(t *testing.T) {
		d := &dialer{}
		g := guard(t, egress.Config{}, newResolver(nil), d)
		for _, h := range []string{"[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[64:ff9b::7f00:1]"} {
			_, err := get(client(g), "http://"+h+":"+up.port+"/")
			wantDenied(t, err, egress.ClassLoopback)
		}
		_, err := g.DialContext(context.Background(), "tcp", "[fe80::1%lo]:"+up.port)
		wantDenied(t, err, egress.ClassAmbiguous)
		if got := d.dialled(); len(got) != 0 {
			t.Errorf("dialled %v, want nothing", got)
		}
	})
	// A mapped answer that is allowed is dialled unmapped, and reaches the
	// upstream on 127.0.0.1.
	t.Run("mapped, allowed", func(t *testing.T) {
		res := newResolver(map[string][]string{"v6.test": {"::ffff:127.0.0.1"}})
		d := &dialer{}
		body, err := get(client(guard(t, egress.Config{Allow: []string{"127.0.0.1"}}, res, d)), "http://v6.test:"+up.port+"/")
		if err != nil || body != "secret" {
			t.Fatalf("get = %q, %v", body, err)
		}
		if got := d.dialled(); len(got) != 1 || got[0] != "127.0.0.1:"+up.port {
			t.Errorf("dialled %v, want [127.0.0.1:%s]", got, up.port)
		}
	})
	if n := up.hits.Load(); n != 1 {
		t.Errorf("the upstream received %d requests, want only the allowed one", n)
	}
}

// TestGuardNumericSpellings: IPv4 addresses in the spellings inet_aton and
// browsers read (and Go's resolver does not) are refused unresolved; the
// guard is never looser than the OS resolver.
func TestGuardNumericSpellings(t *testing.T) {
	res := newResolver(nil)
	d := &dialer{}
	g := guard(t, egress.Config{Allow: []string{"8.8.8.8"}}, res, d)
	for _, h := range []string{
		"0x7f.1", "017700000001", "2130706433", "127.1", "0177.0.0.1", "0x7f000001",
		"127.0.0.1 ", "127.0.0.1\x00.evil", "1.2.3.4.5", "0x08.0x08.0x08.0x08", "010.8.8.8",
		"a..b", "", strings.Repeat("a", 254), "evil.test/x", "evil.test\r\nX: y",
	} {
		addrs, err := g.Check(context.Background(), h, "80")
		if addrs != nil {
			t.Errorf("Check(%q) = %v", h, addrs)
		}
		wantDenied(t, err, egress.ClassAmbiguous)
		var de *egress.DeniedError
		if errors.As(err, &de) && strings.ContainsAny(de.Detail(), "\x00\r\n") {
			t.Errorf("the detail of %q carries control characters: %q", h, de.Detail())
		}
	}
	if len(res.calls) != 0 || len(d.dialled()) != 0 {
		t.Errorf("looked up %v, dialled %v; want nothing", res.calls, d.dialled())
	}
	// Not even under a tool host's routed name.
	tg := guard(t, egress.Config{}, res, d, "127.0.0.1")
	_, err := tg.DialContext(egress.WithRoutedHost(context.Background(), "127.0.0.1"), "tcp", "0x7f.1:80")
	wantDenied(t, err, egress.ClassAmbiguous)
	// Standard forms pass.
	for _, h := range []string{"8.8.8.8", "[::ffff:8.8.8.8]", "::ffff:8.8.8.8"} {
		addrs, err := g.Check(context.Background(), h, "80")
		if err != nil || len(addrs) != 1 || addrs[0].String() != "8.8.8.8:80" {
			t.Errorf("Check(%q) = %v, %v; want [8.8.8.8:80]", h, addrs, err)
		}
	}
}

// TestGuardSystemResolver: with the default resolver, localhost (from
// /etc/hosts) is loopback, in any case and with a trailing dot.
func TestGuardSystemResolver(t *testing.T) {
	cfg := egress.Config{}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := egress.New(&cfg, egress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"localhost", "LOCALHOST.", "169.254.169.254", "0.0.0.0"} {
		_, err := g.Check(context.Background(), h, "80")
		var d *egress.DeniedError
		if !errors.As(err, &d) {
			t.Errorf("Check(%q) = %v, want a refusal", h, err)
		}
	}
}

func TestGuardRecordMode(t *testing.T) {
	up := newUpstream(t, nil)
	res := newResolver(map[string][]string{"internal.test": {"127.0.0.1"}})
	var mu sync.Mutex
	var reported []string
	cfg := egress.Config{Mode: egress.ModeRecord}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d := &dialer{}
	g, err := egress.New(&cfg, egress.Options{Resolver: res, Dial: d.dial, Report: func(_ context.Context, e *egress.DeniedError) {
		mu.Lock()
		reported = append(reported, net.JoinHostPort(e.Host, e.Port)+" "+string(e.Class))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(client(g), "http://internal.test:"+up.port+"/"); err != nil || body != "secret" {
		t.Fatalf("get = %q, %v; record mode lets it through", body, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "internal.test:" + up.port + " loopback"; len(reported) != 1 || reported[0] != want {
		t.Errorf("reported %v, want [%s]", reported, want)
	}
}

// blockingResolver answers nothing until its context ends.
type blockingResolver struct{}

func (blockingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestGuardLookupBounded(t *testing.T) {
	g := guard(t, egress.Config{LookupTimeout: 50 * time.Millisecond}, blockingResolver{}, &dialer{})
	done := make(chan error, 1)
	go func() {
		_, err := g.Check(context.Background(), "slow.test", "80")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, egress.ErrDenied) {
			t.Errorf("Check = %v, want the lookup's deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Check did not return: the lookup is not bounded")
	}
	// The call's own deadline bounds it too.
	g = guard(t, egress.Config{LookupTimeout: time.Hour}, blockingResolver{}, &dialer{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Check(ctx, "slow.test", "80"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Check = %v, want the call's deadline", err)
	}
}

func TestGuardMaxDialAddrs(t *testing.T) {
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprintf("8.8.4.%d", i+1))
	}
	res := newResolver(map[string][]string{"many.test": {strings.Join(many, ",")}})
	d := &dialer{}
	_, err := guard(t, egress.Config{}, res, d).DialContext(context.Background(), "tcp", "many.test:80")
	if !errors.Is(err, errUnreachable) {
		t.Errorf("dial = %v, want the first attempt's error", err)
	}
	got := d.dialled()
	if len(got) != egress.MaxDialAddrs {
		t.Fatalf("dialled %d addresses, want %d", len(got), egress.MaxDialAddrs)
	}
	for i, a := range got {
		if a != many[i]+":80" {
			t.Errorf("attempt %d dialled %s, want %s (the resolver's order)", i, a, many[i])
		}
	}
}

func TestDeniedError(t *testing.T) {
	res := newResolver(map[string][]string{"md.test": {"169.254.169.254"}})
	_, err := guard(t, egress.Config{}, res, &dialer{}).Check(context.Background(), "md.test", "80")
	var d *egress.DeniedError
	if !errors.As(err, &d) {
		t.Fatalf("Check = %v", err)
	}
	if d.Code() != bucketing.CodePolicy || d.Reason() != "egress_denied" || d.Host != "md.test" || d.Port != "80" || d.Class != egress.ClassMetadata {
		t.Errorf("refusal = %+v, code %s, reason %s", d, d.Code(), d.Reason())
	}
	if !strings.Contains(d.Detail(), "md.test:80") || !strings.Contains(d.Detail(), "metadata") || strings.Contains(d.Detail(), "169.254") {
		t.Errorf("Detail = %q: want the destination and the class, not the resolved address", d.Detail())
	}
	if !strings.Contains(d.Error(), "md.test:80") || strings.Contains(d.Error(), "169.254") {
		t.Errorf("Error = %q: want the destination, not the resolved address", d.Error())
	}
	if d.Addr != netip.MustParseAddr("169.254.169.254") {
		t.Errorf("Addr = %s, want the address refused, for the event", d.Addr)
	}
}

func TestDialContextNetworks(t *testing.T) {
	g := guard(t, egress.Config{}, newResolver(nil), &dialer{})
	if _, err := g.DialContext(context.Background(), "udp", "8.8.8.8:53"); err == nil || errors.Is(err, egress.ErrDenied) {
		t.Errorf("udp dial = %v, want an error saying only tcp is guarded", err)
	}
	if _, err := g.DialContext(context.Background(), "tcp", "8.8.8.8"); err == nil {
		t.Error("a dial without a port went through")
	}
	if _, err := g.Check(context.Background(), "8.8.8.8", "0"); err == nil || errors.Is(err, egress.ErrDenied) {
		t.Errorf("port 0 = %v, want an invalid-address error", err)
	}
}

// TestGuardFallsBackAcrossFamilies: a name whose first address (IPv6)
// never answers still connects over its IPv4 address soon, as net.Dialer's
// Happy Eyeballs would, and the hanging attempt is ended once the other
// won. Dialled one after another, the IPv6 attempt would hold the call for
// half its 30s deadline.
func TestGuardFallsBackAcrossFamilies(t *testing.T) {
	up := newUpstream(t, nil)
	res := newResolver(map[string][]string{"dual.test": {"::1,127.0.0.1"}})
	hung := make(chan error, 1)
	cfg := egress.Config{Allow: []string{"::1", "127.0.0.1"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d := &dialer{}
	g, err := egress.New(&cfg, egress.Options{Resolver: res, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "[") { // a blackholed IPv6 path: nothing answers
			<-ctx.Done()
			hung <- ctx.Err()
			return nil, ctx.Err()
		}
		return d.dial(ctx, network, addr)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := g.DialContext(ctx, "tcp", "dual.test:"+up.port)
	if err != nil {
		t.Fatalf("dial = %v, want the IPv4 fallback", err)
	}
	c.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the dial took %s: the IPv4 address waited for the IPv6 one", took)
	}
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Error("the hanging IPv6 attempt was not ended after the IPv4 one won")
	}
	if got := d.dialled(); len(got) != 1 || got[0] != "127.0.0.1:"+up.port {
		t.Errorf("dialled %v, want [127.0.0.1:%s]", got, up.port)
	}
}

// TestGuardBothFamiliesFail: when every address fails, both families were
// tried (the second at once after the first failed) and the first
// family's error is returned.
func TestGuardBothFamiliesFail(t *testing.T) {
	res := newResolver(map[string][]string{"dual.test": {"8.8.8.8,2001:4860:4860::8888"}})
	d := &dialer{}
	_, err := guard(t, egress.Config{}, res, d).DialContext(context.Background(), "tcp", "dual.test:80")
	if !errors.Is(err, errUnreachable) {
		t.Errorf("dial = %v, want the first family's failure", err)
	}
	if got := d.dialled(); len(got) != 2 || got[0] != "8.8.8.8:80" || got[1] != "[2001:4860:4860::8888]:80" {
		t.Errorf("dialled %v, want 8.8.8.8 then the IPv6 address", got)
	}
}
