// Package events is the events section of toolgate's configuration
// (events:): the in-memory queue, the NDJSON file or ClickHouse, the disk
// spool in front of either, the sidecar's name in events, and what happens
// to a call whose event cannot be written. It owns the section's defaults
// and its validation; cmd composes it into the file.
package events

import (
	"os"

	"github.com/toolgate/toolgate/internal/section"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

// Config is the events section: where events go and what happens to a
// call whose event cannot be written.
type Config struct {
	// Sidecar names this instance in events. Default: the host name.
	Sidecar string `yaml:"sidecar"`
	// Queue bounds the in-memory queue between calls and the destination.
	Queue sink.QueueConfig `yaml:"queue"`
	// File is the NDJSON destination, used unless ClickHouse is configured.
	File sink.FileConfig `yaml:"file"`
	// ClickHouse sends events to ClickHouse, through the spool, when its
	// addr is set.
	ClickHouse clickhouse.Config `yaml:"clickhouse"`
	// Spool is the disk spool in front of ClickHouse (or, with
	// file.journal, in front of the NDJSON file): events are written there
	// first and deleted only once the destination has them.
	Spool sink.SpoolConfig `yaml:"spool"`
	// OnWriteFailure says what happens to a call whose event cannot be
	// written (the events disk is full or failing): OnWriteFailureRefuse
	// refuses it before it is forwarded (events_unavailable, 503,
	// retryable) and withholds the answer of one whose write failed after
	// it was forwarded; OnWriteFailureAnswer forwards and answers it, and
	// the lost event is counted. Default OnWriteFailureRefuse: events are
	// the audit trail.
	OnWriteFailure string `yaml:"on_write_failure"`
}

// events.on_write_failure values.
const (
	OnWriteFailureRefuse = "refuse"
	OnWriteFailureAnswer = "answer"
)

// Validate applies the section's defaults, resolves its relative paths
// against dir (the configuration file's folder), validates each part, and
// rejects conflicts (a journaled file with ClickHouse). Errors name the
// field from the section's root.
func (ec *Config) Validate(dir string) error {
	if ec.Sidecar == "" {
		ec.Sidecar, _ = os.Hostname()
	}
	if err := ec.Queue.Validate(); err != nil {
		return err
	}
	switch ec.OnWriteFailure {
	case "":
		ec.OnWriteFailure = OnWriteFailureRefuse
	case OnWriteFailureRefuse, OnWriteFailureAnswer:
	default:
		return section.Errorf("on_write_failure", "must be refuse or answer, got %q", ec.OnWriteFailure)
	}
	if ec.File.Path == "" {
		ec.File.Path = sink.DefaultFilePath
	}
	ec.File.Path = section.Resolve(dir, ec.File.Path)
	if err := ec.File.Validate(); err != nil {
		return err
	}
	toClickHouse := len(ec.ClickHouse.Addr) > 0
	switch j := ec.File.Journal; {
	case j == nil:
		journal := !toClickHouse
		ec.File.Journal = &journal
	case *j && toClickHouse:
		return section.Errorf("file.journal", "journals the NDJSON file, which is not used when events.clickhouse.addr is set (events go through the spool to ClickHouse)")
	}
	switch {
	case toClickHouse:
		if err := ec.ClickHouse.Validate(); err != nil {
			return err
		}
		if ec.Spool.Dir == "" {
			ec.Spool.Dir = DefaultSpoolDir
		}
	case ec.File.Journaled():
		if ec.Spool.Dir == "" {
			// The journal lives with the file it feeds, which is where
			// toolgate may write (the configuration's folder may be a
			// read-only mount).
			ec.Spool.Dir = ec.File.Path + JournalSuffix
		}
	default:
		return nil // no spool
	}
	ec.Spool.Dir = section.Resolve(dir, ec.Spool.Dir)
	return ec.Spool.Validate()
}

// DefaultSpoolDir is events.spool.dir's default with ClickHouse: the
// spool's folder, beside the configuration file.
const DefaultSpoolDir = "toolgate-spool"

// JournalSuffix makes events.spool.dir's default for the NDJSON file's
// journal: events.file.path with it appended, a folder beside the file.
const JournalSuffix = ".journal"
