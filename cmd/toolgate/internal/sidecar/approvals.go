package sidecar

import (
	"log/slog"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/redisstate"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// The approval stores satisfy what the approval step reads and writes.
var (
	_ approval.Store    = (*approval.FileStore)(nil)
	_ approval.RowStore = (*clickhouse.ApprovalStore)(nil)
)

// openApprovals returns the approval step over the configured store: the
// events' ClickHouse server (ch, shared by every sidecar and the
// dashboard), or the local file. It always exists, so a policy that asks
// approval is never ignored; a configuration that never needs approval
// opens no file. close releases the store.
//
// Sidecars that share a ClickHouse store are usually behind one balancer:
// without approvals.state_key_env, an MCP client's in-band retry that
// reaches another sidecar is refused (approval_state_invalid), which the
// log says once at start.
func openApprovals(lc *config.Loaded, ch *clickhouse.Writer, log *slog.Logger) (gate *approval.Gate, close func() error) {
	a := lc.Approvals
	if a.Store == approval.StoreClickHouse && a.URL != "" && a.StateKeyEnv == "" {
		log.Warn("approvals: in-band MCP approvals are authenticated with a random key of this process; set approvals.state_key_env when several sidecars share the store, so a retry reaching another sidecar is honoured")
	}
	return newGate(a, ch, lc.Events.Sidecar, lc.Fleet)
}

// NewGate builds the approval gate for cfg: over ch's tables when the
// store is clickhouse (ch must then be open), else over cfg's file. The
// dashboard and `toolgate approvals` use it too.
func NewGate(cfg approval.Config, ch *clickhouse.Writer, name string) (*approval.Gate, func() error) {
	return newGate(cfg, ch, name, nil)
}

// newGate is NewGate whose grant uses are decided in the fleet's Redis
// when fleet is not nil (state.redis): the audit rows stay in the store.
func newGate(cfg approval.Config, ch *clickhouse.Writer, name string, fleet *redisstate.Client) (*approval.Gate, func() error) {
	var store approval.Store
	closeStore := func() error { return nil }
	if cfg.Store == approval.StoreClickHouse && ch != nil {
		store = approval.RowsStore(ch.Approvals(cfg.PendingTTL + cfg.DecisionTTL))
	} else {
		fs := approval.NewFileStore(cfg.FilePath(), cfg.PendingTTL+cfg.DecisionTTL)
		store, closeStore = fs, fs.Close
	}
	if fleet != nil {
		store = approval.NewFleetStore(store, fleet, cfg.PendingTTL+cfg.DecisionTTL)
	}
	return approval.New(cfg, store, name), closeStore
}
