package reload

import (
	"time"

	"github.com/toolgate/toolgate/internal/section"
)

// Config is the reload section of the configuration file (reload:). It
// takes effect at start; a reload that changes it says a restart is
// needed.
type Config struct {
	// Settle is how long the configuration file and every file it names
	// must read the same before a reload reads them, so a file still being
	// written is never loaded half-written. It applies to reloads asked for
	// by a file change, SIGHUP and POST /reload alike. Default
	// DefaultSettle (250ms); at most MaxSettle (1m).
	Settle time.Duration `yaml:"settle"`
}

const (
	// DefaultSettle is reload.settle's default.
	DefaultSettle = 250 * time.Millisecond
	// MaxSettle bounds reload.settle.
	MaxSettle = time.Minute
)

// Validate applies the section's defaults and bounds; errors name the
// field from the section's root.
func (r *Config) Validate() error {
	switch s := r.Settle; {
	case s == 0:
		r.Settle = DefaultSettle
	case s < 0 || s > MaxSettle:
		return section.Errorf("settle", "%s is outside 0 to %s", s, MaxSettle)
	}
	return nil
}
