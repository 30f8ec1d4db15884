package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// usageFlags are `usage`'s flags.
type usageFlags struct {
	since, until, window string
	user, agent          string
	all                  bool
	out                  outputFormat
}

// newUsageCmd is `usage`: what agents spent over a window (tokens per model, sandbox
// time per environment, MCP calls per server), per agent and user, from the store.
func newUsageCmd(g *globals) *cobra.Command {
	var fl usageFlags
	c := g.storeCmd("usage", "Show tokens per model, sandbox-seconds per environment and MCP calls per server, per agent and user, over a window (default: yours, the last 7 days)",
		cobra.NoArgs, func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
			f, err := fl.filter(g, st, time.Now())
			if err != nil {
				return err
			}
			u, err := st.Usage(ctx, f)
			if err != nil {
				return err
			}
			r := api.UsageOf(u, f)
			if fl.out == outputJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return printUsage(cmd.OutOrStdout(), r)
		})
	c.Flags().StringVar(&fl.since, "since", "", "start of the window: RFC 3339 or a date (YYYY-MM-DD, midnight UTC); default: --until minus --window")
	c.Flags().StringVar(&fl.until, "until", "", "end of the window (excluded): RFC 3339 or a date; default: now")
	c.Flags().StringVar(&fl.window, "window", "", fmt.Sprintf("length of the window before --until, when --since is not given: days (7d) or a duration (36h); default 7d, at most %dd",
		int(store.MaxUsageWindow.Hours()/24)))
	c.Flags().StringVar(&fl.user, "user", "", "this user's sessions (default: yours, the --owner)")
	c.Flags().StringVar(&fl.agent, "agent", "", "only this agent's sessions")
	c.Flags().BoolVar(&fl.all, "all", false, "every user's sessions")
	addOutputFlag(c, &fl.out, "")
	return c
}

// filter is the store's filter for the flags at now; a bad window is a usage error
// naming its flag.
func (fl usageFlags) filter(g *globals, st *store.Store, now time.Time) (store.UsageFilter, error) {
	from, to, err := api.UsageWindow(fl.since, fl.until, fl.window, now)
	var we *api.WindowError
	if errors.As(err, &we) {
		return store.UsageFilter{}, usageErrorf("--%s: %s", we.Param, we.Message)
	}
	if fl.all && fl.user != "" {
		return store.UsageFilter{}, usageErrorf("--all and --user %q: give one (--all is every user's, --user one user's)", fl.user)
	}
	f := store.UsageFilter{From: from, To: to, User: fl.user, Agent: fl.agent}
	if f.User == "" && !fl.all {
		if f.User, err = g.identity(st); err != nil {
			return f, err
		}
	}
	return f, nil
}

// printUsage prints a report as three tables (tokens, sandboxes, MCP calls) and totals.
func printUsage(w io.Writer, r api.UsageReport) error {
	who := r.User
	if who == "" {
		who = "every user"
	}
	if r.Agent != "" {
		who += ", agent " + r.Agent
	}
	fmt.Fprintf(w, "Usage of %s from %s to %s\n\n", who, r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	tw := newTable(w)
	fmt.Fprintln(tw, "AGENT\tUSER\tMODEL\tSTEPS\tINPUT TOKENS\tOUTPUT TOKENS")
	for _, t := range r.Tokens {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", t.Agent, t.User, orDash(t.Model), t.Steps, t.InputTokens, t.OutputTokens)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t")
	fmt.Fprintln(tw, "AGENT\tUSER\tENVIRONMENT\tSANDBOX SECONDS\t\t")
	for _, b := range r.Sandboxes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t\t\n", b.Agent, b.User, orDash(b.Environment), b.Seconds)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t")
	fmt.Fprintln(tw, "AGENT\tUSER\tMCP SERVER\tCALLS\tERRORS\tREFUSED")
	for _, m := range r.MCP {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", m.Agent, m.User, orDash(m.Server), m.Calls, m.Errors, m.Refused)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	t := r.Totals
	_, err := fmt.Fprintf(w, "\nTotal: %d input tokens, %d output tokens, %d sandbox-seconds, %d MCP calls\n", t.InputTokens, t.OutputTokens, t.SandboxSeconds, t.MCPCalls)
	return err
}
