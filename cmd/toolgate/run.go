package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
)

func newRunCmd() *cobra.Command {
	var cfgPath, logLevel string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the sidecar with a configuration file",
		Long: `Run starts the listeners named in the configuration (forward proxy, reverse
listeners, the transparent listener iptables redirects to on Linux, admin)
and serves until interrupted; SIGINT or SIGTERM stop it gracefully: calls
under way finish and queued events are written. The "toolgate running" log
line names every listener's address.

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
				return exit.AsUsage(err)
			}
			if err := checkConfigGiven(c, cfgPath); err != nil {
				return err
			}
			lc, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			tuneGC()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			sc, err := sidecar.Start(lc, sidecar.Options{Logger: log, Version: buildVersion()})
			if err != nil {
				return err
			}
			sc.Watch(hup)
			log.Info("toolgate running", "version", buildVersion(), "config", lc.Path, "config_version", lc.Version,
				"forward", sc.ProxyAddr("forward", 0), "reverse", reverseAddrs(sc), "transparent", sc.ProxyAddr("transparent", 0),
				"admin", sc.AdminAddr(), "events", sc.Destination())
			return sc.Wait(c.Context())
		},
	}
	c.Flags().StringVarP(&cfgPath, "config", "c", defaultConfig, "configuration file")
	c.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return c
}

// reverseAddrs lists the reverse listeners' addresses, in configuration
// order ("listen.reverse[i]"); empty when there are none.
func reverseAddrs(sc *sidecar.Sidecar) []string {
	addrs := []string{}
	for i := 0; ; i++ {
		a := sc.ProxyAddr("reverse", i)
		if a == "" {
			return addrs
		}
		addrs = append(addrs, a)
	}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("unknown log level %q; expected debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}
