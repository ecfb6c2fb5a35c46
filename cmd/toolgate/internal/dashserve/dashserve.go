// Package dashserve serves the failure dashboard (sink/dashboard) for
// `toolgate dashboard` and the demo: it builds the dashboard's
// configuration from the command's options, listens on loopback, a Unix
// socket or TLS, mounts the Approvals page with the deciders the
// configuration allows, and serves until the context ends.
package dashserve

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

	"github.com/toolgate/toolgate/cmd/toolgate/internal/approvalcmd"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// DefaultListen is the dashboard's address: loopback, and not the admin
// listener's 18090, so both run on one host.
const DefaultListen = "127.0.0.1:18091"

// Options are `toolgate dashboard`'s flags, as given.
type Options struct {
	Config      string   // --config: the configuration whose events.clickhouse names the database
	Addr        []string // --clickhouse: native addresses, instead of Config
	Database    string   // --database
	Username    string   // --user
	PasswordEnv string   // --password-env
	Listen      string   // --listen: host:port or unix:/PATH
	SocketMode  string   // --socket-mode: the Unix socket's permissions, octal
	TLSCert     string   // --tls-cert
	TLSKey      string   // --tls-key
	ClientCA    string   // --client-ca
	AllowWide   bool     // --allow-non-loopback
}

// Run serves the dashboard the options describe, logging to log and
// printing its URL on out, until ctx ends.
func Run(ctx context.Context, fl Options, log *slog.Logger, out io.Writer) error {
	cfg, err := fl.dashboardConfig()
	if err != nil {
		return err
	}
	if _, ok := unixSocket(fl.Listen); !ok {
		if err := proxy.CheckListenAddr(fl.Listen, fl.AllowWide); err != nil {
			return exit.AsUsage(fmt.Errorf("--listen: %w", err))
		}
	}
	mode, err := strconv.ParseUint(fl.SocketMode, 8, 32)
	if err != nil || mode > 0o777 || mode == 0 {
		return exit.AsUsage(fmt.Errorf("--socket-mode: %q; want octal permissions such as 0660", fl.SocketMode))
	}
	tlsCfg, err := fl.serverTLS()
	if err != nil {
		return err
	}
	_, viaSocket := unixSocket(fl.Listen)
	frontOnly := viaSocket || (tlsCfg != nil && tlsCfg.ClientCAs != nil)
	var mount func(*dashboard.Dashboard) (func() error, error)
	if fl.Config != "" {
		mount = func(d *dashboard.Dashboard) (func() error, error) {
			return approvalcmd.Mount(ctx, d, fl.Config, fl.Listen, frontOnly)
		}
	}
	return Serve(ctx, cfg, Listen{Addr: fl.Listen, Mode: os.FileMode(mode), TLS: tlsCfg}, log, out, mount)
}

// dashboardConfig builds the dashboard's configuration from the flags.
func (fl Options) dashboardConfig() (dashboard.Config, error) {
	switch {
	case fl.Config != "" && len(fl.Addr) > 0:
		return dashboard.Config{}, exit.AsUsage(errors.New("give --config or --clickhouse, not both"))
	case fl.Config == "" && len(fl.Addr) == 0:
		return dashboard.Config{}, exit.AsUsage(errors.New("name the ClickHouse to read: --config FILE, or --clickhouse ADDR [--database DB]"))
	case fl.Config != "":
		// Only the events section: the dashboard neither needs the
		// proxy's tools nor compiles or tests policies.
		ev, err := config.LoadEvents(fl.Config)
		if err != nil {
			return dashboard.Config{}, err
		}
		ch := ev.ClickHouse
		if len(ch.Addr) == 0 {
			return dashboard.Config{}, fmt.Errorf("%s: events.clickhouse.addr is not set: the dashboard reads ClickHouse", fl.Config)
		}
		cfg := dashboard.Config{Addr: ch.Addr, Database: ch.Database, Username: ch.Username, PasswordEnv: ch.PasswordEnv, DialTimeout: ch.DialTimeout}
		if fl.Database != "" {
			cfg.Database = fl.Database
		}
		if fl.Username != "" {
			cfg.Username, cfg.PasswordEnv = fl.Username, fl.PasswordEnv
		}
		return cfg, cfg.Validate()
	default:
		cfg := dashboard.Config{Addr: fl.Addr, Database: fl.Database, Username: fl.Username, PasswordEnv: fl.PasswordEnv}
		if err := cfg.Validate(); err != nil {
			return dashboard.Config{}, exit.AsUsage(err)
		}
		return cfg, nil
	}
}

// serverTLS is the dashboard's TLS configuration from the flags; nil for
// plain HTTP.
func (fl Options) serverTLS() (*tls.Config, error) {
	switch {
	case fl.TLSCert == "" && fl.TLSKey == "" && fl.ClientCA == "":
		return nil, nil
	case fl.TLSCert == "" || fl.TLSKey == "":
		return nil, exit.AsUsage(errors.New("--tls-cert and --tls-key go together (and --client-ca needs them)"))
	}
	cert, err := tls.LoadX509KeyPair(fl.TLSCert, fl.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if fl.ClientCA != "" {
		pem, err := os.ReadFile(fl.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %w", err)
		}
		c.ClientCAs = x509.NewCertPool()
		if !c.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-ca: %s holds no PEM certificate", fl.ClientCA)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// Listen is where the dashboard listens: Addr (host:port or
// unix:/PATH), the Unix socket's Mode, and TLS (nil for plain HTTP).
type Listen struct {
	Addr string
	Mode os.FileMode
	TLS  *tls.Config
}

// Serve serves the dashboard on ln until ctx ends, printing its
// URL on out first. mount, when not nil, adds the Approvals page.
func Serve(ctx context.Context, cfg dashboard.Config, dl Listen, log *slog.Logger, out io.Writer, mount func(*dashboard.Dashboard) (func() error, error)) error {
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
	ln, where, err := listenDashboard(dl.Addr, dl.Mode)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	defer ln.Close()
	if dl.TLS != nil {
		ln = tls.NewListener(ln, dl.TLS)
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
