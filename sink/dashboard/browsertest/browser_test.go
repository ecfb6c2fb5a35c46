package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/internal/chtest"
	"github.com/toolgate/toolgate/sink/dashboard/internal/dashtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// chromium finds Debian's chromium. Without it the browser test skips on a
// developer's machine and fails in CI (CI set).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("TOOLGATE_CHROMIUM"), "/usr/bin/chromium"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found and CI is set: install Debian's chromium (scripts/testdeps.sh does)")
	}
	t.Skip("chromium not found (looked for $TOOLGATE_CHROMIUM, /usr/bin/chromium, chromium on PATH); install Debian's chromium to run the browser test")
	return ""
}

// artifactsDir is where tests leave files for people: $TOOLGATE_ARTIFACTS, or
// artifacts/ in toolgate's root (gitignored), the folder of the go.mod that
// declares github.com/toolgate/toolgate.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOOLGATE_ARTIFACTS")
	if dir == "" {
		wd, _ := os.Getwd()
		for d := wd; ; d = filepath.Dir(d) {
			if mod, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(mod), "module github.com/toolgate/toolgate\n") {
				dir = filepath.Join(d, "artifacts")
				break
			}
			if filepath.Dir(d) == d {
				t.Fatalf("no toolgate go.mod above %s", wd)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBrowser loads the real dashboard, as the read-only user over a real
// ClickHouse holding events of every error code, in headless Chromium: the
// page loads with no console error, the stacked chart has one series per
// code present, and choosing a tool in the form (select, then Apply)
// changes the numbers to what a direct SQL query says. A screenshot of each
// view is kept as a test artifact.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	srv := chtest.Shared(t)
	evs := dashtest.GenEvents(4000)
	db := dashtest.Seed(t, srv, evs)
	dashtest.AddReader(t, srv)
	base := dashtest.Serve(t, srv, db)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, fmt.Sprintf("console.%s", e.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatal(err)
		}
	}
	eval := func(js string) []string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(c, chromedp.Evaluate[[]string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	screenshot := func(name string) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(artifactsDir(t), name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	from, to := dashtest.Now.Add(-6*time.Hour).Format("2006-01-02 15:04:05"), dashtest.Now.Add(time.Second).Format("2006-01-02 15:04:05")
	inRange := fmt.Sprintf("time >= toDateTime('%s') AND time < toDateTime('%s')", from, to)
	// check compares the chart and the table with direct SQL for tool ("" = all).
	check := func(tool string) {
		t.Helper()
		cond := inRange
		if tool != "" {
			cond += " AND tool = '" + tool + "'"
		}
		var want []string
		for _, r := range srv.Query(t, "SELECT DISTINCT error_code FROM "+db+".events WHERE "+cond+" AND error_code != '' ORDER BY error_code") {
			want = append(want, r[0])
		}
		got := eval(`Array.from(document.querySelectorAll('svg.chart path.series')).map(e => e.dataset.code)`)
		legend := eval(`Array.from(document.querySelectorAll('.legend li')).map(e => e.dataset.code)`)
		sort.Strings(got)
		sort.Strings(legend)
		if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(legend) != fmt.Sprint(want) {
			t.Errorf("tool %q: chart series %v, legend %v; want one per code present: %v", tool, got, legend, want)
		}
		if tool == "" && len(want) != 6 {
			t.Errorf("the generated events should hold all 6 error codes, SQL says %v", want)
		}
		totals := eval(`Array.from(document.querySelectorAll('svg.chart path.series')).map(e => e.dataset.code + '=' + e.dataset.total)`)
		var wantTotals []string
		for _, r := range srv.Query(t, "SELECT error_code, uniqExact(event_id) FROM "+db+".events WHERE "+cond+" AND error_code != '' GROUP BY error_code ORDER BY error_code") {
			wantTotals = append(wantTotals, r[0]+"="+r[1])
		}
		sort.Strings(totals)
		if fmt.Sprint(totals) != fmt.Sprint(wantTotals) {
			t.Errorf("tool %q: series totals %v, SQL %v", tool, totals, wantTotals)
		}
		rows := eval(`Array.from(document.querySelectorAll('#tools tbody tr[data-tool]')).map(r => [r.dataset.tool, r.querySelector('.calls').textContent, r.querySelector('.failures').textContent].join(' '))`)
		var wantRows []string
		for _, r := range srv.Query(t, "SELECT tool, uniqExact(event_id), uniqExactIf(event_id, error_code != '') FROM "+db+".events WHERE "+cond+" GROUP BY tool ORDER BY tool") {
			wantRows = append(wantRows, strings.Join(r, " "))
		}
		sort.Strings(rows)
		if fmt.Sprint(rows) != fmt.Sprint(wantRows) {
			t.Errorf("tool %q: table rows %v, SQL %v", tool, rows, wantRows)
		}
	}

	run(chromedp.Navigate(base + "/?last=6h"))
	run(chromedp.WaitVisible("svg.chart"))
	check("")
	screenshot("dashboard-all-tools.png")

	run(chromedp.SetValue("#tool", "docs_edit"), chromedp.Click("#apply"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		loc := eval(`[document.location.search, document.readyState]`)
		if strings.Contains(loc[0], "tool=docs_edit") && loc[1] == "complete" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the form did not navigate: %v", loc)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(chromedp.WaitVisible("svg.chart"))
	if sel := eval(`[document.querySelector('#tool').value, document.querySelector('#last').value]`); sel[0] != "docs_edit" || sel[1] != "6h" {
		t.Errorf("after Apply the form shows tool %q last %q; want docs_edit, 6h", sel[0], sel[1])
	}
	check("docs_edit")
	screenshot("dashboard-docs_edit.png")

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page wrote to the console:\n%s", strings.Join(problems, "\n"))
	}
}
