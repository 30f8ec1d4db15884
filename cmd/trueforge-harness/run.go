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

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// talk is what run and chat hold while they talk to an agent.
type talk struct {
	runner    *runner.Runner
	sessionID string
	printer   *printer
	user      string // who talks: the approvals this user may decide are asked about
	// attached are the files --attach stored for the session, carried by the first
	// message.
	attached []events.Attachment
}

// message is line as the next message: the first one carries the attachments.
func (t *talk) message(line string) events.UserMessage {
	m := events.UserMessage{Text: line, Attachments: t.attached}
	t.attached = nil
	return m
}

// talkCmd makes cmd run or chat: it gets the run flags and --session, and its body
// opens the harness and the runner of the agent named by the first argument, resolves
// the session (a new one without --session, else one the caller owns), prints its
// header and calls fn; it closes the harness after.
func (g *globals) talkCmd(cmd *cobra.Command, fn func(ctx context.Context, cmd *cobra.Command, t talk, args []string) error) *cobra.Command {
	var f runFlags
	var sessionID string
	var attach attachFlags
	cmd.RunE = g.withHarness(func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error {
		files, err := attach.open()
		if err != nil {
			return err
		}
		defer files.close()
		r, err := h.runner(ctx, args[0], &f)
		if err != nil {
			return err
		}
		id, err := h.session(ctx, r, sessionID)
		if err != nil {
			return err
		}
		attached, err := files.store(ctx, h.g.attachments(h.store), id, h.me, attach.classification)
		if err != nil {
			return err
		}
		p := newPrinter(cmd.OutOrStdout(), f.jsonOut, r.Agent.IsReplay())
		p.header(id, r)
		return fn(ctx, cmd, talk{runner: r, sessionID: id, printer: p, user: h.me, attached: attached}, args)
	})
	cmd.Flags().StringVar(&sessionID, "session", "", "continue this session (default: a new one)")
	attach.add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("session", g.completeSessionFlag)
	f.add(cmd)
	return cmd
}

func newRunCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := g.talkCmd(&cobra.Command{
		Use:   "run AGENT PROMPT|-",
		Short: "Send one message to an agent and stream the turn (Ctrl-C cancels it); PROMPT - reads it from stdin",
		Args:  cobra.ExactArgs(2),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			// Read before anything is opened, so an empty stdin is a usage error that
			// creates no session.
			if args[1] != "-" {
				return nil
			}
			b, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("reading the prompt from stdin: %w", err)
			}
			args[1] = strings.TrimRight(string(b), "\r\n")
			if strings.TrimSpace(args[1]) == "" {
				return usageErrorf("run %s -: stdin held no prompt", args[0])
			}
			return nil
		},
		ValidArgsFunction: g.completeAgents,
	}, func(ctx context.Context, cmd *cobra.Command, t talk, args []string) error {
		turnCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
		// Nobody is at a prompt: MCP servers' questions are declined, or with --yes
		// accepted with their defaults, as they come.
		askCtx, stopAsking := context.WithCancel(turnCtx)
		asked := make(chan struct{})
		go func() {
			defer close(asked)
			answerQuestions(askCtx, t.runner.Store, t.user, t.sessionID, yes, cmd.OutOrStdout())
		}()
		res, err := t.runner.RunMessage(turnCtx, runner.NewRunID(), t.sessionID, t.message(args[1]), t.printer.event)
		stopAsking()
		<-asked
		t.printer.finish()
		if err != nil {
			return err
		}
		return runExit(res.Status, t.printer)
	})
	cmd.Flags().BoolVar(&yes, "yes", false, "accept MCP servers' questions (elicitations) with their default answers instead of declining them")
	return cmd
}

func newChatCmd(g *globals) *cobra.Command {
	return g.talkCmd(&cobra.Command{
		Use:               "chat AGENT",
		Short:             "Talk to an agent interactively; Ctrl-C cancels the running turn, not the session (Ctrl-D ends)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeAgents,
	}, func(ctx context.Context, cmd *cobra.Command, t talk, args []string) error {
		out := cmd.OutOrStdout()
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt)
		defer signal.Stop(sigs)
		return chatLoop(ctx, cmd.InOrStdin(), out, sigs, func(turnCtx context.Context, line string, lines <-chan string) error {
			// While the turn runs, the calls of this session that wait for this user's
			// approval are asked about at the terminal.
			askCtx, stopAsking := context.WithCancel(turnCtx)
			asked := make(chan struct{})
			go func() {
				defer close(asked)
				askApprovals(askCtx, t.runner.Store, t.user, t.sessionID, out, lines)
			}()
			_, err := t.runner.RunMessage(turnCtx, runner.NewRunID(), t.sessionID, t.message(line), t.printer.event)
			stopAsking()
			<-asked
			t.printer.finish()
			if errors.Is(err, runner.ErrBusy) {
				fmt.Fprintln(out, "!", err)
				return nil
			}
			return err
		})
	})
}

// runExit is the exit status of a run that ended with status, as the printer saw it:
// a limit reached (3) and a model key variable unset (5) are told apart from other
// failures so that scripts can act on them.
func runExit(status string, p *printer) error {
	p.mu.Lock()
	limit, noKey := p.limit, p.noKey
	p.mu.Unlock()
	switch {
	case status == store.RunCancelled:
		return exitCode(exitCancelled)
	case noKey:
		return exitCode(exitCredential)
	case status != store.RunCompleted:
		return exitCode(exitError)
	case limit:
		return exitCode(exitLimit)
	}
	return nil
}

// chatLoop reads messages line by line and runs each as a turn; an interrupt while a
// turn runs cancels that turn only, an interrupt at the prompt ends the chat.
func chatLoop(ctx context.Context, in io.Reader, out io.Writer, sigs <-chan os.Signal, turn func(ctx context.Context, line string, lines <-chan string) error) error {
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
		err := turn(turnCtx, line, lines)
		close(done)
		cancel()
		if err != nil {
			return err
		}
	}
}
