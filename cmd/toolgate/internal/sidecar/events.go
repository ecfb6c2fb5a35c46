package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/clickhouse"
	"github.com/toolgate/toolgate/sink/events"
)

// retentionEvery is how often old ClickHouse partitions are looked for.
const retentionEvery = time.Hour

// eventPath is where events go: the bounded queue in front of either the
// NDJSON file, or the disk spool in front of ClickHouse (when
// events.clickhouse.addr is set). A call waits for its event's write to
// the file or spool, at most events.queue.max_wait; never for ClickHouse.
type eventPath struct {
	queue *sink.Queue
	file  *sink.File
	spool *sink.Spool
	ch    *clickhouse.Writer
	stop  context.CancelFunc // the retention loop
	done  chan struct{}
}

// openEvents opens the destination and starts the queue in front of it.
func openEvents(ec events.Config, log *slog.Logger) (*eventPath, error) {
	// The queue's configuration is checked before the destination opens,
	// so a bad one leaves nothing to close. config.Load checked it already.
	qc := ec.Queue
	if err := qc.Validate(); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	ep := &eventPath{}
	var w sink.Writer
	if len(ec.ClickHouse.Addr) > 0 {
		ch, err := clickhouse.Open(context.Background(), ec.ClickHouse, log.With("component", "clickhouse"))
		if err != nil {
			return nil, err
		}
		sp, err := sink.OpenSpool(ec.Spool, ch, log.With("component", "spool"))
		if err != nil {
			ch.Close()
			return nil, fmt.Errorf("open spool: %w", spoolInUse(err, "a spool", "another events.spool.dir"))
		}
		ep.ch, ep.spool, w = ch, sp, sp
		if ec.ClickHouse.RetentionDays > 0 {
			ep.startRetention(ec.ClickHouse.RetentionDays, log)
		}
	} else if ec.File.Journaled() {
		sp, f, err := sink.OpenJournaledFile(ec.File, ec.Spool, log.With("component", "spool"))
		if err != nil {
			return nil, fmt.Errorf("open events file: %w", spoolInUse(err, "an events file and its journal", "another events.file.path (and events.spool.dir, if set)"))
		}
		ep.file, ep.spool, w = f, sp, sp
	} else {
		f, err := sink.OpenFile(ec.File)
		if err != nil {
			return nil, fmt.Errorf("open events file: %w", err)
		}
		ep.file, w = f, f
	}
	// The queue writes each group of events with one write(2) before their
	// calls are answered, and fsyncs the file or spool every sync_interval.
	q, err := sink.NewQueue(w, ec.Queue, log.With("component", "sink"))
	if err != nil {
		// Only a nil Writer gets here: close what was opened, at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return nil, errors.Join(err, ep.close(ctx))
	}
	ep.queue = q
	return ep, nil
}

// spoolInUse adds to the error of a spool another process holds what the
// operator can do about it: two sidecars cannot share what (the spool, or
// the events file and its journal), so stop the other or give this one
// another fix. Other errors it returns as they are.
func spoolInUse(err error, what, fix string) error {
	if !errors.Is(err, sink.ErrSpoolInUse) {
		return err
	}
	return fmt.Errorf("%w; two sidecars cannot share %s: stop that one, or give this one %s", err, what, fix)
}

// gate is the proxy's EventGate: the queue under events.on_write_failure:
// refuse, nil under answer.
func (ep *eventPath) gate(ec events.Config) proxy.EventGate {
	if ec.OnWriteFailure == events.OnWriteFailureAnswer {
		return nil
	}
	return ep.queue
}

// startRetention drops ClickHouse partitions older than days, at start and
// then every retentionEvery.
func (ep *eventPath) startRetention(days int, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	ep.stop, ep.done = cancel, make(chan struct{})
	go func() {
		defer close(ep.done)
		t := time.NewTicker(retentionEvery)
		defer t.Stop()
		for {
			cutoff := time.Now().UTC().AddDate(0, 0, -days)
			if _, err := ep.ch.DropPartitionsBefore(ctx, cutoff); err != nil && ctx.Err() == nil {
				log.Warn("retention: dropping old partitions failed; will try again", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// where names the destination for the log and /status.
func (ep *eventPath) where(ec events.Config) string {
	if ep.ch != nil {
		return fmt.Sprintf("clickhouse %v database %s (spool %s)", ec.ClickHouse.Addr, ec.ClickHouse.Database, ec.Spool.Dir)
	}
	if ep.spool != nil {
		return fmt.Sprintf("%s (journal %s)", ec.File.Path, ec.Spool.Dir)
	}
	return ec.File.Path
}

// collectors are the event path's metrics.
func (ep *eventPath) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{ep.queue}
	if ep.spool != nil {
		cs = append(cs, ep.spool)
	}
	return cs
}

// eventsStatus is the events part of /status.
type eventsStatus struct {
	Queue       sink.QueueStats   `json:"queue"`
	Destination string            `json:"destination"`
	Spool       *sink.SpoolStatus `json:"spool,omitempty"`
	// Rejected counts events ClickHouse refused on their own and dropped.
	Rejected uint64 `json:"clickhouse_rejected,omitempty"`
}

func (ep *eventPath) status(ec events.Config) eventsStatus {
	st := eventsStatus{Queue: ep.queue.Stats(), Destination: ep.where(ec)}
	if ep.spool != nil {
		s := ep.spool.Status()
		st.Spool = &s
		if ep.ch != nil {
			st.Rejected = ep.ch.Rejected()
		}
	}
	return st
}

// close flushes the queue into the destination, then closes it: the spool
// ships what it can within ctx and keeps the rest on disk for the next start.
func (ep *eventPath) close(ctx context.Context) error {
	if ep.stop != nil {
		ep.stop()
		<-ep.done
	}
	var err error
	if ep.queue != nil {
		err = ep.queue.Close(ctx)
	}
	// The spool ships into the file (file.journal) or ClickHouse: it
	// closes first.
	if ep.spool != nil {
		err = errors.Join(err, ep.spool.Close(ctx))
	}
	if ep.ch != nil {
		err = errors.Join(err, ep.ch.Close())
	}
	if ep.file != nil {
		err = errors.Join(err, ep.file.Close())
	}
	return err
}
