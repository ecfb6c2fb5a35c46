package dashboard

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Approvals is what the Approvals page reads and decides through: the
// approval gate of toolgate's configuration (cmd adapts it). The page
// never sees a call's arguments, only what the policy chose to show.
type Approvals interface {
	// Items returns the pending and recent requests, newest first.
	Items(ctx context.Context, limit int) ([]ApprovalItem, error)
	// Decide records a decision (approved, denied or revised) by who.
	Decide(ctx context.Context, id, verdict, who, note string) error
}

// ApprovalItem is one request as the page shows it.
type ApprovalItem struct {
	ID        string
	State     string // pending, approved, denied, revised, expired, used
	Time      time.Time
	ExpiresAt time.Time
	Tool      string
	Agent     string
	Session   string
	Effect    string
	Summary   [][2]string // field, value; sorted by field
	Verdict   string      // "" while undecided
	Decider   string
	Note      string
	DecidedAt time.Time
	Uses      int

	// Method and Destination are the call's method and where it goes
	// (scheme, host, port and the tool's path template, or the MCP route
	// and its server); "" for requests recorded before they were kept.
	Method, Destination string
}

// FrontVerifier authenticates the front a request came through: it
// returns the user the front's signed identity names (an error when the
// request carries none that verifies). Its errors never hold the token.
type FrontVerifier interface {
	Verify(r *http.Request) (user string, err error)
}

// ApprovalAuth says who may decide on the page. With none set the page is
// read-only.
type ApprovalAuth struct {
	// Secret is a shared secret a decider types into the form; the
	// decision records the name given with it, as "secret:NAME".
	Secret string
	// TrustedHeader is a header an authenticating front sets to the
	// signed-in user. With Front nil, the header alone decides and the
	// decision records "header:USER": only for a listener that nothing
	// but the front can reach (cmd refuses it on a TCP listener). With
	// Front set, the header must name the user Front verified, or be
	// absent.
	TrustedHeader string
	// Front, when set, verifies the front's signed identity (its JWT); a
	// decision it verifies records "jwt:USER". Without a verified identity,
	// only the shared secret decides.
	Front FrontVerifier
}

// MaxApprovalItems bounds the requests the page lists.
const MaxApprovalItems = 200

var approvalsPage = template.Must(template.New("approvals.html").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"age": func(t time.Time) string { return time.Since(t).Round(time.Second).String() },
}).ParseFS(assets, "assets/approvals.html"))

// approvalsView is what approvals.html renders.
type approvalsView struct {
	Pending, Recent []ApprovalItem
	Focus           string // ?id=
	Done            string // the verdict just recorded
	Error           string
	CanDecide       bool
	NeedsSecret     bool
	User            string // from the front's identity or the trusted header
	CSRF            string // the form token of the browser's session
}

// MountApprovals adds the Approvals page (GET /approvals) and its form
// (POST /approvals/decide) to the dashboard.
func (d *Dashboard) MountApprovals(a Approvals, auth ApprovalAuth) {
	d.approvals, d.auth, d.csrfKey = a, auth, newCSRFKey()
	d.mux.HandleFunc("GET /approvals", d.serveApprovals)
	d.mux.HandleFunc("POST /approvals/decide", d.serveDecide)
}

