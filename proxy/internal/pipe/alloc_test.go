package pipe

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/google/uuid"
)

// TestNewEventAndTraceID checks the ids made in one string are those
// newEventID and newTraceID make: a version 4 UUID spelled as
// uuid.UUID.String spells it, and 32 lower-case hex digits.
func TestNewEventAndTraceID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		ev, tr := newEventAndTraceID()
		u, err := uuid.Parse(ev)
		if err != nil {
			t.Fatalf("event id %q: %v", ev, err)
		}
		if u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != ev {
			t.Errorf("event id %q: version %d, variant %v, spelled %q", ev, u.Version(), u.Variant(), u.String())
		}
		if len(tr) != 32 || !IsHex(tr) {
			t.Errorf("trace id %q: want 32 lower-case hex digits", tr)
		}
		if seen[ev] || seen[tr] {
			t.Fatalf("an id came twice")
		}
		seen[ev], seen[tr] = true, true
	}
}

// TestCloneHeader checks cloneHeader copies as Header.Clone does (nil
// values kept nil, empty ones empty), into the array it is given when
// the values fit, and that the copy and what is left of the array share
// nothing with the original or each other.
func TestCloneHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		vals int
	}{
		{"nil", nil, 16},
		{"empty", http.Header{}, 16},
		{"typical", http.Header{"Content-Type": {"application/json"}, "Accept": {"a", "b"}, "User-Agent": nil, "X-Empty": {}}, 16},
		{"exactly full", http.Header{"A": {"1", "2"}, "B": {"3"}}, 3},
		{"too many values", http.Header{"A": {"1", "2"}, "B": {"3"}}, 2},
		{"empty values, no array", http.Header{"A": {}, "B": nil}, -1},
		{"empty values, empty array", http.Header{"A": {}, "B": nil}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vals []string // -1: nil
			if tc.vals >= 0 {
				vals = make([]string, tc.vals)
			}
			got, spare := cloneHeader(tc.h, vals)
			if want := tc.h.Clone(); !reflect.DeepEqual(got, want) {
				t.Fatalf("cloneHeader = %#v, want %#v", got, want)
			}
			for k, vv := range got {
				if len(vv) > 0 && len(tc.h[k]) > 0 && &vv[0] == &tc.h[k][0] {
					t.Errorf("%s shares the original's array", k)
				}
				if cap(vv) != len(vv) {
					t.Errorf("%s has room to grow in place: an append would write over its neighbour", k)
				}
			}
			for i := range spare {
				spare[i] = "spare"
			}
			if want := tc.h.Clone(); !reflect.DeepEqual(got, want) {
				t.Errorf("writing the spare values changed the copy: %#v", got)
			}
		})
	}
}
