package policies

import (
	"errors"
	"testing"
)

// TestRevisionHistory walks a bundle's revisions under each order: a
// revision replaced before is refused under every order, a revision never
// seen is newer under seen and compared under the others, and one that
// does not parse under an order is refused.
func TestRevisionHistory(t *testing.T) {
	for _, tc := range []struct {
		order string
		steps []string // revisions offered in turn; a "!" prefix: must be refused
	}{
		{RevisionSeen, []string{"a", "b", "b", "!a", "c", "!b", "!a", "zzz", "0"}},
		{RevisionNumeric, []string{"9", "10", "!9", "!2", "11", "!abc", "100000000000000000000000"}},
		{RevisionSemver, []string{"v1.2.0", "1.10.0", "!v1.9.9", "!1.2.0", "v2.0.0-rc.1", "v2.0.0", "!v2.0.0-rc.1", "!junk"}},
		{RevisionTimestamp, []string{"2026-11-01T00:00:00Z", "2026-11-02T00:00:00+01:00", "!2026-10-31T23:00:00Z", "!yesterday"}},
		{RevisionLexical, []string{"r2", "r3", "!r1", "r30", "!r200"}},
	} {
		t.Run(tc.order, func(t *testing.T) {
			var h RevisionHistory
			for _, s := range tc.steps {
				rev, refuse := s, false
				if s[0] == '!' {
					rev, refuse = s[1:], true
				}
				err := h.Check(tc.order, rev)
				switch {
				case refuse && !errors.Is(err, ErrRollback):
					t.Fatalf("%q after %q: %v, want a rollback refusal", rev, h.active, err)
				case !refuse && err != nil:
					t.Fatalf("%q after %q: %v, want taken", rev, h.active, err)
				case !refuse:
					h.Activated(rev)
				}
			}
		})
	}
}