func (d *Dashboard) serveApprovals(w http.ResponseWriter, r *http.Request) {
	v := approvalsView{Focus: r.URL.Query().Get("id"), Done: r.URL.Query().Get("done"),
		CanDecide: d.auth.Secret != "" || d.auth.TrustedHeader != "" || d.auth.Front != nil, NeedsSecret: d.auth.Secret != ""}
	if u, err := d.identity(r); err == nil && u != "" {
		_, v.User, _ = strings.Cut(u, ":")
		v.NeedsSecret = false
	} else if d.auth.Secret == "" {
		v.CanDecide = false
	}
	if v.CanDecide {
		v.CSRF = d.csrfToken(d.session(w, r))
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.cfg.QueryTimeout)
	defer cancel()
	items, err := d.approvals.Items(ctx, MaxApprovalItems)
	status := http.StatusOK
	if err != nil {
		d.log.Error("approvals: read failed", "err", err)
		v.Error, status = "The approval store did not answer; see the dashboard's log.", http.StatusBadGateway
	}
	for _, it := range items {
		if it.State == "pending" {
			v.Pending = append(v.Pending, it)
		} else {
			v.Recent = append(v.Recent, it)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := approvalsPage.Execute(w, v); err != nil {
		d.log.Error("approvals: render failed", "err", err)
	}
}

// Bounds on the decision form.
const (
	maxFormBytes = 8 << 10
	maxNameBytes = 128
)

// errNotAllowed refuses a decision without authorisation.
var errNotAllowed = errors.New("not allowed to decide")

// identity is who the front says made the request, as recorded: "jwt:USER"
// from its verified signed identity, or "header:USER" from the trusted
// header alone when no verifier is configured. "" with a nil error when
// the request carries no identity.
func (d *Dashboard) identity(r *http.Request) (string, error) {
	var hdr string
	if d.auth.TrustedHeader != "" {
		hdr = bounded(strings.TrimSpace(r.Header.Get(d.auth.TrustedHeader)), maxNameBytes)
	}
	if d.auth.Front == nil {
		if hdr == "" {
			return "", nil
		}
		return "header:" + hdr, nil
	}
	u, err := d.auth.Front.Verify(r)
	if err != nil {
		return "", err
	}
	u = bounded(u, maxNameBytes)
	if hdr != "" && hdr != u {
		return "", errors.New("the trusted header names another user than the front's signed identity")
	}
	return "jwt:" + u, nil
}

// decider is who makes a decision: the front's identity (see identity), or
// the shared secret with the name typed into the form.
func (d *Dashboard) decider(r *http.Request) (string, error) {
	u, idErr := d.identity(r)
	if idErr == nil && u != "" {
		return u, nil
	}
	if d.auth.Secret != "" {
		got := r.PostFormValue("secret")
		if subtle.ConstantTimeCompare([]byte(got), []byte(d.auth.Secret)) == 1 {
			name := strings.TrimSpace(r.PostFormValue("who"))
			if name == "" {
				return "", errors.New("give your name with the shared secret")
			}
			return "secret:" + bounded(name, maxNameBytes), nil
		}
	}
	if idErr != nil {
		return "", fmt.Errorf("%w: %v", errNotAllowed, idErr)
	}
	return "", errNotAllowed
}

func (d *Dashboard) serveDecide(w http.ResponseWriter, r *http.Request) {
	// A form from another site cannot decide: browsers say where a
	// request comes from.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		http.Error(w, "decisions come from the Approvals page only", http.StatusForbidden)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			http.Error(w, "decisions come from the Approvals page only", http.StatusForbidden)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form is too large or malformed", http.StatusBadRequest)
		return
	}
	if !d.checkCSRF(r) {
		http.Error(w, "decisions come from the Approvals page only: the form's token does not fit this browser's session; reload the page", http.StatusForbidden)
		return
	}
	who, err := d.decider(r)
	if err != nil {
		http.Error(w, "Not allowed to decide: "+err.Error(), http.StatusForbidden)
		return
	}
	id, verdict, note := r.PostFormValue("id"), r.PostFormValue("verdict"), r.PostFormValue("note")
	if verdict == "revised" && strings.TrimSpace(note) == "" {
		http.Error(w, "a revision request needs a note saying what to change", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.cfg.QueryTimeout)
	defer cancel()
	if err := d.approvals.Decide(ctx, id, verdict, who, note); err != nil {
		d.log.Info("approvals: decision refused", "id", bounded(id, 64), "verdict", bounded(verdict, 16), "err", err)
		http.Error(w, "The decision was not recorded: "+err.Error(), http.StatusConflict)
		return
	}
	d.log.Info("approvals: decided", "id", id, "verdict", verdict, "by", who)
	http.Redirect(w, r, "../approvals?"+url.Values{"id": {id}, "done": {verdict}}.Encode(), http.StatusSeeOther)
}

func bounded(s string, n int) string {
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}
