// Package sidecar runs toolgate: it starts the proxy, its event path and
// the admin listener from a loaded configuration, reloads the configuration
// while traffic flows, and stops them gracefully. cmd/toolgate's run
// command only loads the file, starts a Sidecar and waits.
package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/bundles"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/reload"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/egress"
	"github.com/toolgate/toolgate/proxy/mcppin"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/tracing"
)

// ShutdownGrace bounds a graceful stop: calls under way, then the event flush.
const ShutdownGrace = 10 * time.Second

// AdminMaxConns caps the admin listener's connections open at once (or a
// sixteenth of the descriptor limit, at least 8, when that is less; see
// fdBudget); more wait in the kernel's queue until one closes. Its callers are probes,
// scrapers, the dashboard and the approval commands, a few at a time; the
// cap keeps a flood of connections to it from using up the file
// descriptors and memory the proxy listeners serve calls with.
const AdminMaxConns = 128

// Options are how a Sidecar is run; the configuration says the rest.
type Options struct {
	// Logger receives the sidecar's log. Required.
	Logger *slog.Logger
	// Version is the build's version, shown in /status.
	Version string
	// ReloadPoll is how often the configuration's files are read for
	// changes even without a notification. Default reload.DefaultPoll (2s).
	ReloadPoll time.Duration
	// ReloadSettle overrides reload.settle when positive.
	ReloadSettle time.Duration
	// EgressResolver resolves the upstream names the proxy dials
	// (proxy.Options.EgressResolver). Tests set it to send a
	// configuration's real tool hosts to stand-ins; no flag or
	// configuration field reaches it. Default nil: the system resolver.
	EgressResolver egress.Resolver
}

// Sidecar is a running toolgate: the proxy, its event path and the admin
// listener, wired together.
type Sidecar struct {
	cfg     atomic.Pointer[config.Loaded] // the configuration in force
	version string
	reload  *reload.Watcher
	bundles *bundles.Poller
	log     *slog.Logger
	events  *eventPath
	spans   *spans // nil when tracing is off
	proxy   *proxy.Server
	admin   *http.Server
	adminLn net.Listener
	ready   atomic.Bool
	errc    chan error
	started time.Time

	closeApprovals func() error // the approval store
}

