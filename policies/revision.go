package policies

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// ErrRollback is the error of a bundle whose revision is older than the
// one in force (BundleConfig.RevisionOrder) while allow_rollback is off.
var ErrRollback = errors.New("rollback")

// RevisionHistory is what a bundle's poller remembers of the revisions
// it put in force, to refuse a rollback. Its zero value is empty; it is
// not safe for concurrent use (one poller owns it).
type RevisionHistory struct {
	// replaced holds the revisions that were in force and were replaced,
	// at most maxReplaced of them, oldest first.
	replaced []string
	active   string
}

// maxReplaced bounds a RevisionHistory.
const maxReplaced = 1024

// Check reports whether revision next may replace the one in force under
// order (a RevisionOrder value): nil, or an error wrapping ErrRollback
// that names both revisions. The revision in force itself always may (a
// bundle served again).
func (h *RevisionHistory) Check(order, next string) error {
	if h.active == "" || next == h.active {
		return nil
	}
	for _, r := range h.replaced {
		if r == next {
			return fmt.Errorf("%w: revision %q was in force before %q replaced it", ErrRollback, next, h.active)
		}
	}
	if order == RevisionSeen || order == "" {
		return nil
	}
	c, err := CompareRevisions(order, next, h.active)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRollback, err)
	}
	if c < 0 {
		return fmt.Errorf("%w: revision %q is older than %q in force (revision_order %s)", ErrRollback, next, h.active, order)
	}
	return nil
}

// Activated records that revision rev is in force.
func (h *RevisionHistory) Activated(rev string) {
	if rev == h.active {
		return
	}
	if h.active != "" {
		h.replaced = append(h.replaced, h.active)
		if len(h.replaced) > maxReplaced {
			h.replaced = h.replaced[len(h.replaced)-maxReplaced:]
		}
	}
	h.active = rev
}

// CompareRevisions compares revisions a and b under order (numeric,
// semver, timestamp or lexical): -1 when a is older, 0 when they are
// equal in that order, +1 when a is newer. A revision that does not parse
// under the order is an error naming it.
func CompareRevisions(order, a, b string) (int, error) {
	switch order {
	case RevisionLexical:
		return strings.Compare(a, b), nil
	case RevisionNumeric:
		x, ok1 := new(big.Int).SetString(a, 10)
		y, ok2 := new(big.Int).SetString(b, 10)
		if !ok1 || !ok2 {
			return 0, fmt.Errorf("revision_order numeric: %q or %q is not an integer", a, b)
		}
		return x.Cmp(y), nil
	case RevisionSemver:
		va, vb := "v"+strings.TrimPrefix(a, "v"), "v"+strings.TrimPrefix(b, "v")
		if !semver.IsValid(va) || !semver.IsValid(vb) {
			return 0, fmt.Errorf("revision_order semver: %q or %q is not a semantic version", a, b)
		}
		return semver.Compare(va, vb), nil
	case RevisionTimestamp:
		x, err1 := time.Parse(time.RFC3339Nano, a)
		y, err2 := time.Parse(time.RFC3339Nano, b)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("revision_order timestamp: %q or %q is not an RFC 3339 time", a, b)
		}
		return x.Compare(y), nil
	}
	return 0, fmt.Errorf("unknown revision_order %q", order)
}
