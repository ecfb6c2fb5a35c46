// Package dashboard is the failure dashboard analysts look at: one web page,
// served from the binary (templates, stylesheet and icon embedded; no CDN,
// no JavaScript), over toolgate's ClickHouse tables.
//
// The page shows failures over time stacked by error code, a per-tool table
// (calls, failure rate, top code, p50/p95 latency, a sparkline), the most
// frequent validation and policy messages with a sample trace id, envelope
// adoption per tool, what the answer checks redacted and withheld per tool,
// the MCP tool definitions that changed from their pins (and the calls
// refused for them), and each sidecar's freshness. Charts are SVG drawn on
// the server from at most MaxBuckets buckets, so thousands of points stay
// readable. The view (time range, bucket, tool, agent, error code) lives in
// the URL query, so a link shares it. Each panel also answers as JSON under
// api/.
//
// Filters are validated by ParseFilter (allow-listed buckets and codes,
// names from a fixed character set, times parsed) and reach ClickHouse only
// as bound values. The dashboard only reads: its ClickHouse user needs
// SELECT and nothing else.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"golang.org/x/sync/errgroup"

	"github.com/toolgate/toolgate/sink"
)

// Defaults for Config.
const (
	DefaultDatabase     = "toolgate"
	DefaultDialTimeout  = 5 * time.Second
	DefaultQueryTimeout = 20 * time.Second
)

// Config says where the dashboard reads from.
type Config struct {
	// Addr lists native-protocol addresses (host:9000). Required.
	Addr []string
	// Database holds toolgate's tables. Default "toolgate". Like
	// events.clickhouse.database, a plain name: no backquote, backslash,
	// space, dot or control character; it is quoted as an identifier.
	Database string
	// Username to connect as; a read-only user is enough. Default "default".
	Username string
	// PasswordEnv names the environment variable holding the password.
	PasswordEnv string
	// DialTimeout bounds connecting. Default 5s.
	DialTimeout time.Duration
	// QueryTimeout bounds all the queries of one page or API call.
	// Default 20s.
	QueryTimeout time.Duration
	// Now returns the current time; nil means time.Now. Tests pin it.
	Now func() time.Time
}

// Validate applies defaults and rejects bad values.
func (c *Config) Validate() error {
	if len(c.Addr) == 0 {
		return errors.New("dashboard: a ClickHouse address is required")
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if err := sink.CheckDatabaseName(c.Database); err != nil {
		return fmt.Errorf("dashboard: database %w", err)
	}
	if c.Username == "" {
		c.Username = "default"
	}
	if c.PasswordEnv != "" {
		if _, ok := os.LookupEnv(c.PasswordEnv); !ok {
			return fmt.Errorf("dashboard: environment variable %s is not set", c.PasswordEnv)
		}
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

//go:embed assets
var assets embed.FS

var page = template.Must(template.New("index.html").Funcs(template.FuncMap{
	"spark": sparkline,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"ms":    func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"css":   cssName,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"lag": func(s int64) string { return (time.Duration(s) * time.Second).String() },
}).ParseFS(assets, "assets/index.html"))

// Dashboard serves the page, its assets and the JSON panels. It is an
// http.Handler; mount it at any path (links are relative).
type Dashboard struct {
	cfg   Config
	conn  driver.Conn
	store store
	log   *slog.Logger
	mux   *http.ServeMux

	approvals Approvals // nil unless MountApprovals
	auth      ApprovalAuth
	csrfKey   []byte // the decision form's token key; see csrf.go
}

var _ http.Handler = (*Dashboard)(nil)

// Open connects to ClickHouse (lazily: a server that is down answers 502
// per page until it is back) and returns the dashboard.
func Open(cfg Config, log *slog.Logger) (*Dashboard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pw := ""
	if cfg.PasswordEnv != "" {
		pw = os.Getenv(cfg.PasswordEnv)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:         cfg.Addr,
		Auth:         clickhouse.Auth{Database: cfg.Database, Username: cfg.Username, Password: pw},
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.QueryTimeout,
		MaxOpenConns: 10, // a page runs its ten panels at once
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: clickhouse: %w", err)
	}
	d := &Dashboard{cfg: cfg, conn: conn, log: log, mux: http.NewServeMux()}
	d.store = store{q: chQuerier{conn}, db: "`" + cfg.Database + "`"} // Validate refused backquotes
	static, _ := fs.Sub(assets, "assets/static")
	d.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	d.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "favicon.svg")
	})
	d.mux.HandleFunc("GET /{$}", d.servePage)
	for name, fn := range d.panels() {
		d.mux.HandleFunc("GET /api/"+name, d.serveAPI(fn))
	}
	return d, nil
}

