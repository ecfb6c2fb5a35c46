package dashboard_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/chtest"
)

// grafanaFile is the Grafana dashboard for the grafana-clickhouse-datasource.
const grafanaFile = "../../deploy/grafana/toolgate-failures.json"

// grafanaQueries returns every SQL text of the Grafana dashboard: each
// panel target's rawSql and each query variable's query, by a name.
func grafanaQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(grafanaFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				RawSQL     string `json:"rawSql"`
				Datasource struct {
					Type string `json:"type"`
				} `json:"datasource"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", grafanaFile, err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			if tg.Datasource.Type != "grafana-clickhouse-datasource" || tg.RawSQL == "" {
				t.Errorf("panel %q target %d: datasource %q, rawSql %d bytes", p.Title, i, tg.Datasource.Type, len(tg.RawSQL))
			}
			out[fmt.Sprintf("panel %s #%d", p.Title, i)] = tg.RawSQL
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			out["variable "+v.Name] = q
		}
	}
	if len(d.Panels) < 6 {
		t.Errorf("%d panels; want failures, per tool, sparklines, messages, adoption, freshness", len(d.Panels))
	}
	return out
}

// TestGrafanaQueries substitutes the datasource's macros and the
// dashboard's variables with concrete values, as Grafana would, and runs
// every query of the Grafana dashboard on the real ClickHouse (18.16 in
// CI) as the read-only user, for "All" and for one value of each filter.
// The failures panel must agree with the Go dashboard's numbers, the
// answers panel with a count made in Go.
func TestGrafanaQueries(t *testing.T) {
	srv := chtest.Shared(t)
	ans := answerEvents(300)
	evs := append(genEvents(2000), budgetEvents(60)...)         // with the budget step's refusals, for its panel
	evs = append(append(evs, ans...), definitionEvents(120)...) // and answers and changed definitions, for theirs
	db := seed(t, srv, evs)
	addReader(t, srv)
	queries := grafanaQueries(t)
	from, to := now.Add(-6*time.Hour), now
	sqlstr := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	views := []struct {
		name              string
		tool, agent, code string
	}{
		{"all", "__all", "__all", "__all"},
		{"one of each", "docs_edit", "agent-b", "policy"},
		{"quote in a value", "it's", "__all", "__all"}, // Grafana's sqlstring doubles quotes
	}
	leftover := regexp.MustCompile(`\$\{?[A-Za-z_]`)
	for _, v := range views {
		for name, q := range queries {
			t.Run(v.name+"/"+name, func(t *testing.T) {
				if strings.Contains(q, "toStartOfInterval") {
					t.Errorf("uses toStartOfInterval, which 18.16 lacks")
				}
				sql := strings.NewReplacer(
					"${database}", db,
					"$__timeFilter(time)", fmt.Sprintf("time >= toDateTime(%d) AND time <= toDateTime(%d)", from.Unix(), to.Unix()),
					"$__interval_s", "300",
					"${tool:sqlstring}", sqlstr(v.tool),
					"${agent:sqlstring}", sqlstr(v.agent),
					"${error_code:sqlstring}", sqlstr(v.code),
				).Replace(q)
				if m := leftover.FindString(sql); m != "" {
					t.Fatalf("a macro or variable is left after substitution (%s):\n%s", m, sql)
				}
				out, err := asReader(srv, sql)
				if err != nil {
					t.Fatalf("%v\n%s", err, sql)
				}
				if v.name == "all" && strings.TrimSpace(out) == "" {
					t.Errorf("no rows over generated events:\n%s", sql)
				}
				if v.name == "quote in a value" && strings.HasPrefix(name, "panel") && !strings.Contains(name, "freshness") && strings.TrimSpace(out) != "" {
					t.Errorf("rows for a tool that does not exist:\n%s", out)
				}
				if strings.HasPrefix(name, "panel Answers:") && v.name == "all" {
					// tool, checked, passed, redacted, withheld, would_redact, would_withhold, uninspected, redactions, ...
					want := map[string]string{}
					for tool, r := range wantAnswers(ans, from, "", "") {
						want[tool] = fmt.Sprint(r.Checked, r.Passed, r.Redacted, r.Withheld, r.WouldRedact, r.WouldWithhold, r.Uninspected, r.Redactions)
					}
					got := map[string]string{}
					for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
						if f := strings.Split(line, "\t"); len(f) == 11 {
							got[f[0]] = strings.Join(f[1:9], " ")
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("answers per tool %v, want %v", got, want)
					}
				}
				if strings.HasPrefix(name, "panel Failures over time") && v.name != "quote in a value" {
					want := map[string]uint64{}
					for _, e := range evs {
						if e.ErrorCode == "" || e.Time.Before(from) || e.Time.After(to) ||
							(v.tool != "__all" && e.Tool != v.tool) || (v.agent != "__all" && e.Agent != v.agent) || (v.code != "__all" && e.ErrorCode != v.code) {
							continue
						}
						want[e.ErrorCode]++
					}
					got := map[string]uint64{}
					for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
						if f := strings.Split(line, "\t"); len(f) == 3 {
							got[f[1]] += atoi(t, f[2])
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("failures by code %v, want %v", got, want)
					}
				}
			})
		}
	}
}
