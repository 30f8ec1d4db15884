package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// outputFormat is the -o/--output flag every list and show command has: one name and
// one meaning everywhere, so a script can ask any of them for JSON the same way.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

// addOutputFlag registers -o/--output on cmd (default table) and checks its value
// before the command runs. wrongUse, when set, is what an old meaning of the flag
// (a value that is no format) is told to use instead.
func addOutputFlag(cmd *cobra.Command, o *outputFormat, wrongUse string) {
	cmd.Flags().StringVarP((*string)(o), "output", "o", string(outputTable), "output format: table or json")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if *o != outputTable && *o != outputJSON {
			msg := fmt.Sprintf("-o/--output %q: the output format is table or json", string(*o))
			if wrongUse != "" {
				msg = fmt.Sprintf("--output now picks the format (json or table); %s", wrongUse)
			}
			return usageErrorf("%s", msg)
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}

// writeJSON prints v as indented JSON: one document per command, so `-o json` parses
// with any JSON reader (lists are arrays, never null).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// printList is how a list command prints its rows: one JSON array with -o json (o),
// else a table of header and a line of each row, which line writes (tab-separated
// cells, newline-ended).
func printList[T any](w io.Writer, o outputFormat, rows []T, header string, line func(tw io.Writer, row T)) error {
	if o == outputJSON {
		return writeJSON(w, rows)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		line(tw, r)
	}
	return tw.Flush()
}