// Close closes the connections.
func (d *Dashboard) Close() error { return d.conn.Close() }

// ServeHTTP serves the page (/), the panels as JSON (/api/NAME) and the
// static assets, and, when mounted, the Approvals page; anything but GET
// and HEAD (and the Approvals page's POST) answers 405.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	decide := d.approvals != nil && r.Method == http.MethodPost && r.URL.Path == "/approvals/decide"
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !decide {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the dashboard only reads: use GET", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

// chQuerier adapts clickhouse-go to querier. Its `?` binds are client-side
// (18.16 has no server-side parameters): strings become quoted literals
// with \ ' and NUL escaped, integers plain numbers.
type chQuerier struct{ conn driver.Conn }

func (c chQuerier) query(ctx context.Context, sql string, args ...any) (rowScanner, error) {
	return c.conn.Query(ctx, sql, args...)
}

// panelFunc computes one panel's data.
type panelFunc func(ctx context.Context, f Filter) (any, error)

func (d *Dashboard) panels() map[string]panelFunc {
	return map[string]panelFunc{
		"failures":  func(ctx context.Context, f Filter) (any, error) { return d.store.failures(ctx, f) },
		"tools":     func(ctx context.Context, f Filter) (any, error) { return d.store.tools(ctx, f) },
		"messages":  func(ctx context.Context, f Filter) (any, error) { return d.store.messages(ctx, f) },
		"adoption":  func(ctx context.Context, f Filter) (any, error) { return d.store.adoption(ctx, f) },
		"budgets":   func(ctx context.Context, f Filter) (any, error) { return d.store.budgets(ctx, f) },
		"revisions": func(ctx context.Context, f Filter) (any, error) { return d.store.revisions(ctx, f) },
		"answers":   func(ctx context.Context, f Filter) (any, error) { return d.store.answers(ctx, f) },
		"schema_dry_run": func(ctx context.Context, f Filter) (any, error) {
			return d.store.schemaDryRun(ctx, f)
		},
		"definitions": func(ctx context.Context, f Filter) (any, error) {
			return d.store.definitions(ctx, f)
		},
		"freshness": func(ctx context.Context, f Filter) (any, error) { return d.store.freshness(ctx, f, d.cfg.Now()) },
		"options":   func(ctx context.Context, f Filter) (any, error) { return d.store.options(ctx, f) },
	}
}

// apiAnswer is every JSON answer: the filter as understood, and the panel.
type apiAnswer struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Bucket int64     `json:"bucket_seconds"`
	Query  string    `json:"query"`
	Data   any       `json:"data"`
}

func (d *Dashboard) serveAPI(fn panelFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		f, err := ParseFilter(r.URL.RawQuery, d.cfg.Now())
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d.cfg.QueryTimeout)
		defer cancel()
		data, err := fn(ctx, f)
		if err != nil {
			d.log.Error("dashboard query failed", "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "ClickHouse did not answer the query; see the dashboard's log"})
			return
		}
		_ = json.NewEncoder(w).Encode(apiAnswer{From: f.From, To: f.To, Bucket: int64(f.Bucket / time.Second), Query: f.Query().Encode(), Data: data})
	}
}

