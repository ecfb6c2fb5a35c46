package dashboard_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/sink/dashboard"
)

// revisionEvents are calls of two sidecars during a rollout of policy
// bundle revisions: the first sidecar moves from r1 to r2 two hours ago
// (and, for an hour, decides some calls under each, as during a switch),
// the second stays on r1.
func revisionEvents(n int) []sink.Event {
	evs := make([]sink.Event, n)
	for i := range evs {
		age := time.Duration(i*53%(4*3600)+1) * time.Second
		sc := sidecars[i%2]
		pv := "policies=r1"
		if sc == sidecars[0] && (age < 2*time.Hour || age < 3*time.Hour && i%3 == 0) {
			pv = "policies=r2"
		}
		evs[i] = sink.Event{
			EventID: fmt.Sprintf("rev-%05d", i), Time: now.Add(-age),
			Sidecar: sc, Listener: "forward", Tool: tools[i%3%2], Agent: agents[i%2],
			Session: fmt.Sprintf("s-%d", i%5), Method: "GET", OK: true, TotalUS: 40,
			PolicyVersion: pv, ConfigVersion: "c1",
		}
	}
	return evs
}

// TestRevisionsPanel reads the policy revisions panel as JSON, for several
// views, and checks every row (calls, first and last) against a count made
// in Go from the events written (a replayed batch among them), and the
// order (each sidecar's newest version first); the page shows the panel.
func TestRevisionsPanel(t *testing.T) {
	srv := chtest.Shared(t)
	revs := revisionEvents(400)
	db := seed(t, srv, revs) // the first 50 are written twice, as a replay would
	addReader(t, srv)
	base := serve(t, srv, db)

	type key struct{ sidecar, version string }
	type span struct {
		calls       uint64
		first, last time.Time
	}
	views := []struct {
		name, query string
		from        time.Time
		tool        string
	}{
		{name: "default 24h", from: now.Add(-24 * time.Hour)},
		{name: "last 1h", query: "last=1h", from: now.Add(-time.Hour)},
		{name: "one tool", query: "tool=" + tools[1], from: now.Add(-24 * time.Hour), tool: tools[1]},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			want := map[key]span{}
			for _, e := range revs {
				if e.Time.Before(v.from) || v.tool != "" && e.Tool != v.tool {
					continue
				}
				k := key{e.Sidecar, e.PolicyVersion}
				s := want[k]
				at := e.Time.Truncate(time.Second)
				if s.calls == 0 || at.Before(s.first) {
					s.first = at
				}
				if at.After(s.last) {
					s.last = at
				}
				s.calls++
				want[k] = s
			}
			var got answer[[]dashboard.RevisionRow]
			if st := getJSON(t, base+"/api/revisions?"+v.query, &got); st != 200 {
				t.Fatalf("revisions: %d %s", st, got.Error)
			}
			have := map[key]span{}
			for i, r := range got.Data {
				have[key{r.Sidecar, r.PolicyVersion}] = span{r.Calls, r.First, r.Last}
				if i > 0 {
					p := got.Data[i-1]
					if r.Sidecar < p.Sidecar || r.Sidecar == p.Sidecar && r.Last.After(p.Last) {
						t.Errorf("row %d (%s, %s) out of order after (%s, %s)", i, r.Sidecar, r.PolicyVersion, p.Sidecar, p.PolicyVersion)
					}
				}
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("revisions:\n got %v\nwant %v", have, want)
			}
		})
	}

	pageHas(t, base+"/?last=24h", `<section id="revisions">`, `<td>policies=r2</td>`, `<td>`+sidecars[1]+`</td>`)
}
