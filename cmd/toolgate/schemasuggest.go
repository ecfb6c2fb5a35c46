package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/schemasuggest"
	"github.com/toolgate/toolgate/internal/atomicfile"
)

func newSchemaSuggestCmd() *cobra.Command {
	var tool, events, write string
	var asJSON bool
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

It prints the evidence, then the schema; with --write FILE it writes the
schema to FILE (for schema_file) and prints the evidence. Try the schema with
schema_mode: dry_run before you enforce it (docs/schema-suggest.md).`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if tool == "" || events == "" {
				return exit.AsUsage(fmt.Errorf("--tool and --events are required (see '%s --help')", c.CommandPath()))
			}
			var in io.Reader = c.InOrStdin()
			if events != "-" {
				f, err := os.Open(events)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			obs, err := schemasuggest.Read(in, tool)
			if err != nil {
				return fmt.Errorf("%s: %w", events, err)
			}
			sg, err := schemasuggest.Suggest(obs)
			if err != nil {
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
	f.StringVar(&write, "write", "", "write the schema to this file instead of printing it")
	f.BoolVar(&asJSON, "json", false, "print the schema and its evidence as one JSON document")
	return c
}
