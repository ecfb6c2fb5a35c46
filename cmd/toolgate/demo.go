package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/dashserve"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/demorun"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/proxy"
)

func newDemoCmd() *cobra.Command {
	var dir string
	var dash demorun.Dashboard
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
written to ClickHouse, database ` + demorun.Database + `, and the failure dashboard
serves them until Ctrl-C. "--clickhouse local" starts a private server
with scripts/clickhouse.sh (needs clickhouse-server; run from the
repository) and stops it at the end.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if dash.Addr != "" {
				if err := dash.Check(); err != nil {
					return err
				}
			}
			keep := dir != ""
			if !keep {
				var err error
				if dir, err = os.MkdirTemp("", "toolgate-demo-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			}
			if err := demorun.Run(c.Context(), c.OutOrStdout(), demorun.Options{Dir: dir, Keep: keep, Version: buildVersion(), Approve: demoApprove}); err != nil {
				return err
			}
			if dash.Addr == "" {
				fmt.Fprintln(c.OutOrStdout(), "\nto see these events in the failure dashboard, and the approval requests on its Approvals page (the links above):\nmake demo-dashboard (starts a private ClickHouse; needs clickhouse-server), or toolgate demo --clickhouse HOST:9000")
				return nil
			}
			return dash.Run(c.Context(), c.OutOrStdout(), dir)
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "folder for the demo's config and events, kept (default: a new temporary folder, removed at the end)")
	c.Flags().StringVar(&dash.Addr, "clickhouse", os.Getenv("TOOLGATE_DEMO_CLICKHOUSE"), "also write the events to this ClickHouse (host:9000, or \"local\" to start a private one) and serve the dashboard; default $TOOLGATE_DEMO_CLICKHOUSE")
	c.Flags().StringVar(&dash.Listen, "dashboard-listen", dashserve.DefaultListen, "address of the demo's dashboard (loopback)")
	c.Flags().StringVar(&dash.Database, "database", demorun.Database, "ClickHouse database of the demo's events (with --clickhouse)")
	c.AddCommand(newDemoUpstreamCmd())
	return c
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
				return exit.AsUsage(fmt.Errorf("--listen: %w", err))
			}
			return demotools.Serve(c.Context(), c.OutOrStdout(), listen, tlsCert)
		},
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:8000", "address to serve on (loopback)")
	c.Flags().StringVar(&tlsCert, "tls-cert", "", "serve HTTPS, writing the self-signed certificate to this file")
	return c
}

// demoApprove approves an approval request as a person would, with
// `toolgate approvals approve ID` on the demo's configuration (its file
// store, which the sidecar reads).
func demoApprove(ctx context.Context, config, id string) error {
	var out bytes.Buffer
	if code := run(ctx, []string{"approvals", "approve", id, "--config", config, "--as", "demo-operator"}, &out, &out); code != exitOK {
		return fmt.Errorf("toolgate approvals approve %s: exit %d: %s", id, code, strings.TrimSpace(out.String()))
	}
	return nil
}
