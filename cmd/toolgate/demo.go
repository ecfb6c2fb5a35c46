package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/demo"
	"github.com/toolgate/toolgate/internal/demotools"
	"github.com/toolgate/toolgate/sink"
)

func newDemoCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the sidecar in front of bundled demo tools and play a legacy client's calls",
		Long: `Demo starts the bundled demo upstream (literature search, structure lookup,
drug targets, document edits, and every failure the status table buckets),
starts the sidecar with the embedded demo configuration, plays a script of
calls as a legacy client would (through HTTP_PROXY or a base URL; some asking
for the envelope, some not; some with typos, missing fields and wrong types),
and prints what came back and where the events went. Nothing else is needed.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			return runDemo(c.Context(), c.OutOrStdout(), dir)
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "folder for the demo's config and events (default: a new temporary folder, kept)")
	return c
}

func runDemo(ctx context.Context, out io.Writer, dir string) error {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "toolgate-demo-"); err != nil {
			return err
		}
	}
	up, err := demotools.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("start demo upstream: %w", err)
	}
	defer up.Close()
	events := filepath.Join(dir, "events.ndjson")
	os.Remove(events)
	path, err := demo.WriteConfig(dir, up.URL(), events)
	if err != nil {
		return err
	}
	lc, err := loadConfig(path)
	if err != nil {
		return err
	}
	sc, err := startSidecar(lc, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo upstream  %s\nforward proxy  http://%s   (the legacy client's HTTP_PROXY)\nreverse        http://%s -> %s   (the legacy client's base URL)\nadmin          http://%s/metrics\n\n",
		up.URL(), sc.proxy.Addr("forward", 0), sc.proxy.Addr("reverse", 0), up.URL(), sc.adminAddr())
	results := demo.Play(ctx, demo.Endpoints{
		Upstream: up.URL(),
		Forward:  sc.proxy.Addr("forward", 0),
		Reverse:  "http://" + sc.proxy.Addr("reverse", 0),
	}, demo.Script())
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := sc.stop(stopCtx); err != nil {
		return err
	}
	stats := sc.events.queue.Stats()
	f, err := os.Open(events)
	if err != nil {
		return err
	}
	defer f.Close()
	evs, err := sink.ReadEvents(f)
	if err != nil {
		return err
	}
	demo.PrintTable(out, results, evs)
	byCode := map[string]int{}
	for _, e := range evs {
		code := e.ErrorCode
		if code == "" {
			code = "ok"
		}
		byCode[code]++
	}
	codes := make([]string, 0, len(byCode))
	for k := range byCode {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	fmt.Fprintf(out, "\n%d calls, %d events written to %s (dropped: %d)\nby error_code:", len(results), len(evs), events, stats.Dropped)
	for _, k := range codes {
		fmt.Fprintf(out, " %s=%d", k, byCode[k])
	}
	fmt.Fprintf(out, "\nupstream saw %d requests; refused calls never reached it.\nconfig used: %s\n", up.TotalHits(), path)
	return nil
}
