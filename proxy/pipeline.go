package proxy

import (
	"net/http"
	"net/url"
	"time"

	"github.com/toolgate/toolgate/bucketing"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// handle runs the pipeline for one request whose upstream URL is target and
// returns the answer for the caller. It never returns nil. A call whose
// event was not kept while an EventGate is set gets the events_unavailable
// refusal in place of its answer (a raw answer's body is cut instead, see
// passBody).
func (s *Server) Handle(r *http.Request, kind string, target *url.URL) *http.Response {
	c := &pipe.Call{Host: &s.Host, State: s.state.Load(), Start: time.Now(), Client: r.Context()}
	resp := c.Handle(r, kind, target)
	if c.Lost && c.Event.Reason != bucketing.ReasonEventsUnavailable {
		if _, passed := resp.Body.(*pipe.PassBody); !passed {
			if resp.Body != nil {
				resp.Body.Close()
			}
			return c.Withheld(r)
		}
	}
	return resp
}
