package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/periodic"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// newApprovalsCmd is `approvals list|approve|deny`: the calls waiting for a person that
// the caller may decide, whichever harness (or replica) runs them.
func newApprovalsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "approvals", Short: "List and decide the calls that wait for your approval"}
	var out outputFormat
	var session string
	list := g.harnessCmd("list", "List the pending approvals you may decide (every session's, or --session's)", cobra.NoArgs,
		func(ctx context.Context, cmd *cobra.Command, h *harness, _ []string) error {
			rows, err := approvals.Pending(ctx, h.store, h.me, session)
			if err != nil {
				return err
			}
			return printList(cmd.OutOrStdout(), out, rows, "APPROVAL\tSESSION\tUSER\tAGENT\tTOOL\tSERVER\tDEADLINE\tARGUMENTS", func(tw io.Writer, a store.Approval) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.SessionID, a.User, a.Agent, a.Tool, a.Server,
					a.Deadline.UTC().Format(time.RFC3339), clip(a.Arguments, 60))
			})
		})
	addOutputFlag(list, &out, "")
	list.Flags().StringVar(&session, "session", "", "only this session's approvals")
	cmd.AddCommand(list, decideCmd(g, "approve", true), decideCmd(g, "deny", false))
	return cmd
}

// decideCmd is `approvals approve|deny ID [--note TEXT]`.
func decideCmd(g *globals, verb string, approve bool) *cobra.Command {
	var note string
	c := g.harnessCmd(verb+" APPROVAL", verb+" a call that waits for your approval", cobra.ExactArgs(1),
		func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error {
			if len(note) > api.MaxNote {
				return usageErrorf("--note is %d bytes; at most %d", len(note), api.MaxNote)
			}
			a, err := approvals.Decide(ctx, h.store, args[0], h.me, approve, note, time.Now())
			switch {
			case errors.Is(err, approvals.ErrNotFound):
				return codedError{exitNotFound, fmt.Errorf("approval %s: not found, or not one you may decide (trueforge-harness approvals list shows yours)", args[0])}
			case errors.Is(err, store.ErrDecided):
				return fmt.Errorf("approval %s cannot be decided: %w", args[0], err)
			case err != nil:
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s on %s for %s\n", a.State, a.ID, a.Tool, a.Server, a.User)
			return nil
		})
	c.Flags().StringVar(&note, "note", "", "a note recorded with the decision (a denial's reason reaches the model)")
	return c
}

// newBudgetsCmd is `budgets`: what the operator's cumulative budgets have counted.
func newBudgetsCmd(g *globals) *cobra.Command {
	var out outputFormat
	var all bool
	c := g.harnessCmd("budgets", "Show what the policy's cumulative budgets have counted for you (--all: everyone)", cobra.NoArgs,
		func(ctx context.Context, cmd *cobra.Command, h *harness, _ []string) error {
			f := store.BudgetFilter{User: h.me}
			if all {
				f.User = ""
			}
			list, err := h.store.ListBudgetUsage(ctx, f)
			if err != nil {
				return err
			}
			rows := api.BudgetsOf(list, h.declaredBudgets())
			return printList(cmd.OutOrStdout(), out, rows, "BUDGET\tCOUNTER\tWINDOW\tCALLS\tRESULT BYTES\tTOKENS\tSANDBOX S\tREFILLS", func(tw io.Writer, b api.BudgetRow) {
				refill := ""
				if b.RefillsAt != nil {
					refill = b.RefillsAt.Format(time.RFC3339)
				}
				lim := b.Limits
				if lim == nil {
					lim = &api.BudgetLimits{}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Budget, b.Key, b.Window, used(b.Calls, lim.Calls), used(b.ResultBytes, lim.ResultBytes),
					used(b.Tokens, lim.Tokens), used(b.SandboxSeconds, lim.SandboxSeconds), refill)
			})
		})
	addOutputFlag(c, &out, "")
	c.Flags().BoolVar(&all, "all", false, "every user's counters, and those kept per agent or for everyone")
	return c
}

// used is a counter against its limit: "3/5", or "3" without one.
func used(n, limit int64) string {
	if limit == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d/%d", n, limit)
}

// askEvery is how often chat looks for calls of its session that wait for its user.
const askEvery = 300 * time.Millisecond

// askApprovals asks the chat's user, at the terminal, about each call of session that
// waits for user's approval, until ctx ends (the turn did): the answer is the next line,
// "y" or "yes" to approve and anything else to deny, with an optional note after it
// ("n not on Fridays"). A call someone else decides first is reported as such.
func askApprovals(ctx context.Context, st *store.Store, user, session string, out io.Writer, lines <-chan string) {
	eachPending(ctx, st, user, session, func(a store.Approval) bool {
		return askOne(ctx, st, user, a, out, lines)
	})
}

// eachPending calls fn once for each approval of session that user may decide, as they
// come (read every askEvery), until ctx ends or fn returns false.
func eachPending(ctx context.Context, st *store.Store, user, session string, fn func(store.Approval) bool) {
	seen := map[string]bool{}
	periodic.Run(ctx, askEvery, func(ctx context.Context) bool {
		pending, err := approvals.Pending(ctx, st, user, session)
		if err != nil {
			return true
		}
		for _, a := range pending {
			if seen[a.ID] {
				continue
			}
			seen[a.ID] = true
			if !fn(a) {
				return false
			}
		}
		return true
	})
}

// askOne asks about one approval; false when there is no more input or the turn ended.
func askOne(ctx context.Context, st *store.Store, user string, a store.Approval, out io.Writer, lines <-chan string) bool {
	if a.Kind == store.ApprovalKindElicitation {
		return askQuestion(ctx, st, user, a, out, lines)
	}
	what := termsafe.Line(a.Tool)
	if a.Server != "" {
		what += " on " + termsafe.Line(a.Server)
	}
	fmt.Fprintf(out, "\n  [approval] %s wants to call %s (rule %d: %s)\n", termsafe.Line(a.Agent), what, a.Rule, termsafe.Line(clip(a.Reason, 200)))
	if a.Arguments != "" {
		fmt.Fprintf(out, "             arguments: %s\n", termsafe.Line(clip(a.Arguments, 400)))
	}
	if a.Code != "" {
		fmt.Fprintf(out, "%s\n", indent(clipLines(termsafe.Text(a.Code), 40), "             | "))
	}
	fmt.Fprintf(out, "  approve? [y/N, a note may follow] (before %s) ", a.Deadline.Local().Format(time.TimeOnly))
	line, ok := nextLine(ctx, out, lines)
	if !ok {
		return false
	}
	answer, note, _ := strings.Cut(line, " ")
	approve := strings.EqualFold(answer, "y") || strings.EqualFold(answer, "yes")
	d, err := approvals.Decide(ctx, st, a.ID, user, approve, strings.TrimSpace(note), time.Now())
	return report(out, a.ID, err, d.State)
}
