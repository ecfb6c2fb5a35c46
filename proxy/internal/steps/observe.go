package steps

import (
	"context"
	"net/http"
	"net/url"

	"github.com/toolgate/toolgate/proxy/argshape"
	"github.com/toolgate/toolgate/proxy/internal/conf"
	"github.com/toolgate/toolgate/proxy/internal/pipe"
)

// observeStep records the shape of the call's arguments in its event
// (step 2a, right after extraction, so that a call refused later has its
// shape too). It never refuses: a body the tool did not read as its
// arguments is noted (argshape.NoteBodyUnread) and goes on as it would.
type observeStep struct{ t *conf.Tool }

func BuildObserve(e *pipe.ChainEnv) pipe.RequestStep {
	if !e.Tool.Cfg.Observe.On {
		return nil
	}
	return observeStep{t: e.Tool}
}

func (s observeStep) Check(_ context.Context, c *pipe.Call) *conf.Refusal {
	t, r := s.t, c.In
	src := t.Sources
	if src == 0 {
		src = conf.BitPath | conf.BitQuery
	}
	bodySrc, _ := bodySource(t, r)
	var query url.Values
	if src&conf.BitQuery != 0 && r.URL.RawQuery != "" {
		query, _ = url.ParseQuery(r.URL.RawQuery) // extraction refused a query it cannot decode
	}
	o := argshape.Options{EnumFields: t.EnumFields, StringSourced: func(name string) bool {
		if _, ok := c.Vars[name]; ok && src&conf.BitPath != 0 {
			return true
		}
		if _, ok := query[name]; ok {
			return true
		}
		return bodySrc == conf.BitForm
	}}
	shape := argshape.Of(c.Args, o)
	if bodySrc == 0 && (r.ContentLength > 0 || r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody) {
		shape = withNote(shape, argshape.NoteBodyUnread)
	}
	c.Event.ArgShape = shape
	return nil
}

// withNote adds a note to an encoded shape (a JSON object).
func withNote(shape, note string) string {
	if shape == "{}" {
		return `{"n":"` + note + `"}`
	}
	return shape[:len(shape)-1] + `,"n":"` + note + `"}`
}
