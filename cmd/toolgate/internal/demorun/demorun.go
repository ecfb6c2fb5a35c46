// Package demorun runs `toolgate demo`: the bundled demo upstream and a
// sidecar with the demo configuration, the script of a legacy client's
// calls (internal/demo), the table of answers and events, and, with
// --clickhouse, the events in ClickHouse and the failure dashboard over
// them.
package demorun

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/approvalcmd"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/dashserve"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/demo"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// Database is the ClickHouse database the demo's events go to, apart
// from a real deployment's "toolgate".
const Database = "toolgate_demo"

// footerCodes are the footer's error codes: ok, then bucketing's codes in
// the envelope's order; each is shown, with 0 when no call got it.
var footerCodes = func() []string {
	codes := []string{string(bucketing.CodeOK)}
	for _, c := range bucketing.Codes() {
		codes = append(codes, string(c))
	}
	return codes
}()

// legend is printed above the demo's table: which policies
// decide which tools, and how.
const legend = `policies       edit_approval (Rego, enforce) on docs_edit: a deletion waits for a person's approval; a reversed range is refused
               pii_guard (Rego, dry_run) on drug_targets: e-mail or phone in free text
               session_inject (Rego, inject) on session_echo: X-Session-Id upstream
               label_guard (WASM module, toolgate ABI, in wazero) on notes_create: nothing CONFIDENTIAL
approvals      the demo approves as a person would: toolgate approvals approve ID --as demo-operator
               the pending rows link to the Approvals page: make demo-dashboard serves it (make demo does not)

`

// Dashboard is the demo's optional ClickHouse and dashboard.
type Dashboard struct {
	Addr     string // --clickhouse: host:port, or "local"
	Listen   string // --dashboard-listen: the dashboard's address (loopback)
	Database string // --database: the database the events go to ("": Database)
}

// Check reports a flag of the dashboard's that cannot work, as a usage
// error, so the demo can refuse it before it plays.
func (dd Dashboard) Check() error {
	if err := proxy.CheckListenAddr(dd.Listen, false); err != nil {
		return exit.AsUsage(fmt.Errorf("--dashboard-listen: %w", err))
	}
	if err := (&dashboard.Config{Addr: []string{dd.Addr}, Database: dd.database()}).Validate(); err != nil {
		return exit.AsUsage(fmt.Errorf("--database: %w", err))
	}
	return nil
}

// database is the database the demo's events go to.
func (dd Dashboard) database() string { return cmp.Or(dd.Database, Database) }

// Run writes the events the demo recorded (dir/events.ndjson) into
// ClickHouse and serves the dashboard over them, with the Approvals page
// over the demo's approval requests, until ctx ends.
func (dd Dashboard) Run(ctx context.Context, out io.Writer, dir string) error {
	if err := dd.Check(); err != nil {
		return err
	}
	db := dd.database()
	addr := dd.Addr
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
	ch, err := clickhouse.Open(ctx, clickhouse.Config{Addr: []string{addr}, Database: db, Username: "default",
		DialTimeout: clickhouse.DefaultDialTimeout, WriteTimeout: clickhouse.DefaultWriteTimeout, RetentionDays: -1}, nil)
	if err != nil {
		return err
	}
	err = ch.WriteEvents(ctx, evs)
	ch.Close()
	if err != nil {
		return fmt.Errorf("demo: write events to ClickHouse %s: %w", addr, err)
	}
	fmt.Fprintf(out, "%d events also written to ClickHouse %s, database %s\n", len(evs), addr, db)
	cfg := dashboard.Config{Addr: []string{addr}, Database: db}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The Approvals page, read-only (the demo names no deciders), over the
	// demo's approval file: the page its pending answers point at.
	mount := func(d *dashboard.Dashboard) (func() error, error) {
		return approvalcmd.Mount(ctx, d, filepath.Join(dir, "toolgate.yaml"), dd.Listen, false)
	}
	return dashserve.Serve(ctx, cfg, dashserve.Listen{Addr: dd.Listen}, slog.New(slog.DiscardHandler), out, mount)
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

// Options are how a demo runs.
type Options struct {
	// Dir holds the demo's configuration and events.
	Dir string
	// Keep says whether Dir outlives the demo (--dir), which the footer
	// tells.
	Keep bool
	// Version is the sidecar's version, as run reports it.
	Version string
	// Approve approves the approval request id as a person would, with the
	// configuration file config.
	Approve func(ctx context.Context, config, id string) error
}

// Run plays the demo: it starts the demo upstream and the sidecar with the
// demo's configuration in o.Dir, plays the script as a legacy client, and
// prints each call's answer and event, then the footer, on out.
func Run(ctx context.Context, out io.Writer, o Options) error {
	dir, keep := o.Dir, o.Keep
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
	sc, err := sidecar.Start(lc, sidecar.Options{Logger: slog.New(slog.DiscardHandler), Version: o.Version})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo upstream  %s\nforward proxy  http://%s   (the legacy client's http_proxy)\nreverse        http://%s -> %s   (the legacy client's base URL)\nadmin          http://%s/metrics\n\n",
		up.URL(), sc.ProxyAddr("forward", 0), sc.ProxyAddr("reverse", 0), up.URL(), sc.AdminAddr())
	fmt.Fprint(out, legend)
	results := demo.Play(ctx, demo.Endpoints{
		Upstream: up.URL(),
		Forward:  sc.ProxyAddr("forward", 0),
		Reverse:  "http://" + sc.ProxyAddr("reverse", 0),
		Approve:  func(ctx context.Context, id string) error { return o.Approve(ctx, path, id) },
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
	for _, k := range footerCodes {
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
