package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cmd/toolgate/internal/approvalcmd"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/exit"
	"github.com/toolgate/toolgate/policies/approval"
	"github.com/toolgate/toolgate/policies/approval/audit"
)

// approvalsFlags are the flags every `toolgate approvals` command takes.
type approvalsFlags struct {
	config string
	as     string
	note   string
	json   bool
	limit  int
}

func newApprovalsCmd() *cobra.Command {
	var fl approvalsFlags
	c := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide the approval requests of calls that need a person's approval",
		Long: `Approvals lists the requests of calls that need a person's approval and
records decisions on them, in the store the configuration's approvals
section names (the events' ClickHouse, or the local file): every sidecar
sharing that store honours them. Whoever can run this command with the
configuration (and its ClickHouse credentials) can decide; the decision
records --as (default: the login name, as "cli:NAME"). See docs/approvals.md.`,
	}
	pf := c.PersistentFlags()
	pf.StringVarP(&fl.config, "config", "c", "toolgate.yaml", "toolgate configuration file (its events and approvals sections)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List pending and recent approval requests, newest first",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			return approvalcmd.WithGate(c.Context(), fl.config, func(g *approval.Gate) error {
				recs, err := g.List(c.Context(), fl.limit)
				if err != nil {
					return err
				}
				return approvalcmd.Print(c.OutOrStdout(), g, recs, fl.json)
			})
		},
	}
	list.Flags().BoolVar(&fl.json, "json", false, "print JSON, one record a line")
	list.Flags().IntVar(&fl.limit, "limit", 100, "at most this many requests")
	c.AddCommand(list)
	for _, v := range []struct{ use, verdict, short string }{
		{"approve", audit.VerdictApproved, "Approve a request: the same call, retried, goes upstream (approvals.uses times)"},
		{"deny", audit.VerdictDenied, "Deny a request: the caller gets policy/approval_denied"},
		{"revise", audit.VerdictRevised, "Ask for changed arguments: the caller gets validation/revision_requested with --note"},
	} {
		cmd := &cobra.Command{
			Use:   v.use + " ID",
			Short: v.short,
			Args:  exactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				if v.verdict == audit.VerdictRevised && strings.TrimSpace(fl.note) == "" {
					return exit.Usagef("revise needs --note saying what to change")
				}
				who := fl.as
				if who == "" {
					who = approvalcmd.LoginName()
				}
				return approvalcmd.WithGate(c.Context(), fl.config, func(g *approval.Gate) error {
					rec, err := g.Decide(c.Context(), args[0], v.verdict, "cli:"+who, fl.note)
					if err != nil {
						return err
					}
					fmt.Fprintf(c.OutOrStdout(), "%s %s (tool %s, agent %s) by cli:%s\n", args[0], v.verdict, rec.Request.Tool, rec.Request.Agent, who)
					return nil
				})
			},
		}
		cmd.Flags().StringVar(&fl.as, "as", "", "who decides, as recorded (default: the login name)")
		cmd.Flags().StringVar(&fl.note, "note", "", "a note for the caller (required by revise)")
		c.AddCommand(cmd)
	}
	return c
}
