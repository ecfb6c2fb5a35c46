package sidecar

import (
	"log/slog"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/config"
)

// The descriptor budget. Every caller connection takes a file descriptor
// and every call in progress a second one, its upstream connection; the
// event path (events file, spool segments, its lock, ClickHouse's
// connections), the admin listener's connections and a reload (the
// configuration, schema and policy files it reads) need theirs too. When
// callers take them all, none of those work: events cannot be written,
// /healthz cannot be reached, a reload fails. So at start toolgate raises
// its soft RLIMIT_NOFILE to the hard limit, keeps a reserve, and caps the
// caller connections of all the proxy listeners together at half of the
// rest (limits.max_conns, when set, is kept; see budgetFor).

// fdReserveBase is what the reserve keeps for everything but the admin
// listener's connections: standard streams, the listening sockets, the
// poller, the log, the events file and the spool's segments and lock,
// ClickHouse's and the tracing exporter's connections, the approval
// store, inotify, and the files a reload reads.
const fdReserveBase = 64

// fdBudget is how the process's descriptors are shared out.
type fdBudget struct {
	// Limit is the soft RLIMIT_NOFILE after raising it (0 where it
	// cannot be read: no budget then).
	Limit int
	// Raised is true when the soft limit was raised to the hard one.
	Raised bool
	// Admin caps the admin listener's connections.
	Admin int
	// Reserve is what callers may not take: fdReserveBase and Admin.
	Reserve int
	// Callers is how many caller connections the proxy listeners may
	// hold together: half of what the reserve leaves (each call holds an
	// upstream connection too). 0: no budget.
	Callers int
}

// budgetFor derives the budget from limit, the soft RLIMIT_NOFILE.
func budgetFor(limit int) fdBudget {
	b := fdBudget{Limit: limit, Admin: AdminMaxConns}
	if limit <= 0 {
		return b
	}
	b.Admin = min(AdminMaxConns, max(8, limit/16))
	b.Reserve = fdReserveBase + b.Admin
	b.Callers = max(1, (limit-b.Reserve)/2)
	return b
}

// descriptorBudget raises the soft descriptor limit to the hard one,
// derives the budget and logs it. An explicit limits.max_conns whose
// listeners could together take more descriptors than the budget leaves
// gets a warning, not an error: one configuration file serves hosts and
// containers with different limits, and a sidecar that would not start on
// a host with a lower one would take its service's calls down with it,
// where the warning says what to change and the stalled connections are
// still cut first at the cap.
func descriptorBudget(lc *config.Loaded, log *slog.Logger) fdBudget {
	limit, raised, err := raiseNoFile()
	if err != nil {
		log.Warn("descriptor limit: cannot read or raise RLIMIT_NOFILE; caller connections are capped by limits.max_conns alone", "error", err)
	}
	b := budgetFor(limit)
	b.Raised = raised
	if b.Limit <= 0 {
		return b
	}
	lim := lc.Snapshot.Config.Limits
	listeners := proxyListeners(lc)
	args := []any{"rlimit_nofile", b.Limit, "raised", b.Raised, "reserve", b.Reserve, "admin_max_conns", b.Admin,
		"caller_conns", b.Callers, "listeners", listeners}
	if !lim.MaxConnsSet() {
		log.Info("descriptor budget: caller connections capped at what the descriptor limit leaves after the reserve (event path, admin listener, reloads) and an upstream connection per call",
			append(args, "max_conns_per_listener", min(lim.MaxConns, b.Callers))...)
		return b
	}
	log.Info("descriptor budget", append(args, "max_conns", lim.MaxConns)...)
	if 2*lim.MaxConns*listeners+b.Reserve > b.Limit {
		log.Warn("limits.max_conns lets callers take more descriptors than the process has: at the cap, events, /healthz and reloads may fail for lack of one; lower max_conns or raise the limit (stalled connections are still cut first)",
			"max_conns", lim.MaxConns, "listeners", listeners, "rlimit_nofile", b.Limit,
			"budget_caller_conns", b.Callers)
		b.Callers = 0 // explicit settings win
	}
	return b
}

// proxyListeners counts the proxy's listeners: forward, each reverse, and
// transparent.
func proxyListeners(lc *config.Loaded) int {
	l := lc.Snapshot.Config.Listen
	n := len(l.Reverse)
	if l.Forward != "off" {
		n++
	}
	if l.Transparent != "" {
		n++
	}
	return max(n, 1)
}
