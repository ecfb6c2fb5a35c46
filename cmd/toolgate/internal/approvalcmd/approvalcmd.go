// Package approvalcmd is the work of the commands that decide approval
// requests outside the sidecar: `toolgate approvals` (list, approve, deny,
// revise) and the dashboard's Approvals page, each over the approval store
// a configuration's approvals section names, with the deciders it allows.
package approvalcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/sidecar"
	"github.com/toolgate/toolgate/internal/frontjwt"
	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// WithGate opens the configured approval store, runs fn, and closes it.
func WithGate(ctx context.Context, path string, fn func(*approval.Gate) error) error {
	ev, ac, err := config.LoadApprovals(path)
	if err != nil {
		return err
	}
	var ch *clickhouse.Writer
	if ac.Store == approval.StoreClickHouse {
		ch, err = clickhouse.Open(ctx, ev.ClickHouse, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		defer ch.Close()
	}
	g, closeStore := sidecar.NewGate(ac, ch, "cli")
	defer closeStore()
	return fn(g)
}

// LoginName is who runs the command, as a decision records it when --as is
// not given: the login name, else $USER, else "unknown".
func LoginName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "unknown"
}

// Print prints records as a table, or as JSON lines.
func Print(w io.Writer, g *approval.Gate, recs []approval.Record, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for i := range recs {
			r := &recs[i]
			if err := enc.Encode(struct {
				State string `json:"state"`
				approval.Record
			}{g.StateOf(r), *r}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAGE\tTOOL\tCALL\tAGENT\tEFFECT\tSUMMARY\tDECIDED BY")
	now := time.Now()
	for i := range recs {
		r := &recs[i]
		by := ""
		if v := r.Verdict(); v != nil {
			by = v.Decider
		}
		keys := make([]string, 0, len(r.Request.Summary))
		for k := range r.Request.Summary {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var sum []string
		for _, k := range keys {
			sum = append(sum, k+"="+r.Request.Summary[k])
		}
		call := strings.TrimSpace(r.Request.Method + " " + r.Request.Destination)
		if call == "" {
			call = "-" // a request recorded before the call was kept
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Request.ID, g.StateOf(r),
			now.Sub(r.Request.Time).Round(time.Second), r.Request.Tool, call, r.Request.Agent,
			r.Request.Effect, strings.Join(sum, " "), by)
	}
	return tw.Flush()
}

// gateApprovals adapts the approval gate to the dashboard's Approvals.
type gateApprovals struct{ g *approval.Gate }

var _ dashboard.Approvals = gateApprovals{}

func (a gateApprovals) Items(ctx context.Context, limit int) ([]dashboard.ApprovalItem, error) {
	recs, err := a.g.List(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.ApprovalItem, len(recs))
	for i := range recs {
		r := &recs[i]
		it := dashboard.ApprovalItem{ID: r.Request.ID, State: a.g.StateOf(r), Time: r.Request.Time, ExpiresAt: r.Request.ExpiresAt,
			Tool: r.Request.Tool, Method: r.Request.Method, Destination: r.Request.Destination, Agent: r.Request.Agent, Session: r.Request.Session, Effect: r.Request.Effect, Uses: r.Uses()}
		for _, k := range slices.Sorted(maps.Keys(r.Request.Summary)) {
			it.Summary = append(it.Summary, [2]string{k, r.Request.Summary[k]})
		}
		if v := r.Verdict(); v != nil {
			it.Verdict, it.Decider, it.Note, it.DecidedAt = v.Verdict, v.Decider, v.Note, v.Time
		}
		out[i] = it
	}
	return out, nil
}

func (a gateApprovals) Decide(ctx context.Context, id, verdict, who, note string) error {
	_, err := a.g.Decide(ctx, id, verdict, who, note)
	return err
}

// Mount adds the Approvals page to d, over the approval store
// and with the deciders the configuration at path names. listen is the
// dashboard's listener, frontOnly whether only the front can reach it (a
// Unix socket, or TLS requiring the front's client certificate): a
// trusted header alone (no jwt) is refused otherwise, since any process on
// the host, the agent included, can reach a TCP listener and set the
// header itself.
func Mount(ctx context.Context, d *dashboard.Dashboard, path, listen string, frontOnly bool) (func() error, error) {
	ev, ac, err := config.LoadApprovals(path)
	if err != nil {
		return nil, err
	}
	auth := dashboard.ApprovalAuth{TrustedHeader: ac.Deciders.TrustedHeader}
	if ac.Deciders.JWT.Enabled() {
		v, err := frontjwt.New(ctx, ac.Deciders.JWT)
		if err != nil {
			return nil, config.Locate(path, section.At("approvals.deciders.jwt.jwks_file", err))
		}
		auth.Front = v
	} else if ac.Deciders.TrustedHeader != "" {
		if !frontOnly {
			return nil, config.Locate(path, section.Errorf("approvals.deciders.trusted_header",
				"a header alone cannot prove who decides on a TCP listener (%s): any process on the host, the agent included, can send it; "+
					"add approvals.deciders.jwt (the front's signed identity, verified against its JWKS), "+
					"or serve the dashboard on a Unix socket only the front can reach (--listen unix:/PATH), "+
					"or ask for the front's client certificate (--tls-cert, --tls-key, --client-ca); see docs/approvals.md#deciders", listen))
		}
	}
	if ac.Deciders.SecretEnv != "" {
		auth.Secret = os.Getenv(ac.Deciders.SecretEnv)
	}
	var ch *clickhouse.Writer
	if ac.Store == approval.StoreClickHouse {
		if ch, err = clickhouse.Open(ctx, ev.ClickHouse, slog.New(slog.DiscardHandler)); err != nil {
			return nil, err
		}
	}
	g, closeStore := sidecar.NewGate(ac, ch, "dashboard")
	d.MountApprovals(gateApprovals{g}, auth)
	return func() error {
		err := closeStore()
		if ch != nil {
			err = errors.Join(err, ch.Close())
		}
		return err
	}, nil
}
