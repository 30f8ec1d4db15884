package main

import (
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
)

func newServeCmd(g *globals) *cobra.Command {
	var interval time.Duration
	var once bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the idle reaper: stop, archive and delete session sandboxes by their agents' timings (the HTTP API comes later)",
		Args:  cobra.NoArgs,
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
				trs, err := h.manager.Reap(ctx)
				if err != nil {
					h.logger.Error("reap failed", "err", err)
				}
				for _, t := range trs {
					if t.Err != nil {
						fmt.Fprintf(out, "%s session %s: %s -> %s failed: %v\n", time.Now().UTC().Format(time.RFC3339), t.SessionID, t.From, t.To, t.Err)
						continue
					}
					fmt.Fprintf(out, "%s session %s: sandbox %s %s -> %s\n", time.Now().UTC().Format(time.RFC3339), t.SessionID, t.SandboxID, t.From, t.To)
				}
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
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "how often the reaper looks at the sandboxes")
	cmd.Flags().BoolVar(&once, "once", false, "make one pass and exit")
	return cmd
}
