package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
)

// leasePruneAge is how long after it lapsed a lease row is deleted: the row of a
// replica that died holding it, for a sandbox or session that may be gone by now.
const leasePruneAge = time.Hour

func newServeCmd(g *globals) *cobra.Command {
	var interval time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the idle reaper and repair the runs of harnesses that died (the HTTP API comes later); replicas may share a database",
		Long: "serve makes a pass every --interval: it marks interrupted the runs whose harness process is gone (dead, or silent\n" +
			"for the heartbeat timeout, " + runner.DefaultHeartbeatTimeout.String() + ", when it runs on another machine), stopping what they left running in\n" +
			"their sandboxes, and it stops, archives and deletes idle session sandboxes by their agents' timings. Several serve\n" +
			"processes may share one database: each sandbox and each repair is taken by one of them at a time (leases, which lapse\n" +
			"after " + lifecycle.DefaultLeaseTTL.String() + " when their holder dies). See docs/guides/harness-replicas.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			h, err := g.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer h.close()
			out := cmd.OutOrStdout()
			for {
				h.servePass(ctx, out)
				if once {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "how often serve repairs dead harnesses' runs and reaps idle sandboxes")
	cmd.Flags().BoolVar(&once, "once", false, "make one pass and exit")
	return cmd
}

// servePass repairs the runs of dead harnesses, then reaps idle sandboxes, printing what
// it did: a sandbox a dead run kept busy is reclaimed first, so it is reaped on time.
func (h *harness) servePass(ctx context.Context, out io.Writer) {
	stamp := func() string { return time.Now().UTC().Format(time.RFC3339) }
	repaired, err := runner.RepairStale(ctx, h.store, h.manager, lifecycle.ProcessOwner(), 0, h.logger)
	if err != nil {
		h.logger.Error("repairing runs of dead harnesses failed", "err", err)
	}
	for _, r := range repaired {
		if r.Err != nil {
			fmt.Fprintf(out, "%s session %s: repairing run %s of harness process %s failed: %v\n", stamp(), r.SessionID, r.RunID, r.Owner, r.Err)
			continue
		}
		fmt.Fprintf(out, "%s session %s: run %s of harness process %s interrupted (that harness is gone), %d log entries added\n",
			stamp(), r.SessionID, r.RunID, r.Owner, r.Added)
	}
	trs, err := h.manager.Reap(ctx)
	if err != nil {
		h.logger.Error("reap failed", "err", err)
	}
	for _, t := range trs {
		if t.Err != nil {
			fmt.Fprintf(out, "%s session %s: %s -> %s failed: %v\n", stamp(), t.SessionID, t.From, t.To, t.Err)
			continue
		}
		fmt.Fprintf(out, "%s session %s: sandbox %s %s -> %s\n", stamp(), t.SessionID, t.SandboxID, t.From, t.To)
	}
	if _, err := h.store.PruneLeases(ctx, leasePruneAge); err != nil {
		h.logger.Warn("pruning lapsed leases failed", "err", err)
	}
}
