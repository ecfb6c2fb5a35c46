package main

import (
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/dashserve"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/sink/dashboard"
)

func newDashboardCmd() *cobra.Command {
	var fl dashserve.Options
	var logLevel string
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
--allow-non-loopback is given, or on a Unix socket (--listen unix:/PATH,
with --socket-mode). With --tls-cert and --tls-key it serves HTTPS; with
--client-ca too, only clients presenting a certificate that CA issued (the
authenticating front) are served. Who may decide on the Approvals page is
approvals.deciders; see docs/approvals.md#deciders.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			log, err := newLogger(c.ErrOrStderr(), logLevel)
			if err != nil {
				return exit.AsUsage(err)
			}
			return dashserve.Run(c.Context(), fl, log, c.OutOrStdout())
		},
	}
	f := c.Flags()
	f.StringVarP(&fl.Config, "config", "c", "", "toolgate configuration file whose events.clickhouse section names the database")
	f.StringSliceVar(&fl.Addr, "clickhouse", nil, "ClickHouse native address(es), host:9000 (instead of --config)")
	f.StringVar(&fl.Database, "database", "", "ClickHouse database (default "+dashboard.DefaultDatabase+"; with --clickhouse)")
	f.StringVar(&fl.Username, "user", "", "ClickHouse user, a read-only one is enough (default \"default\"; with --clickhouse)")
	f.StringVar(&fl.PasswordEnv, "password-env", "", "environment variable holding the user's password (with --clickhouse)")
	f.StringVar(&fl.Listen, "listen", dashserve.DefaultListen, "address to serve the dashboard on: host:port, or unix:/PATH for a Unix socket")
	f.StringVar(&fl.SocketMode, "socket-mode", "0660", "file permissions of the Unix socket of --listen unix:/PATH (octal)")
	f.StringVar(&fl.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	f.StringVar(&fl.TLSKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	f.StringVar(&fl.ClientCA, "client-ca", "", "serve only clients whose certificate this CA (PEM) issued: the authenticating front's (needs --tls-cert)")
	f.BoolVar(&fl.AllowWide, "allow-non-loopback", false, "allow --listen on an address other than loopback")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return c
}
