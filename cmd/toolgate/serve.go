package main

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
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/proxy"
)

// shutdownGrace bounds a graceful stop: calls under way, then the event flush.
const shutdownGrace = 10 * time.Second

func newRunCmd() *cobra.Command {
	var cfgPath, logLevel string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the sidecar with a configuration file",
		Long: `Run starts the listeners named in the configuration (forward proxy, reverse
listeners, admin) and serves until interrupted; SIGINT or SIGTERM stop it
gracefully: calls under way finish and queued events are written.

The configuration reloads while traffic flows when the file or a schema or
policy file it names changes, on SIGHUP, and on POST /reload to the admin
listener, once those files have read the same for reload.settle (250ms by
default): replace files by rename, and a half-written one is never loaded.
A reload that fails (a YAML, schema or Rego error, a failing
policy test, a listener change) leaves the configuration in force as it
was; /status, the metrics and the log say why.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			log, err := newLogger(c.ErrOrStderr(), logLevel)
			if err != nil {
				return usageError{err}
			}
			lc, err := loadConfig(cfgPath)
			if err != nil {
				return err
			}
			tuneGC()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			sc, err := startSidecar(lc, log)
			if err != nil {
				return err
			}
			sc.reload.start(hup)
			log.Info("toolgate running", "version", buildVersion(), "config", lc.path, "config_version", lc.version,
				"forward", sc.proxy.Addr("forward", 0), "transparent", sc.proxy.Addr("transparent", 0), "admin", sc.adminAddr(), "events", sc.events.where(lc.Events))
			return sc.wait(c.Context())
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", "toolgate.yaml", "configuration file")
	c.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return c
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("unknown log level %q; expected debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// sidecar is a running toolgate: the proxy, its event path and the admin
// listener, wired together.
type sidecar struct {
	cfg     atomic.Pointer[loadedConfig] // the configuration in force
	reload  *reloader
	log     *slog.Logger
	events  *eventPath
	proxy   *proxy.Server
	admin   *http.Server
	adminLn net.Listener
	ready   atomic.Bool
	errc    chan error
	started time.Time
}

// startSidecar opens the event path, binds every listener and starts serving.
// On error nothing is left running.
func startSidecar(lc *loadedConfig, log *slog.Logger) (*sidecar, error) {
	sc := &sidecar{log: log, errc: make(chan error, 2), started: time.Now()}
	sc.cfg.Store(lc)
	sc.reload = newReloader(sc, lc)
	var err error
	if sc.events, err = openEvents(lc.Events, log); err != nil {
		return nil, err
	}
	sc.proxy, err = proxy.New(lc.snapshot, proxy.Options{
		Recorder: sc.events.queue,
		Logger:   log.With("component", "proxy"),
		Sidecar:  lc.Events.Sidecar,
	})
	if err == nil {
		err = sc.proxy.Listen()
	}
	if err == nil && lc.Admin.Listen != "off" {
		sc.adminLn, err = net.Listen("tcp", lc.Admin.Listen)
		if err != nil {
			err = fmt.Errorf("listen admin on %s: %w", lc.Admin.Listen, err)
			sc.proxy.Shutdown(context.Background())
		}
	}
	if err != nil {
		sc.events.close(context.Background())
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
	return sc, nil
}

func (sc *sidecar) adminAddr() string {
	if sc.adminLn == nil {
		return ""
	}
	return sc.adminLn.Addr().String()
}

// wait serves until ctx ends or a listener fails, then stops gracefully.
func (sc *sidecar) wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
		sc.log.Info("stopping", "reason", "signal")
	case err = <-sc.errc:
		sc.log.Error("listener failed", "err", err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if serr := sc.stop(stopCtx); err == nil {
		err = serr
	}
	return err
}

// stop stops reloading and the listeners, lets calls under way finish, then
// flushes events.
func (sc *sidecar) stop(ctx context.Context) error {
	sc.ready.Store(false)
	sc.reload.stop()
	err := sc.proxy.Shutdown(ctx)
	if sc.admin != nil {
		sc.admin.Shutdown(ctx)
	}
	sc.cfg.Load().closePolicies(nil)
	if cerr := sc.events.close(ctx); err == nil {
		err = cerr
	}
	return err
}

// policyStatus lists the policies in force and what runs each.
func (lc *loadedConfig) policyStatus() []policyStatus {
	out := []policyStatus{}
	for _, name := range lc.policies.Names() {
		out = append(out, policyStatus{Name: name, Engine: lc.policies.Engine(name)})
	}
	return out
}

// adminHandler serves /healthz, /readyz, /metrics, /status, /ca.crt and
// POST /reload.
func (sc *sidecar) adminHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(sc.events.collectors()...)
	reg.MustRegister(sc.proxy, sc.reload,
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
	mux.HandleFunc("GET /ca.crt", sc.serveCA)
	if sc.cfg.Load().Admin.Pprof {
		mountPprof(mux)
	}
	return mux
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
func (sc *sidecar) serveCA(w http.ResponseWriter, _ *http.Request) {
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
	Policies      []policyStatus `json:"policies"`
	Unmatched     string         `json:"unmatched"`
	Events        eventsStatus   `json:"events"`
	Reload        reloadStatus   `json:"reload"`
}

// policyStatus is one policy in force, as /status shows it.
type policyStatus struct {
	Name   string `json:"name"`
	Engine string `json:"engine"` // compiled, interpreter or wasm
}

func (sc *sidecar) status() status {
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
		Version: buildVersion(), Config: cfg.path, ConfigVersion: cfg.version,
		Sidecar: cfg.Events.Sidecar, Started: sc.started, Ready: sc.ready.Load(),
		Listeners: map[string]any{
			"forward": sc.proxy.Addr("forward", 0), "reverse": reverse, "admin": sc.adminAddr(),
			"transparent": sc.proxy.Addr("transparent", 0),
		},
		Tools: tools, Policies: cfg.policyStatus(), Unmatched: cfg.Unmatched,
		Events: sc.events.status(cfg.Events),
		Reload: sc.reload.status(),
	}
}
