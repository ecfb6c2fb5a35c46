package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/demo"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// demoDatabase is the ClickHouse database the demo's events go to, apart
// from a real deployment's "toolgate".
const demoDatabase = "toolgate_demo"

// demoCodes are the footer's error codes: ok, then bucketing's codes in
// the envelope's order; each is shown, with 0 when no call got it.
var demoCodes = func() []string {
	codes := []string{string(bucketing.CodeOK)}
	for _, c := range bucketing.Codes() {
		codes = append(codes, string(c))
	}
	return codes
}()

// demoPolicies is the legend printed above the demo's table: which policies
// decide which tools, and how.
const demoPolicies = `policies       edit_approval (Rego, enforce) on docs_edit: a deletion waits for a person's approval; a reversed range is refused
               pii_guard (Rego, dry_run) on drug_targets: e-mail or phone in free text
               session_inject (Rego, inject) on session_echo: X-Session-Id upstream
               label_guard (WASM module, toolgate ABI, in wazero) on notes_create: nothing CONFIDENTIAL
approvals      the demo approves as a person would: toolgate approvals approve ID --as demo-operator

`

func newDemoCmd() *cobra.Command {
	var dir string
	var dash demoDashboard
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the sidecar in front of bundled demo tools and play a legacy client's calls",
		Long: `Demo starts the bundled demo upstream (literature search, structure lookup,
drug targets, document edits, and every failure the status table buckets),
starts the sidecar with the embedded demo configuration, plays a script of
calls as a legacy client would (through http_proxy or a base URL; some asking
for the envelope, some not; some with typos, missing fields and wrong types;
some decided by Rego policies, enforced, in dry run and injecting a header,
and by a WASM module; a deletion that waits for a person's approval, which
the demo gives with toolgate approvals approve), and prints what came back
and the event recorded for each. Nothing else is needed; the temporary
folder is removed at the end (--dir keeps the configuration and events).

With --clickhouse (or TOOLGATE_DEMO_CLICKHOUSE) the demo's events are also
written to ClickHouse, database ` + demoDatabase + `, and the failure dashboard
serves them until Ctrl-C. "--clickhouse local" starts a private server
with scripts/clickhouse.sh (needs clickhouse-server; run from the
repository) and stops it at the end.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			keep := dir != ""
			if !keep {
				var err error
				if dir, err = os.MkdirTemp("", "toolgate-demo-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			if err := runDemo(c.Context(), c.OutOrStdout(), dir, keep); err != nil {
				return err
			}
			if dash.addr == "" {
				fmt.Fprintln(c.OutOrStdout(), "\nto see these events in the failure dashboard: make demo-dashboard (starts a private ClickHouse), or toolgate demo --clickhouse HOST:9000")
				return nil
			}
			return dash.run(c.Context(), c.OutOrStdout(), dir)
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "folder for the demo's config and events, kept (default: a new temporary folder, removed at the end)")
	c.Flags().StringVar(&dash.addr, "clickhouse", os.Getenv("TOOLGATE_DEMO_CLICKHOUSE"), "also write the events to this ClickHouse (host:9000, or \"local\" to start a private one) and serve the dashboard; default $TOOLGATE_DEMO_CLICKHOUSE")
	c.Flags().StringVar(&dash.listen, "dashboard-listen", defaultDashboardListen, "address of the demo's dashboard (loopback)")
	c.AddCommand(newDemoUpstreamCmd())
	return c
}

// demoDashboard is the demo's optional ClickHouse and dashboard.
type demoDashboard struct {
	addr   string // host:port, or "local"
	listen string
}

// run writes the events the demo recorded (dir/events.ndjson) into
// ClickHouse and serves the dashboard over them, with the Approvals page
// over the demo's approval requests, until ctx ends.
func (dd demoDashboard) run(ctx context.Context, out io.Writer, dir string) error {
	if err := proxy.CheckListenAddr(dd.listen, false); err != nil {
		return usageError{fmt.Errorf("--dashboard-listen: %w", err)}
	}
	addr := dd.addr
	if addr == "local" {
		chDir := filepath.Join(dir, "clickhouse")
		a, stop, err := startLocalClickHouse(chDir)
		if err != nil {
			return err
		}
		defer stop()
		addr = a
		fmt.Fprintf(out, "\nclickhouse     %s   (private server in %s, stopped at the end)\n", addr, chDir)
	}
	f, err := os.Open(filepath.Join(dir, "events.ndjson"))
	if err != nil {
		return err
	}
	evs, err := sink.ReadEvents(f)
	f.Close()
	if err != nil {
		return err
	}
	ch, err := clickhouse.Open(ctx, clickhouse.Config{Addr: []string{addr}, Database: demoDatabase, Username: "default",
		DialTimeout: clickhouse.DefaultDialTimeout, WriteTimeout: clickhouse.DefaultWriteTimeout, RetentionDays: -1}, nil)
	if err != nil {
		return err
	}
	err = ch.WriteEvents(ctx, evs)
	ch.Close()
	if err != nil {
		return fmt.Errorf("demo: write events to ClickHouse %s: %w", addr, err)
	}
	fmt.Fprintf(out, "%d events also written to ClickHouse %s, database %s\n", len(evs), addr, demoDatabase)
	cfg := dashboard.Config{Addr: []string{addr}, Database: demoDatabase}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The Approvals page, read-only (the demo names no deciders), over the
	// demo's approval file: the page its pending answers point at.
	mount := func(d *dashboard.Dashboard) (func() error, error) {
		return mountApprovals(ctx, d, filepath.Join(dir, "toolgate.yaml"), dd.listen, false)
	}
	return serveDashboard(ctx, cfg, dashListen{addr: dd.listen}, slog.New(slog.DiscardHandler), out, mount)
}

// startLocalClickHouse starts a private ClickHouse in dir with
// scripts/clickhouse.sh and returns its address and how to stop it.
func startLocalClickHouse(dir string) (string, func(), error) {
	script := filepath.Join("scripts", "clickhouse.sh")
	if _, err := os.Stat(script); err != nil {
		return "", nil, fmt.Errorf("--clickhouse local needs %s: run the demo from the repository's root (make demo-dashboard)", script)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script, "start", dir)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("start a private ClickHouse (%s start %s): %v: %s", script, dir, err, strings.TrimSpace(stderr.String()))
	}
	addr := strings.TrimSpace(string(b))
	stop := func() { _ = exec.Command("bash", script, "stop", dir).Run() }
	return addr, stop, nil
}

// runDemo plays the demo with its configuration and events in dir; keep
// says whether dir outlives the demo (--dir), which the footer tells.
func runDemo(ctx context.Context, out io.Writer, dir string, keep bool) error {
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("start demo upstream: %w", err)
	}
	defer up.Close()
	events := filepath.Join(dir, "events.ndjson")
	os.Remove(events)
	path, err := demo.WriteConfig(dir, up.URL(), events)
	if err != nil {
		return err
	}
	lc, err := config.Load(path)
	if err != nil {
		return err
	}
	sc, err := sidecar.Start(lc, sidecar.Options{Logger: slog.New(slog.DiscardHandler), Version: buildVersion()})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo upstream  %s\nforward proxy  http://%s   (the legacy client's http_proxy)\nreverse        http://%s -> %s   (the legacy client's base URL)\nadmin          http://%s/metrics\n\n",
		up.URL(), sc.ProxyAddr("forward", 0), sc.ProxyAddr("reverse", 0), up.URL(), sc.AdminAddr())
	fmt.Fprint(out, demoPolicies)
	results := demo.Play(ctx, demo.Endpoints{
		Upstream: up.URL(),
		Forward:  sc.ProxyAddr("forward", 0),
		Reverse:  "http://" + sc.ProxyAddr("reverse", 0),
		Approve:  demoApprover(path),
	}, demo.Script())
	stopCtx, cancel := context.WithTimeout(context.Background(), sidecar.ShutdownGrace)
	defer cancel()
	if err := sc.Stop(stopCtx); err != nil {
		return err
	}
	stats := sc.QueueStats()
	f, err := os.Open(events)
	if err != nil {
		return err
	}
	defer f.Close()
	evs, err := sink.ReadEvents(f)
	if err != nil {
		return err
	}
	demo.PrintTable(out, results, evs)
	byCode := map[string]int{}
	for _, e := range evs {
		code := e.ErrorCode
		if code == "" {
			code = "ok"
		}
		byCode[code]++
	}
	where := events
	if !keep {
		where = "a temporary folder, removed at the end (--dir DIR keeps them)"
	}
	fmt.Fprintf(out, "\n%d calls, %d events (dropped: %d) written to %s\nby error_code:", len(results), len(evs), stats.Dropped, where)
	for _, k := range demoCodes {
		fmt.Fprintf(out, " %s=%d", k, byCode[k])
		delete(byCode, k)
	}
	others := make([]string, 0, len(byCode))
	for k := range byCode {
		others = append(others, k)
	}
	sort.Strings(others)
	for _, k := range others {
		fmt.Fprintf(out, " %s=%d", k, byCode[k])
	}
	fmt.Fprintf(out, "   (unknown above 0 is a bug in bucketing)\nupstream saw %d requests; refused calls never reached it.\n", up.TotalHits())
	if keep {
		fmt.Fprintf(out, "config used: %s\n", path)
	}
	return nil
}

// newDemoUpstreamCmd is `toolgate demo upstream`: the demo's upstream alone,
// a stand-in for the reader's own service in docs/quickstart.md.
func newDemoUpstreamCmd() *cobra.Command {
	var listen, tlsCert string
	c := &cobra.Command{
		Use:   "upstream [--listen ADDR] [--tls-cert FILE]",
		Short: "Serve only the demo upstream, a stand-in for your own service",
		Long: `Upstream serves the bundled demo upstream (literature search at /esearch,
structure lookup, drug targets, document edits, notes, /echo and the
/faults routes; GET / lists them) until Ctrl-C, so the quick start
(docs/quickstart.md) can put toolgate in front of a service without
writing one.

With --tls-cert it serves HTTPS with a new self-signed certificate for
127.0.0.1 and localhost, written to FILE (PEM), for a configuration's
tls.upstream_ca.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := proxy.CheckListenAddr(listen, false); err != nil {
				return usageError{fmt.Errorf("--listen: %w", err)}
			}
			return demotools.Serve(c.Context(), c.OutOrStdout(), listen, tlsCert)
		},
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:8000", "address to serve on (loopback)")
	c.Flags().StringVar(&tlsCert, "tls-cert", "", "serve HTTPS, writing the self-signed certificate to this file")
	return c
}

// demoApprover approves an approval request as a person would, with
// `toolgate approvals approve ID` on the demo's configuration (its file
// store, which the sidecar reads).
func demoApprover(config string) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		var out bytes.Buffer
		if code := run(ctx, []string{"approvals", "approve", id, "--config", config, "--as", "demo-operator"}, &out, &out); code != exitOK {
			return fmt.Errorf("toolgate approvals approve %s: exit %d: %s", id, code, strings.TrimSpace(out.String()))
		}
		return nil
	}
}
