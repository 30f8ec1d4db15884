package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func newSandboxesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandboxes", Short: "List session sandboxes and sweep orphans"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every session sandbox with its recorded state, and backend sandboxes no session points at",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			h, err := g.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer h.close()
			recs, err := h.store.ListSessionSandboxes(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SANDBOX\tSESSION\tSTATE\tSNAPSHOT\tENVIRONMENT\tPROVIDER\tLAST USED\tBUSY")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.SandboxID, r.SessionID, r.State, r.SnapshotID, r.Environment, r.Provider,
					r.LastUsedAt.UTC().Format(time.RFC3339), r.ActiveExecs)
			}
			orphans, err := findOrphans(cmd, h, recs)
			if err != nil {
				return err
			}
			for _, o := range orphans {
				fmt.Fprintf(tw, "%s\t%s\t%s (orphan)\t%s\t\t\t\t\n", o.info.ID, o.info.Labels[lifecycle.LabelSession], o.info.Status, o.info.SnapshotID)
			}
			return tw.Flush()
		},
	}
	gc := &cobra.Command{
		Use:   "gc",
		Short: "Delete backend sandboxes the harness labelled but no session record points at",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			h, err := g.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer h.close()
			recs, err := h.store.ListSessionSandboxes(ctx)
			if err != nil {
				return err
			}
			orphans, err := findOrphans(cmd, h, recs)
			if err != nil {
				return err
			}
			for _, o := range orphans {
				if err := o.rt.Delete(ctx, o.info.ID); err != nil {
					return fmt.Errorf("deleting orphan sandbox %s: %w", o.info.ID, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted orphan sandbox %s (session %s)\n", o.info.ID, o.info.Labels[lifecycle.LabelSession])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d orphan sandbox(es) deleted\n", len(orphans))
			return nil
		},
	}
	cmd.AddCommand(list, gc)
	return cmd
}

type orphan struct {
	info sandbox.SandboxInfo
	rt   sandbox.Runtime
}

// findOrphans lists backend sandboxes labelled by the harness that no live session
// record points at (session deleted, record deleted, or a sandbox created and never
// recorded because its harness died).
func findOrphans(cmd *cobra.Command, h *harness, recs []store.SessionSandbox) ([]orphan, error) {
	ctx := cmd.Context()
	live := map[string]bool{}
	for _, r := range recs {
		if r.State != store.SandboxStateDeleted {
			live[r.SandboxID] = true
		}
	}
	p, err := h.store.OnlySandboxProvider(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // no provider: no backend to look at
	}
	if err != nil {
		return nil, err
	}
	rt, err := h.runtimes.Runtime(ctx, p)
	if err != nil {
		return nil, err
	}
	infos, err := rt.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []orphan
	for _, info := range infos {
		// Ours: labelled with a session (both backends keep labels). A sandbox without
		// the label is someone else's, whatever its name.
		if info.Labels[lifecycle.LabelSession] == "" || live[info.ID] {
			continue
		}
		out = append(out, orphan{info, rt})
	}
	return out, nil
}
