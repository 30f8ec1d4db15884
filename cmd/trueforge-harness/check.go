package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/check"
)

// newCheckCmd is `check AGENT FILE`: an agent check (internal/harness/check) run in a
// fresh session and sandbox, for CI: exit 0 when every expectation holds, 1 when one
// does not, and JUnit XML with --junit.
func newCheckCmd(g *globals) *cobra.Command {
	var junit string
	cmd := g.harnessCmd("check AGENT FILE",
		"Run an agent check (a scripted conversation and expectations) in a fresh session and sandbox; exit 1 when an expectation fails",
		cobra.ExactArgs(2), func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error {
			data, err := os.ReadFile(args[1])
			if errors.Is(err, fs.ErrNotExist) {
				return codedError{exitNotFound, fmt.Errorf("check file %s does not exist", args[1])}
			}
			if err != nil {
				return fmt.Errorf("reading the check file: %w", err)
			}
			f, err := check.Parse(data)
			if err != nil {
				return usageErrorf("check file %s: %v", args[1], err)
			}
			out := cmd.OutOrStdout()
			res, err := check.Run(ctx, check.Config{Store: h.store, Sandboxes: h.manager, Caller: h.me, Logger: h.logger,
				// On PostgreSQL the CLI runs as a harness role, which runs every team's agents.
				Operator: h.store.Shared(),
				Progress: func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), "check:", msg) }}, args[0], f)
			if err != nil {
				return err
			}
			for _, s := range res.Steps {
				switch {
				case s.Skipped:
					fmt.Fprintf(out, "SKIP  %s (an earlier step's message did not complete)\n", s.Name)
				case len(s.Failures) > 0:
					fmt.Fprintf(out, "FAIL  %s\n", s.Name)
					for _, fl := range s.Failures {
						fmt.Fprintf(out, "      %s: %s\n", fl.Expectation, fl.Message)
					}
				default:
					fmt.Fprintf(out, "ok    %s (%.1fs)\n", s.Name, s.Duration.Seconds())
				}
			}
			if junit != "" {
				if err := writeJUnit(junit, res); err != nil {
					return err
				}
			}
			if !res.Passed() {
				fmt.Fprintf(out, "check failed: %s (session %s)\n", res.FirstFailure(), res.SessionID)
				return exitCode(exitError)
			}
			fmt.Fprintf(out, "check passed: %d steps in %.1fs (session %s)\n", len(res.Steps), res.Duration.Seconds(), res.SessionID)
			return nil
		})
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 1 {
			return nil, cobra.ShellCompDirectiveDefault // FILE: the shell's file names
		}
		return g.completeAgents(cmd, args, prefix)
	}
	cmd.Flags().StringVar(&junit, "junit", "", "also write the result as JUnit XML to this file (a test case per step)")
	return cmd
}

func writeJUnit(name string, res check.Result) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	if err := check.WriteJUnit(f, res); err != nil {
		f.Close()
		return fmt.Errorf("--junit: writing %s: %w", name, err)
	}
	return f.Close()
}
