package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// startTalk opens the harness and the runner of agent, resolves the session (a new one
// when sessionID is "", else one the caller owns) and prints its header: what run and
// chat do before the first turn. The caller closes h.
func (g *globals) startTalk(cmd *cobra.Command, agent, sessionID string, f *runFlags) (*harness, *runner.Runner, string, *printer, error) {
	ctx := cmd.Context()
	h, err := g.open(ctx, cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, "", nil, err
	}
	r, err := h.runner(ctx, agent, f)
	if err == nil {
		sessionID, err = h.session(ctx, r, sessionID)
	}
	if err != nil {
		h.close()
		return nil, nil, "", nil, err
	}
	p := newPrinter(cmd.OutOrStdout(), f.jsonOut, r.Agent.IsReplay())
	p.header(sessionID, r)
	return h, r, sessionID, p, nil
}

func newRunCmd(g *globals) *cobra.Command {
	var f runFlags
	var sessionID string
	cmd := &cobra.Command{
		Use:   "run AGENT PROMPT",
		Short: "Send one message to an agent and stream the turn (Ctrl-C cancels it)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			h, r, sessionID, p, err := g.startTalk(cmd, args[0], sessionID, &f)
			if err != nil {
				return err
			}
			defer h.close()
			turnCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
			defer stop()
			res, err := r.Run(turnCtx, sessionID, args[1], p.event)
			p.finish()
			if err != nil {
				return err
			}
			if res.Status == store.RunCancelled {
				return exitCode(130)
			}
			if res.Status != store.RunCompleted {
				return exitCode(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "continue this session (default: a new one)")
	f.add(cmd)
	return cmd
}

func newChatCmd(g *globals) *cobra.Command {
	var f runFlags
	var sessionID string
	cmd := &cobra.Command{
		Use:   "chat AGENT",
		Short: "Talk to an agent interactively; Ctrl-C cancels the running turn, not the session (Ctrl-D ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			h, r, sessionID, p, err := g.startTalk(cmd, args[0], sessionID, &f)
			if err != nil {
				return err
			}
			defer h.close()
			out := cmd.OutOrStdout()
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt)
			defer signal.Stop(sigs)
			return chatLoop(ctx, cmd.InOrStdin(), out, sigs, func(turnCtx context.Context, line string) error {
				_, err := r.Run(turnCtx, sessionID, line, p.event)
				p.finish()
				if errors.Is(err, runner.ErrBusy) {
					fmt.Fprintln(out, "!", err)
					return nil
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "continue this session (default: a new one)")
	f.add(cmd)
	return cmd
}

// chatLoop reads messages line by line and runs each as a turn; an interrupt while a
// turn runs cancels that turn only, an interrupt at the prompt ends the chat.
func chatLoop(ctx context.Context, in io.Reader, out io.Writer, sigs <-chan os.Signal, turn func(context.Context, string) error) error {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		fmt.Fprint(out, "you> ")
		var line string
		select {
		case <-ctx.Done():
			return nil
		case <-sigs:
			fmt.Fprintln(out)
			return nil
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				return nil
			}
			line = strings.TrimSpace(l)
		}
		if line == "" {
			continue
		}
		turnCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			select {
			case <-sigs:
				fmt.Fprintln(out, "\n^C cancelling the turn (the session stays)")
				cancel()
			case <-done:
			}
		}()
		err := turn(turnCtx, line)
		close(done)
		cancel()
		if err != nil {
			return err
		}
	}
}