// Start opens the event path, binds every listener and starts serving. On
// error nothing is left running. The configuration reloads only on POST
// /reload until Watch is called.
func Start(lc *config.Loaded, o Options) (*Sidecar, error) {
	log := o.Logger
	sc := &Sidecar{log: log, version: o.Version, errc: make(chan error, 2), started: time.Now()}
	sc.cfg.Store(lc)
	sc.reload = newReloader(sc, lc, o)
	var err error
	if sc.bundles, err = bundles.New(lc.LoadedPolicies.Bundles(), bundleActivator{sc}, log.With("component", "bundles")); err != nil {
		return nil, err
	}
	fds := descriptorBudget(lc, log)
	if sc.events, err = openEvents(lc.Events, log); err != nil {
		return nil, err
	}
	closeFleet := lc.OpenFleet()
	gate, closeApprovals := openApprovals(lc, sc.events.ch, log)
	closeGate := func() error { err := closeApprovals(); _ = closeFleet(); return err }
	sc.closeApprovals = closeGate
	if sc.spans, err = openTracing(lc, o.Version, log); err != nil {
		closeGate()
		sc.events.close(context.Background())
		return nil, err
	}
	sc.proxy, err = proxy.New(lc.Snapshot, proxy.Options{
		Recorder: sc.events.queue,
		Logger:   log.With("component", "proxy"),
		Sidecar:  lc.Events.Sidecar,
		Tracer:   sc.spans.tracer(),
		Approver: gate,
		Events:   sc.events.gate(lc.Events),

		MaxCallerConns: fds.Callers,
		EgressResolver: o.EgressResolver,
	})
	if err == nil {
		err = sc.proxy.Listen()
	}
	if err == nil && lc.Admin.Listen != "off" {
		var ln net.Listener
		ln, err = net.Listen("tcp", lc.Admin.Listen)
		if err != nil {
			err = fmt.Errorf("listen admin on %s: %w", lc.Admin.Listen, err)
			sc.proxy.Shutdown(context.Background())
		} else {
			sc.adminLn = netutil.LimitListener(ln, fds.Admin)
		}
	}
	if err != nil {
		sc.spans.close(context.Background())
		sc.events.close(context.Background())
		closeGate()
		return nil, err
	}
	go func() { sc.errc <- sc.proxy.Serve() }()
	if sc.adminLn != nil {
		// The admin listener's callers are probes and scrapers: every read
		// is bounded, so a stalled client cannot hold a connection for long.
		sc.admin = &http.Server{Handler: sc.adminHandler(), ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		go func() {
			if err := sc.admin.Serve(sc.adminLn); !errors.Is(err, http.ErrServerClosed) {
				sc.errc <- err
			}
		}()
	}
	sc.ready.Store(true)
	sc.bundles.Start()
	return sc, nil
}

// Watch starts reloading the configuration when its files change and when
// signals delivers a value, until the sidecar stops.
func (sc *Sidecar) Watch(signals <-chan os.Signal) { sc.reload.Start(signals) }

// AdminAddr is the admin listener's address; "" when it is off.
func (sc *Sidecar) AdminAddr() string {
	if sc.adminLn == nil {
		return ""
	}
	return sc.adminLn.Addr().String()
}

// ProxyAddr is the address of a proxy listener ("forward", "transparent"
// or "reverse" with its index); "" when there is none.
func (sc *Sidecar) ProxyAddr(kind string, i int) string { return sc.proxy.Addr(kind, i) }

// Destination names where events go, for the log.
func (sc *Sidecar) Destination() string { return sc.events.where(sc.cfg.Load().Events) }

// QueueStats are the event queue's counters.
func (sc *Sidecar) QueueStats() sink.QueueStats { return sc.events.queue.Stats() }

// Wait serves until ctx ends or a listener fails, then stops gracefully.
func (sc *Sidecar) Wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
		sc.log.Info("stopping", "reason", "signal")
	case err = <-sc.errc:
		sc.log.Error("listener failed", "err", err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if serr := sc.Stop(stopCtx); err == nil {
		err = serr
	}
	return err
}

// Stop stops reloading and the listeners, lets calls under way finish, then
// flushes events, then spans (when tracing is on).
func (sc *Sidecar) Stop(ctx context.Context) error {
	sc.ready.Store(false)
	sc.bundles.Stop()
	sc.reload.Stop()
	err := sc.proxy.Shutdown(ctx)
	if sc.admin != nil {
		sc.admin.Shutdown(ctx)
	}
	sc.cfg.Load().ClosePolicies(nil)
	if cerr := sc.events.close(ctx); err == nil {
		err = cerr
	}
	if cerr := sc.spans.close(ctx); err == nil {
		err = cerr
	}
	if cerr := sc.closeApprovals(); err == nil {
		err = cerr
	}
	return err
}

// policiesInForce lists the policies of lc and what runs each.
func policiesInForce(lc *config.Loaded) []PolicyStatus {
	out := []PolicyStatus{}
	for _, name := range lc.LoadedPolicies.Names() {
		out = append(out, PolicyStatus{Name: name, Engine: lc.LoadedPolicies.Engine(name), FirstPass: lc.LoadedPolicies.FirstPass(name)})
	}
	return out
}

// adminHandler serves /healthz, /readyz, /metrics, /status, /ca.crt,
// GET /mcp/pins/changes, POST /reload and POST /mcp/pins/accept, behind
// guardAdmin.
func (sc *Sidecar) adminHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(sc.events.collectors()...)
	reg.MustRegister(sc.spans.collectors()...)
	reg.MustRegister(sc.proxy, sc.reload, budgetCollector{sc}, sc.bundles,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !sc.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if !sc.bundles.Ready() {
			http.Error(w, "not ready: a policy bundle has not been activated yet", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(sc.status())
	})
	mux.Handle("POST /reload", sc.reload)
	mux.HandleFunc("GET /mcp/pins/changes", sc.servePinChanges)
	mux.HandleFunc("POST /mcp/pins/accept", sc.servePinAccept)
	mux.HandleFunc("GET /ca.crt", sc.serveCA)
	if sc.cfg.Load().Admin.Pprof {
		mountPprof(mux)
	}
	return guardAdmin(mux, sc.cfg.Load().Admin.Token())
}

// mountPprof serves Go's profiler under /debug/pprof/ (admin.pprof), to
// loopback callers only.
func mountPprof(mux *http.ServeMux) {
	loopback := func(h http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				http.Error(w, "pprof answers loopback callers only", http.StatusForbidden)
				return
			}
			h(w, r)
		})
	}
	mux.Handle("GET /debug/pprof/", loopback(pprof.Index))
	mux.Handle("GET /debug/pprof/cmdline", loopback(pprof.Cmdline))
	mux.Handle("GET /debug/pprof/profile", loopback(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", loopback(pprof.Symbol))
	mux.Handle("POST /debug/pprof/symbol", loopback(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", loopback(pprof.Trace))
}

// serveCA answers the interception CA's certificate (PEM), or 404 when
// none is configured.
func (sc *Sidecar) serveCA(w http.ResponseWriter, _ *http.Request) {
	ca := sc.cfg.Load().TLS.CA()
	if ca == nil {
		http.Error(w, "no interception CA is configured (tls.ca_cert)", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(ca.CertPEM())
}

// status is the admin /status document.
type status struct {
	Version       string         `json:"version"`
	Config        string         `json:"config"`
	ConfigVersion string         `json:"config_version"`
	Sidecar       string         `json:"sidecar"`
	Started       time.Time      `json:"started"`
	Ready         bool           `json:"ready"`
	Listeners     map[string]any `json:"listeners"`
	Tools         []string       `json:"tools"`
	Policies      []PolicyStatus `json:"policies"`
	Unmatched     string         `json:"unmatched"`
	Events        eventsStatus   `json:"events"`
	Reload        ReloadStatus   `json:"reload"`
	// Tracing is the span exporter's counters; absent when tracing is off.
	Tracing *tracing.Stats `json:"tracing,omitempty"`
	Bundles []BundleStatus `json:"bundles,omitempty"`
	// MCPUnlistedNames are configured MCP tool names the servers that
	// listed their tools do not list (proxy.UnlistedName); absent when
	// none.
	MCPUnlistedNames []proxy.UnlistedName `json:"mcp_unlisted_names,omitempty"`
	// MCPUnusableSchemas lists the MCP tools whose listed inputSchema
	// could not check their calls (too large, too complex, not
	// compilable); their calls pass unchecked or are refused as
	// mcp.unchecked says. Absent when there are none.
	MCPUnusableSchemas []proxy.UnusableSchema `json:"mcp_unusable_schemas,omitempty"`
	// MCPSchemaKeywords lists the MCP tools whose listed inputSchema holds
	// keywords its draft does not define (a typo such as "maxium"): the
	// rest of the schema checks their calls, those keywords check nothing.
	// Absent when there are none.
	MCPSchemaKeywords []proxy.ListedKeywords `json:"mcp_schema_unknown_keywords,omitempty"`
	// State is the fleet's shared state (state.redis); absent without it.
	State *StateStatus `json:"state,omitempty"`
	// MCPPinChanges lists the MCP tools whose definitions wait for an
	// operator's decision (changed, removed, or not yet reviewed; GET
	// /mcp/pins/changes); absent when none.
	MCPPinChanges []mcppin.Verdict `json:"mcp_pin_changes,omitempty"`
}

// StateStatus is the "state" object of /status: the fleet's Redis and
// whether limits are falling back to on_unavailable (degraded).
type StateStatus struct {
	// Backend is "redis".
	Backend string `json:"backend"`
	// Mode is standalone, sentinel or cluster (as configured; "" auto).
	Mode string `json:"mode"`
	// Degraded is true while Redis cannot answer in time: budgets, loops
	// and rates are decided by their on_unavailable, grant uses refused.
	Degraded bool `json:"degraded"`
	// Errors counts the calls Redis did not answer in time.
	Errors int64 `json:"errors"`
	// BreakerOpens counts the times the circuit breaker opened.
	BreakerOpens int64 `json:"breaker_opens"`
}

// PolicyStatus is one policy in force, as /status shows it.
type PolicyStatus struct {
	Name   string `json:"name"`
	Engine string `json:"engine"` // compiled, interpreter or wasm
	// FirstPass: the compiled engine decides the policy's common calls
	// in its first pass over the rules (docs/policies.md#engines).
	FirstPass bool `json:"first_pass"`
}

func (sc *Sidecar) status() status {
	// The reload's and the bundles' state first: a reload (or a bundle's
	// activation) puts its configuration in force before it records
	// itself, so a document whose reload says version X is in force also
	// shows X as config_version. Read the other way, a reload finishing
	// between the two reads showed its new version under reload beside
	// the old config_version (TestReloadSchemaFileEdit saw it once on a
	// loaded machine).
	reloadStatus, bundleStatus := sc.reload.Status(), sc.bundles.Status()
	cfg := sc.cfg.Load()
	var reverse []string
	for i := range cfg.Listen.Reverse {
		reverse = append(reverse, sc.proxy.Addr("reverse", i)+" -> "+cfg.Listen.Reverse[i].Upstream)
	}
	tools := make([]string, len(cfg.Tools))
	for i, t := range cfg.Tools {
		tools[i] = t.Name
	}
	return status{
		Version: sc.version, Config: cfg.Path, ConfigVersion: cfg.Version,
		Sidecar: cfg.Events.Sidecar, Started: sc.started, Ready: sc.ready.Load(),
		Listeners: map[string]any{
			"forward": sc.proxy.Addr("forward", 0), "reverse": reverse, "admin": sc.AdminAddr(),
			"transparent": sc.proxy.Addr("transparent", 0),
		},
		Tools: tools, Policies: policiesInForce(cfg), Unmatched: cfg.Unmatched,
		Events:  sc.events.status(cfg.Events),
		Reload:  reloadStatus,
		Tracing: sc.spans.stats(),
		Bundles: bundleStatus, MCPUnlistedNames: sc.proxy.UnlistedNames(),
		MCPUnusableSchemas: sc.proxy.UnusableSchemas(),
		MCPSchemaKeywords:  sc.proxy.ListedSchemaKeywords(),
		State:              stateStatus(cfg),
		MCPPinChanges:      sc.proxy.PinChanges(),
	}
}

// stateStatus is /status's state object, nil without state.redis.
func stateStatus(cfg *config.Loaded) *StateStatus {
	if cfg.Fleet == nil {
		return nil
	}
	return &StateStatus{Backend: "redis", Mode: cfg.State.Redis.Mode, Degraded: cfg.Fleet.Degraded(),
		Errors: cfg.Fleet.Errors(), BreakerOpens: cfg.Fleet.BreakerOpens()}
}
