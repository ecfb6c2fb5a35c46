package events

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/section"
)

// TestValidateDefaults checks the section's defaults as Validate applies
// them without the rest of the file: refuse on a failed write, the NDJSON
// file beside the configuration, journaled into a folder beside it, and
// with ClickHouse the spool in DefaultSpoolDir and no journal.
func TestValidateDefaults(t *testing.T) {
	dir := t.TempDir()
	var file Config
	if err := file.Validate(dir); err != nil {
		t.Fatal(err)
	}
	wantFile := filepath.Join(dir, "toolgate-events.ndjson")
	if file.OnWriteFailure != OnWriteFailureRefuse || file.File.Path != wantFile ||
		file.File.Journal == nil || !*file.File.Journal || file.Spool.Dir != wantFile+JournalSuffix || file.Sidecar == "" {
		t.Errorf("defaults = on_write_failure %q, file %q, journal %v, spool %q, sidecar %q; want refuse, %s, true, %s, the host name",
			file.OnWriteFailure, file.File.Path, file.File.Journal, file.Spool.Dir, file.Sidecar, wantFile, wantFile+JournalSuffix)
	}
	ch := Config{Sidecar: "s-1"}
	ch.ClickHouse.Addr = []string{"127.0.0.1:9000"}
	if err := ch.Validate(dir); err != nil {
		t.Fatal(err)
	}
	if ch.File.Journal == nil || *ch.File.Journal || ch.Spool.Dir != filepath.Join(dir, DefaultSpoolDir) || ch.Sidecar != "s-1" {
		t.Errorf("with ClickHouse: journal %v, spool %q, sidecar %q; want false, %s, s-1",
			ch.File.Journal, ch.Spool.Dir, ch.Sidecar, filepath.Join(dir, DefaultSpoolDir))
	}
}

// TestValidateRefuses checks that Validate names the field, from the
// section's root, of what it refuses.
func TestValidateRefuses(t *testing.T) {
	journal := true
	for _, tc := range []struct {
		name  string
		c     Config
		field string
	}{
		{"unknown on_write_failure", Config{OnWriteFailure: "drop"}, "on_write_failure"},
		{"journal with ClickHouse", func() Config {
			c := Config{}
			c.File.Journal = &journal
			c.ClickHouse.Addr = []string{"127.0.0.1:9000"}
			return c
		}(), "file.journal"},
	} {
		err := tc.c.Validate(t.TempDir())
		var se *section.Error
		if !errors.As(err, &se) || se.Path != tc.field {
			t.Errorf("%s: err = %v, want a section.Error at %s", tc.name, err, tc.field)
		}
	}
}
