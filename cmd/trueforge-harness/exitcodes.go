package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The exit statuses scripts can rely on (docs/guides/running-agents.md, "Exit codes").
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2   // bad flags or arguments
	exitLimit      = 3   // a run stopped at max_turns or token_budget
	exitNotFound   = 4   // no such agent, session, environment or file
	exitCredential = 5   // the model's key variable is not set
	exitCancelled  = 130 // the turn was cancelled (Ctrl-C), as a shell reports SIGINT
)

// exitCode is an error that asks for a specific exit status.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// codedError is an error with the exit status it ends the command with.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// usageErrorf is a usage error: exit status 2, as cobra's own flag errors.
func usageErrorf(format string, a ...any) error {
	return codedError{exitUsage, fmt.Errorf(format, a...)}
}

// exitStatus maps what a command returned to its exit status.
func exitStatus(err error) int {
	if err == nil {
		return exitOK
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	var ce codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	switch {
	case errors.Is(err, model.ErrNoKey):
		return exitCredential
	case errors.Is(err, store.ErrNotFound):
		return exitNotFound
	case strings.HasPrefix(err.Error(), "unknown command "):
		// cobra's, for a mistyped subcommand; it has no error type of its own.
		return exitUsage
	}
	return exitError
}

// markUsageErrors makes cobra's argument and flag errors usage errors (exit status 2)
// on root and every command under it; call it once the tree is built.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return codedError{exitUsage, err} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return codedError{exitUsage, err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
