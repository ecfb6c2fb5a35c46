package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/schemasuggest"
	"github.com/toolgate/toolgate/internal/atomicfile"
	"github.com/toolgate/toolgate/sink/clickhouse"
)

func newSchemaSuggestCmd() *cobra.Command {
	var tool, events, write string
	var asJSON bool
	var opts schemasuggest.Options
	var ch schemasuggest.ClickHouse
	var since time.Duration
	var limit int
	c := &cobra.Command{
		Use:   "suggest",
		Short: "Propose a tool's argument schema from the calls it observed (observe: true), with the evidence",
		Long: `Suggest reads the events of a tool in observe mode (their arg_shape: the
names, types and formats of each call's arguments, never the values) from an
NDJSON events file, and proposes a strict JSON Schema (draft 2020-12) for the
tool's arguments: every object closed (additionalProperties: false), a field
required only when every observed call had it, the union of the types seen
(integer apart from number), a format only when every value had it, an enum
only for the fields listed in observe.enum_fields. The evidence says how many
calls were seen, and per field how often it appeared, with which types.

--clickhouse ADDR reads the events from ClickHouse instead (the newest
--limit calls of the last --since), with SELECT on the events table only.

It prints the evidence, then the schema; with --write FILE it writes the
schema to FILE (for schema_file) and prints the evidence. Try the schema with
schema_mode: dry_run before you enforce it (docs/schema-suggest.md).

Observed calls include the callers' mistakes. --min-share leaves out of the
schema what is rarer than that share at its place (a member name, a type,
strings that do not read as the number the others carry): a typo in 1 call of
200 is then refused rather than learned. The evidence lists what it left out.
A member some call lacked is never made required.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if tool == "" || (events == "") == (len(ch.Addr) == 0) {
				return exit.AsUsage(fmt.Errorf("--tool, and one of --events or --clickhouse, are required (see '%s --help')", c.CommandPath()))
			}
			obs, err := readObserved(c, tool, events, ch, since, limit)
			if err != nil {
				return err
			}
			sg, err := schemasuggest.Suggest(obs, opts)
			if err != nil {
				if opts.MinShare < 0 || opts.MinShare > 0.5 {
					return exit.AsUsage(fmt.Errorf("--min-share: %w", err))
				}
				return err
			}
			out := c.OutOrStdout()
			if asJSON {
				b, err := json.MarshalIndent(sg, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s\n", b)
				return nil
			}
			sg.WriteEvidence(out)
			if write != "" {
				if err := atomicfile.WriteFile(write, append(sg.Schema, '\n'), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(out, "schema written to %s\n", write)
				return nil
			}
			fmt.Fprintf(out, "%s\n", sg.Schema)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&tool, "tool", "", "the tool whose observed calls to read (required)")
	f.StringVar(&events, "events", "", "NDJSON events file, as events.file writes it; - for stdin (required)")
	f.StringSliceVar(&ch.Addr, "clickhouse", nil, "read the events from this ClickHouse (native host:port; repeat for more) instead of --events")
	f.StringVar(&ch.Database, "database", clickhouse.DefaultDatabase, "ClickHouse database (with --clickhouse)")
	f.StringVar(&ch.Username, "username", "", "ClickHouse user (with --clickhouse)")
	f.StringVar(&ch.PasswordEnv, "password-env", "", "environment variable holding the ClickHouse password (with --clickhouse)")
	f.DurationVar(&since, "since", 7*24*time.Hour, "with --clickhouse: read the calls of this long ago to now")
	f.IntVar(&limit, "limit", 100000, "with --clickhouse: read at most this many calls, the newest")
	f.StringVar(&write, "write", "", "write the schema to this file instead of printing it")
	f.Float64Var(&opts.MinShare, "min-share", 0, "leave out what is rarer than this share of its place (0 to 0.5; 0.01: a name in under 1% of calls), most likely the callers' mistakes")
	f.BoolVar(&asJSON, "json", false, "print the schema and its evidence as one JSON document")
	return c
}

// readObserved reads the tool's observed shapes from the events file (or
// stdin, "-"), or from ClickHouse.
func readObserved(c *cobra.Command, tool, events string, ch schemasuggest.ClickHouse, since time.Duration, limit int) (*schemasuggest.Observed, error) {
	if len(ch.Addr) > 0 {
		obs, err := schemasuggest.ReadClickHouse(c.Context(), ch, tool, time.Now().Add(-since), limit)
		if err != nil {
			return nil, fmt.Errorf("clickhouse %v: %w", ch.Addr, err)
		}
		return obs, nil
	}
	var in io.Reader = c.InOrStdin()
	if events != "-" {
		f, err := os.Open(events)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	obs, err := schemasuggest.Read(in, tool)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", events, err)
	}
	return obs, nil
}
