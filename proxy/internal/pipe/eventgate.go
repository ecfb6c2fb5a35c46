package pipe

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/conf"
)

// EventGate says whether a call's event can be kept now. sink.Queue
// satisfies it. With a gate (events.on_write_failure: refuse) a call is
// forwarded only while Durable returns nil, and a call whose event the
// Recorder did not keep (Record returned false) is not answered: its
// answer is replaced by the events_unavailable refusal, or, for an
// answer passed through raw, its connection is cut before the last bytes.
// Without one (answer) calls go on and a lost event is only counted by
// the Recorder.
type EventGate interface {
	// Durable returns nil when an event recorded now would be kept, and
	// the reason it would not otherwise.
	Durable() error
}

// eventsRetryAfterMS is the Retry-After of an events_unavailable refusal.
const eventsRetryAfterMS = 1000

// Outcomes of the events_unavailable counter.
const (
	eventsRefused  = "refused"  // not forwarded: the events path was failing
	eventsWithheld = "withheld" // forwarded, then its event was not kept: the answer was withheld
)

// eventsCounter is toolgate_proxy_events_unavailable_total.
type eventsCounter = prometheus.CounterVec

func NewEventsUnavailable() *eventsCounter {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "toolgate", Subsystem: "proxy", Name: "events_unavailable_total",
		Help: "Calls not answered because their event could not be written (events.on_write_failure: refuse), by outcome: refused (never forwarded) or withheld (forwarded, then the event failed; the answer was replaced or cut).",
	}, []string{"outcome"})
	v.WithLabelValues(eventsRefused)
	v.WithLabelValues(eventsWithheld)
	return v
}

// eventsGate refuses the call when the gate says its event cannot be kept
// now; nil lets it go upstream. dispatch calls it last, just before the
// call is sent.
func (c *Call) eventsGate(r *http.Request) *http.Response {
	g := c.Host.Events
	if g == nil {
		return nil
	}
	err := g.Durable()
	if err == nil {
		return nil
	}
	c.Host.EventsLost.WithLabelValues(eventsRefused).Inc()
	c.Host.LogLimited(&c.Host.eventsLog, slog.LevelError, "call refused: its event cannot be written (events.on_write_failure: refuse)", "tool", c.Event.Tool, "error", err)
	return c.Refuse(r, eventsUnavailableRefusal(c.Subject()+" was not sent: toolgate cannot write its event (the events disk is full or failing), and calls are refused until it can; retry shortly"))
}

func eventsUnavailableRefusal(detail string) *conf.Refusal {
	ref := conf.Refuse(bucketing.CodeUpstream, bucketing.ReasonEventsUnavailable, detail, nil)
	ms := int64(eventsRetryAfterMS)
	ref.RetryAfterMS = &ms
	return ref
}

// Withheld is the answer of a call that was forwarded and whose event was
// then not kept: the events_unavailable envelope, in place of the answer
// the caller would have had. Its event is not recorded again (it is the
// one that was lost).
func (c *Call) Withheld(r *http.Request) *http.Response {
	c.Host.EventsLost.WithLabelValues(eventsWithheld).Inc()
	sent := "it may have reached upstream"
	if c.Event.Refused {
		sent = "it was not sent upstream"
	}
	ref := eventsUnavailableRefusal(c.Subject() + ": toolgate could not write this call's event (the events disk is full or failing), so its answer is withheld; " + sent)
	return EnvelopeResponse(r, conf.RefusalStatus(ref), string(ref.Code),
		http.Header{"Retry-After": {"1"}}, ref.Envelope())
}
