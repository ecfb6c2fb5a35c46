package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// defaultDashboardListen is the dashboard's address: loopback, and not the
// admin listener's 18090, so both run on one host.
const defaultDashboardListen = "127.0.0.1:18091"

// dashboardFlags are `toolgate dashboard`'s flags.
type dashboardFlags struct {
	config      string
	addr        []string
	database    string
	username    string
	passwordEnv string
	listen      string
	allowWide   bool
	logLevel    string
}

func newDashboardCmd() *cobra.Command {
	var fl dashboardFlags
	c := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the failure dashboard over toolgate's ClickHouse tables",
		Long: `Dashboard serves the failure dashboard (failures over time by error code,
per-tool table, top validation and policy messages, envelope adoption,
sidecar freshness) over the ClickHouse database the sidecars write to, until
interrupted. It only reads: a ClickHouse user with SELECT (a readonly
profile) is enough; see docs/dashboard.md.

Name the database with --config (its events.clickhouse section) or with
--clickhouse and --database. It listens on loopback unless
--allow-non-loopback is given.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			log, err := newLogger(c.ErrOrStderr(), fl.logLevel)
			if err != nil {
				return usageError{err}
			}
			cfg, err := fl.dashboardConfig()
			if err != nil {
				return err
			}
			if err := proxy.CheckListenAddr(fl.listen, fl.allowWide); err != nil {
				return usageError{fmt.Errorf("--listen: %w", err)}
			}
			var mount func(*dashboard.Dashboard) (func() error, error)
			if fl.config != "" {
				mount = func(d *dashboard.Dashboard) (func() error, error) { return mountApprovals(c.Context(), d, fl.config) }
			}
			return serveDashboard(c.Context(), cfg, fl.listen, log, c.OutOrStdout(), mount)
		},
	}
	f := c.Flags()
	f.StringVarP(&fl.config, "config", "c", "", "toolgate configuration file whose events.clickhouse section names the database")
	f.StringSliceVar(&fl.addr, "clickhouse", nil, "ClickHouse native address(es), host:9000 (instead of --config)")
	f.StringVar(&fl.database, "database", "", "ClickHouse database (default "+dashboard.DefaultDatabase+"; with --clickhouse)")
	f.StringVar(&fl.username, "user", "", "ClickHouse user, a read-only one is enough (default \"default\"; with --clickhouse)")
	f.StringVar(&fl.passwordEnv, "password-env", "", "environment variable holding the user's password (with --clickhouse)")
	f.StringVar(&fl.listen, "listen", defaultDashboardListen, "address to serve the dashboard on")
	f.BoolVar(&fl.allowWide, "allow-non-loopback", false, "allow --listen on an address other than loopback")
	f.StringVar(&fl.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return c
}

// dashboardConfig builds the dashboard's configuration from the flags.
func (fl dashboardFlags) dashboardConfig() (dashboard.Config, error) {
	switch {
	case fl.config != "" && len(fl.addr) > 0:
		return dashboard.Config{}, usageError{errors.New("give --config or --clickhouse, not both")}
	case fl.config == "" && len(fl.addr) == 0:
		return dashboard.Config{}, usageError{errors.New("name the ClickHouse to read: --config FILE, or --clickhouse ADDR [--database DB]")}
	case fl.config != "":
		// Only the events section: the dashboard neither needs the
		// proxy's tools nor compiles or tests policies.
		ev, err := config.LoadEvents(fl.config)
		if err != nil {
			return dashboard.Config{}, err
		}
		ch := ev.ClickHouse
		if len(ch.Addr) == 0 {
			return dashboard.Config{}, fmt.Errorf("%s: events.clickhouse.addr is not set: the dashboard reads ClickHouse", fl.config)
		}
		cfg := dashboard.Config{Addr: ch.Addr, Database: ch.Database, Username: ch.Username, PasswordEnv: ch.PasswordEnv, DialTimeout: ch.DialTimeout}
		if fl.database != "" {
			cfg.Database = fl.database
		}
		if fl.username != "" {
			cfg.Username, cfg.PasswordEnv = fl.username, fl.passwordEnv
		}
		return cfg, cfg.Validate()
	default:
		cfg := dashboard.Config{Addr: fl.addr, Database: fl.database, Username: fl.username, PasswordEnv: fl.passwordEnv}
		if err := cfg.Validate(); err != nil {
			return dashboard.Config{}, usageError{err}
		}
		return cfg, nil
	}
}

// serveDashboard serves the dashboard on listen until ctx ends, printing its
// URL on out first. mount, when not nil, adds the Approvals page.
func serveDashboard(ctx context.Context, cfg dashboard.Config, listen string, log *slog.Logger, out io.Writer, mount func(*dashboard.Dashboard) (func() error, error)) error {
	d, err := dashboard.Open(cfg, log.With("component", "dashboard"))
	if err != nil {
		return err
	}
	defer d.Close()
	if mount != nil {
		closeApprovals, err := mount(d)
		if err != nil {
			return err
		}
		defer closeApprovals()
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: cfg.QueryTimeout + 10*time.Second, IdleTimeout: time.Minute}
	fmt.Fprintf(out, "dashboard      http://%s/   (ClickHouse %v, database %s; Ctrl-C stops it)\n", ln.Addr(), cfg.Addr, cfg.Database)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), sidecar.ShutdownGrace)
	defer cancel()
	return srv.Shutdown(sctx)
}
