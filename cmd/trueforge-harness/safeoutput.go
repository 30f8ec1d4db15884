package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// safeOutput routes everything every command prints, to stdout and stderr, through one
// termsafe.Writer, so that no printer (today's or a new one) writes sandbox output, MCP
// results, model text or file names raw: an escape sequence from any of them would
// drive the operator's terminal (OSC 52 writes its clipboard, ESC[2J clears it, a \r or
// a bidi override forges a line). It applies to output piped or redirected too: what
// lands in a file is still read on a terminal later (less -R, cat). JSON passes through
// it exactly (see termsafe); a downloaded file's bytes are data and go to rawOut.
//
// It hooks the root's PersistentPreRun, which cobra runs only when no subcommand
// defines its own: TestEveryCommandPrintsThroughTermsafe keeps it that way.
func safeOutput(root *cobra.Command) {
	root.PersistentPreRun = func(*cobra.Command, []string) {
		root.SetOut(termsafe.NewWriter(root.OutOrStdout()))
		root.SetErr(termsafe.NewWriter(root.ErrOrStderr()))
	}
}

// rawOut is cmd's stdout for data that must arrive byte for byte (a downloaded file)
// when it goes to a pipe or a file; on a terminal it stays escaped, as `cat` of an
// untrusted file should have been.
func rawOut(cmd *cobra.Command) (w io.Writer, escaped bool) {
	out := cmd.OutOrStdout()
	sw, ok := out.(*termsafe.Writer)
	if !ok {
		return out, false
	}
	if termsafe.IsTerminal(sw) {
		return sw, true
	}
	return sw.Unwrap(), false
}
