package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func newSandboxesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandboxes", Short: "List session sandboxes and sweep orphans"}
	var listOut outputFormat
	list := g.harnessCmd("list", "List your sessions' sandboxes with their recorded state, and your backend sandboxes no session points at", cobra.NoArgs, func(ctx context.Context, cmd *cobra.Command, h *harness, _ []string) error {
		recs, err := h.store.ListOwnedSessionSandboxes(ctx, h.me)
		if err != nil {
			return err
		}
		rows := make([]*sandboxJSON, 0, len(recs))
		for _, r := range recs {
			rows = append(rows, sandboxRow(r))
		}
		orphans, err := findOrphans(cmd, h, h.me, 0)
		if err != nil {
			return err
		}
		for _, o := range orphans {
			rows = append(rows, &sandboxJSON{ID: o.info.ID, Session: o.info.Labels[lifecycle.LabelSession], State: o.info.Status,
				Snapshot: o.info.SnapshotID, Environment: o.info.Labels[lifecycle.LabelEnvironment], Uncertain: []string{}, Orphan: true})
		}
		return printList(cmd.OutOrStdout(), listOut, rows, "SANDBOX\tSESSION\tSTATE\tSNAPSHOT\tENVIRONMENT\tPROVIDER\tLAST USED\tBUSY", func(tw io.Writer, r *sandboxJSON) {
			if r.Orphan {
				fmt.Fprintf(tw, "%s\t%s\t%s (orphan)\t%s\t\t\t\t\n", r.ID, r.Session, r.State, r.Snapshot)
				return
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.ID, r.Session, r.State, r.Snapshot, r.Environment, r.Provider,
				r.LastUsedAt.Format(time.RFC3339), r.ActiveExecs)
		})
	})
	addOutputFlag(list, &listOut, "")
	var minAge time.Duration
	gc := &cobra.Command{
		Use:   "gc",
		Short: "Delete your backend sandboxes that no session record points at",
		Long: "Deletes the backend sandboxes the harness labelled with your owner name that no session record points at " +
			"(session deleted, or a harness died between creating a sandbox and recording it). Only sandboxes older than " +
			"--min-age are touched: a harness records a sandbox just after creating it, so a younger one may be in use.",
		Args: cobra.NoArgs,
		RunE: g.withHarness(func(ctx context.Context, cmd *cobra.Command, h *harness, _ []string) error {
			orphans, err := findOrphans(cmd, h, h.me, minAge)
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
		}),
	}
	gc.Flags().DurationVar(&minAge, "min-age", 10*time.Minute, "only delete orphans created at least this long ago")
	cmd.AddCommand(list, gc)
	return cmd
}

type orphan struct {
	info sandbox.SandboxInfo
	rt   sandbox.Runtime
}

// findOrphans lists owner's backend sandboxes (labelled by the harness with a session and
// owner) that no live session record of anyone points at (session deleted, record
// deleted, or a sandbox created and never recorded because its harness died), created at
// least minAge ago. A sandbox whose backend reports no creation time counts as old.
func findOrphans(cmd *cobra.Command, h *harness, owner string, minAge time.Duration) ([]orphan, error) {
	ctx := cmd.Context()
	// Liveness comes from every session's record, not just owner's: another user's live
	// sandbox is never an orphan of ours.
	recs, err := h.store.ListSessionSandboxes(ctx)
	if err != nil {
		return nil, err
	}
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
		// Ours: labelled with a session (both backends keep labels) and with the caller as
		// owner. A sandbox without the label is someone else's, whatever its name.
		if info.Labels[lifecycle.LabelSession] == "" || info.Labels[lifecycle.LabelOwner] != owner || live[info.ID] {
			continue
		}
		if !info.Created.IsZero() && time.Since(info.Created) < minAge {
			continue
		}
		out = append(out, orphan{info, rt})
	}
	return out, nil
}
