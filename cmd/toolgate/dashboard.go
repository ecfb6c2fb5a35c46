package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	socketMode  string
	tlsCert     string
	tlsKey      string
	clientCA    string
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
--allow-non-loopback is given, or on a Unix socket (--listen unix:/PATH,
with --socket-mode). With --tls-cert and --tls-key it serves HTTPS; with
--client-ca too, only clients presenting a certificate that CA issued (the
authenticating front) are served. Who may decide on the Approvals page is
approvals.deciders; see docs/approvals.md#deciders.`,
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
			if _, ok := unixSocket(fl.listen); !ok {
				if err := proxy.CheckListenAddr(fl.listen, fl.allowWide); err != nil {
					return usageError{fmt.Errorf("--listen: %w", err)}
				}
			}
			mode, err := strconv.ParseUint(fl.socketMode, 8, 32)
			if err != nil || mode > 0o777 || mode == 0 {
				return usageError{fmt.Errorf("--socket-mode: %q; want octal permissions such as 0660", fl.socketMode)}
			}
			tlsCfg, err := fl.serverTLS()
			if err != nil {
				return err
			}
			_, viaSocket := unixSocket(fl.listen)
			frontOnly := viaSocket || (tlsCfg != nil && tlsCfg.ClientCAs != nil)
			var mount func(*dashboard.Dashboard) (func() error, error)
			if fl.config != "" {
				mount = func(d *dashboard.Dashboard) (func() error, error) {
					return mountApprovals(c.Context(), d, fl.config, fl.listen, frontOnly)
				}
			}
			return serveDashboard(c.Context(), cfg, dashListen{addr: fl.listen, mode: os.FileMode(mode), tls: tlsCfg}, log, c.OutOrStdout(), mount)
		},
	}
	f := c.Flags()
	f.StringVarP(&fl.config, "config", "c", "", "toolgate configuration file whose events.clickhouse section names the database")
	f.StringSliceVar(&fl.addr, "clickhouse", nil, "ClickHouse native address(es), host:9000 (instead of --config)")
	f.StringVar(&fl.database, "database", "", "ClickHouse database (default "+dashboard.DefaultDatabase+"; with --clickhouse)")
	f.StringVar(&fl.username, "user", "", "ClickHouse user, a read-only one is enough (default \"default\"; with --clickhouse)")
	f.StringVar(&fl.passwordEnv, "password-env", "", "environment variable holding the user's password (with --clickhouse)")
	f.StringVar(&fl.listen, "listen", defaultDashboardListen, "address to serve the dashboard on: host:port, or unix:/PATH for a Unix socket")
	f.StringVar(&fl.socketMode, "socket-mode", "0660", "file permissions of the Unix socket of --listen unix:/PATH (octal)")
	f.StringVar(&fl.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	f.StringVar(&fl.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	f.StringVar(&fl.clientCA, "client-ca", "", "serve only clients whose certificate this CA (PEM) issued: the authenticating front's (needs --tls-cert)")
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

// serverTLS is the dashboard's TLS configuration from the flags; nil for
// plain HTTP.
func (fl dashboardFlags) serverTLS() (*tls.Config, error) {
	switch {
	case fl.tlsCert == "" && fl.tlsKey == "" && fl.clientCA == "":
		return nil, nil
	case fl.tlsCert == "" || fl.tlsKey == "":
		return nil, usageError{errors.New("--tls-cert and --tls-key go together (and --client-ca needs them)")}
	}
	cert, err := tls.LoadX509KeyPair(fl.tlsCert, fl.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if fl.clientCA != "" {
		pem, err := os.ReadFile(fl.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %w", err)
		}
		c.ClientCAs = x509.NewCertPool()
		if !c.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-ca: %s holds no PEM certificate", fl.clientCA)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// dashListen is where the dashboard listens: addr (host:port or
// unix:/PATH), the Unix socket's mode, and TLS (nil for plain HTTP).
type dashListen struct {
	addr string
	mode os.FileMode
	tls  *tls.Config
}

// serveDashboard serves the dashboard on ln until ctx ends, printing its
// URL on out first. mount, when not nil, adds the Approvals page.
func serveDashboard(ctx context.Context, cfg dashboard.Config, dl dashListen, log *slog.Logger, out io.Writer, mount func(*dashboard.Dashboard) (func() error, error)) error {
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
	ln, where, err := listenDashboard(dl.addr, dl.mode)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	defer ln.Close()
	if dl.tls != nil {
		ln = tls.NewListener(ln, dl.tls)
		where = strings.Replace(where, "http", "https", 1)
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: cfg.QueryTimeout + 10*time.Second, IdleTimeout: time.Minute}
	fmt.Fprintf(out, "dashboard      %s   (ClickHouse %v, database %s; Ctrl-C stops it)\n", where, cfg.Addr, cfg.Database)
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

// unixSocket returns the path of a listen address of the form unix:/PATH.
func unixSocket(listen string) (string, bool) {
	p, ok := strings.CutPrefix(listen, "unix:")
	return p, ok && p != ""
}

// listenDashboard listens on a TCP address or, for unix:/PATH, on a Unix
// socket with the file permissions mode: it is bound under a temporary
// name, given mode, then renamed into place, so that no process can
// connect through wider permissions meanwhile. A socket left at PATH by an
// earlier run is replaced; any other file there is an error. It returns
// the listener and the URL to print.
func listenDashboard(listen string, mode os.FileMode) (net.Listener, string, error) {
	path, ok := unixSocket(listen)
	if !ok {
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, "", err
		}
		return ln, "http://" + ln.Addr().String() + "/", nil
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket == 0 {
		return nil, "", fmt.Errorf("--listen %s: %s exists and is not a socket", listen, path)
	}
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.%d.tmp", filepath.Base(path), os.Getpid()))
	os.Remove(tmp)
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, "", err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, mode); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	return removeOnClose{ln, path}, "http+unix://" + path + " (a Unix socket, mode " + fmt.Sprintf("%#o", mode) + ")", nil
}

// removeOnClose removes the socket's file when the listener closes.
type removeOnClose struct {
	net.Listener
	path string
}

func (l removeOnClose) Close() error {
	err := l.Listener.Close()
	os.Remove(l.path)
	return err
}
