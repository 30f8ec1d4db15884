package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func newSessionsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "List, show and delete sessions"}
	var agent string
	var listOut outputFormat
	list := g.harnessCmd("list", "List sessions, newest first", cobra.NoArgs, func(ctx context.Context, cmd *cobra.Command, h *harness, _ []string) error {
		ss, err := sessions.List(ctx, h.store, h.caller(), false, agent)
		if err != nil {
			return err
		}
		rows := make([]sessionJSON, 0, len(ss))
		for _, s := range ss {
			r := sessionRow(s)
			if rec, err := h.store.GetSessionSandbox(ctx, s.ID); err == nil {
				r.Sandbox = sandboxRow(rec)
			}
			rows = append(rows, r)
		}
		return printList(cmd.OutOrStdout(), listOut, rows, "SESSION\tAGENT\tMODEL\tCREATED\tTOKENS IN/OUT\tSANDBOX", func(tw io.Writer, r sessionJSON) {
			sb := "none"
			if r.Sandbox != nil {
				sb = r.Sandbox.State + " " + r.Sandbox.ID
			}
			m := "live"
			if r.Replay {
				m = "replay"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", r.ID, r.Agent, m, r.CreatedAt.Format(time.RFC3339), r.InputTokens, r.OutputTokens, sb)
		})
	})
	list.Flags().StringVar(&agent, "agent", "", "only this agent's sessions")
	_ = list.RegisterFlagCompletionFunc("agent", g.completeAgents)
	addOutputFlag(list, &listOut, "")

	var jsonOut bool
	var toolOutput string
	var showOut outputFormat
	show := g.sessionCmd("show SESSION", "Show a session's event log (or, with --tool-output, the full output of a cut tool result)", 1, func(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, args []string) error {
		out := cmd.OutOrStdout()
		if toolOutput != "" {
			b, err := h.store.GetToolOutput(ctx, s.ID, toolOutput)
			if err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		}
		evs, err := h.store.Events(ctx, s.ID, 0)
		if err != nil {
			return err
		}
		d, err := sessions.Show(ctx, h.store, s.ID)
		if err != nil {
			return err
		}
		if showOut == outputJSON {
			return showJSON(out, s, d, evs)
		}
		if jsonOut {
			for _, e := range evs {
				b, _ := json.Marshal(map[string]any{"seq": e.Seq, "run_id": e.RunID, "kind": e.Kind, "at": e.CreatedAt.UTC(), "payload": json.RawMessage(e.Payload)})
				fmt.Fprintln(out, string(b))
			}
			return nil
		}
		label := "live model"
		if s.Replay {
			label = "REPLAY of a scripted model, not a live model"
		}
		fmt.Fprintf(out, "session %s · agent %s · owner %s · %s · tokens %d in / %d out\n", s.ID, s.Agent, s.Owner, label, s.InputTokens, s.OutputTokens)
		if rec := d.Sandbox; rec != nil {
			fmt.Fprintf(out, "sandbox %s: %s, snapshot %s, environment %s, generation %d, last used %s\n",
				rec.SandboxID, rec.State, rec.SnapshotID, rec.Environment, rec.Generation, rec.LastUsedAt.UTC().Format(time.RFC3339))
			if len(rec.Uncertain) > 0 {
				fmt.Fprintf(out, "uncertain files (a dead call was writing them): %v\n", rec.Uncertain)
			}
		} else {
			fmt.Fprintln(out, "sandbox: none provisioned")
		}
		for _, r := range d.Runs {
			fmt.Fprintf(out, "run %s: %s %s\n", r.ID, r.Status, r.Detail)
		}
		fmt.Fprintln(out)
		p := newPrinter(out, false, s.Replay)
		for _, e := range evs {
			if !shown(e.Kind) {
				continue
			}
			fmt.Fprintf(out, "#%-3d", e.Seq)
			p.render(e, false)
		}
		return nil
	})
	show.Flags().BoolVar(&jsonOut, "json", false, "print the raw events as JSON lines (one event per line; -o json prints one document)")
	show.Flags().StringVar(&toolOutput, "tool-output", "", "print the full kept output of this tool call id")
	addOutputFlag(show, &showOut, "use --tool-output CALL_ID for a call's full output")

	del := g.sessionCmd("delete SESSION", "Delete a session, its sandbox, its artifacts and its log", 1, func(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, args []string) error {
		if err := sessions.Delete(ctx, h.store, h.manager, s.ID); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "deleted session %s\n", s.ID)
		return nil
	})
	cmd.AddCommand(list, show, del)
	return cmd
}
