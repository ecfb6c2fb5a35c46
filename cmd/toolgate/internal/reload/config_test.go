package reload

import (
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/section"
)

// TestConfigValidate checks reload.settle's default and bounds, the field
// named from the section's root.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		settle, want time.Duration
		refused      bool
	}{
		{0, DefaultSettle, false},
		{time.Second, time.Second, false},
		{MaxSettle, MaxSettle, false},
		{MaxSettle + time.Nanosecond, 0, true},
		{-time.Millisecond, 0, true},
	} {
		c := Config{Settle: tc.settle}
		err := c.Validate()
		var se *section.Error
		switch {
		case tc.refused && (!errors.As(err, &se) || se.Path != "settle"):
			t.Errorf("settle %s: err = %v, want a section.Error at settle", tc.settle, err)
		case !tc.refused && (err != nil || c.Settle != tc.want):
			t.Errorf("settle %s: %v, settle %s; want %s", tc.settle, err, c.Settle, tc.want)
		}
	}
}