// view is what the page template renders.
type view struct {
	Filter   Filter
	Error    string // a refused filter or a failed query; the panels are empty
	Status   int
	Buckets  []Bucket
	Codes    []string
	Lasts    []string
	Options  Options
	Failures Failures
	Chart    template.HTML
	Tools    []ToolRow
	Messages []Message
	Adoption []Adoption
	Budgets  []BudgetRow
	// Revisions are the policy versions each sidecar decided calls under.
	Revisions []RevisionRow
	Fresh     []Freshness
	Link      string // the view's shareable query
	Ready     float64
	Took      time.Duration

	// Answers are what the answer checks did per tool; Definitions the
	// MCP tool definitions that differed from their pins.
	Answers     []AnswerRow
	Definitions []DefinitionRow
	// SchemaDryRun is what each tool's dry-run schema would have refused.
	SchemaDryRun []SchemaDryRunRow
}

func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	v := view{Buckets: Buckets, Codes: ErrorCodes, Lasts: Lasts, Ready: ReadyShare, Status: http.StatusOK}
	f, err := ParseFilter(r.URL.RawQuery, d.cfg.Now())
	if err != nil {
		v.Error, v.Status = err.Error(), http.StatusBadRequest
		v.Filter, _ = ParseFilter("", d.cfg.Now())
	} else {
		v.Filter, v.Link = f, "?"+f.Query().Encode()
		if err := d.fill(r.Context(), &v); err != nil {
			d.log.Error("dashboard query failed", "err", err)
			v.Error, v.Status = "ClickHouse did not answer the dashboard's queries; see the dashboard's log", http.StatusBadGateway
		}
	}
	v.Took = time.Since(start).Round(time.Millisecond)
	var buf strings.Builder
	if err := page.Execute(&buf, v); err != nil {
		d.log.Error("dashboard template failed", "err", err)
		http.Error(w, "the page could not be drawn", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(v.Status)
	_, _ = w.Write([]byte(buf.String()))
}

// fill runs every panel's queries for the page at once: ClickHouse spreads
// them over its cores, and the page takes as long as its slowest query
// rather than their sum. The first error cancels the others.
func (d *Dashboard) fill(ctx context.Context, v *view) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.QueryTimeout)
	defer cancel()
	f := v.Filter
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if v.Options, err = d.store.options(ctx, f); err == nil {
			v.Options.Tools = withSelected(v.Options.Tools, f.Tool)
			v.Options.Agents = withSelected(v.Options.Agents, f.Agent)
		}
		return err
	})
	g.Go(func() (err error) {
		if v.Failures, err = d.store.failures(ctx, f); err == nil {
			v.Chart = stackedChart(v.Failures)
		}
		return err
	})
	g.Go(func() (err error) { v.Tools, err = d.store.tools(ctx, f); return err })
	g.Go(func() (err error) { v.Messages, err = d.store.messages(ctx, f); return err })
	g.Go(func() (err error) { v.Adoption, err = d.store.adoption(ctx, f); return err })
	g.Go(func() (err error) { v.Budgets, err = d.store.budgets(ctx, f); return err })
	g.Go(func() (err error) { v.Revisions, err = d.store.revisions(ctx, f); return err })
	g.Go(func() (err error) { v.Answers, err = d.store.answers(ctx, f); return err })
	g.Go(func() (err error) { v.Definitions, err = d.store.definitions(ctx, f); return err })
	g.Go(func() (err error) { v.SchemaDryRun, err = d.store.schemaDryRun(ctx, f); return err })
	g.Go(func() (err error) { v.Fresh, err = d.store.freshness(ctx, f, d.cfg.Now()); return err })
	return g.Wait()
}

// withSelected keeps the selected value among the choices, so the form
// shows it even when the range holds no call of it.
func withSelected(list []string, sel string) []string {
	if sel == "" {
		return list
	}
	for _, v := range list {
		if v == sel {
			return list
		}
	}
	return append([]string{sel}, list...)
}
