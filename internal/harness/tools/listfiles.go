package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// MaxListEntries is how many entries one list_files result shows: about what fits in
// one result before Truncate cuts it (DefaultLimit). The rest is counted, and the
// model told how to see it.
const MaxListEntries = 200

// listFiles answers list_files: one line per entry, "mode<TAB>size<TAB>name", at most
// MaxListEntries of them, then a line saying how many more the directory holds.
func listFiles(ctx context.Context, in invocation, args ListFilesArgs) Result {
	return in.withSandbox(ctx, nil, func(l *lifecycle.Lease, _ *Result) (string, bool, bool) {
		list, err := l.Runtime.ListFiles(ctx, l.Record.SandboxID, args.Dir, MaxListEntries)
		if err != nil {
			return "list_files: " + err.Error(), true, isLoss(err)
		}
		return formatList(list), false, false
	})
}

// formatList writes a listing for the model. A name is the sandbox's: one that holds a
// newline, a tab, a quote, another control or format character, or bytes that are not
// UTF-8 is written Go-quoted ("new\nline", "bad\xff"), so it can neither forge an entry
// nor smuggle terminal escapes into the event log, and the model can tell it is quoted.
func formatList(list sandbox.FileList) string {
	var b strings.Builder
	var quoted, invalid bool
	for _, f := range list.Entries {
		name := showName(f.Path)
		if name != f.Path {
			quoted = true
			invalid = invalid || !utf8.ValidString(f.Path)
		}
		fmt.Fprintf(&b, "%s\t%d\t%s\n", f.Mode, f.Size, name)
	}
	if b.Len() == 0 && list.Omitted == 0 {
		return "(empty)"
	}
	if quoted {
		b.WriteString("[names in double quotes are Go-quoted: they hold a quote, a backslash, control characters or invalid UTF-8]\n")
	}
	if invalid {
		b.WriteString("[a name with \\x bytes is not UTF-8 and cannot be given to a file tool; rename it with exec, e.g. mv \"$(printf 'bad\\377')\" fixed]\n")
	}
	if note := list.OmittedNote(); note != "" {
		fmt.Fprintf(&b, "[%s: list a subdirectory, or use exec (ls | head, find -name) to look further]\n", note)
	}
	return strings.TrimRight(b.String(), "\n")
}

// showName is a workspace name as a tool result shows it: as it is when it holds
// nothing but printable characters other than a double quote and a backslash, else
// Go-quoted (strconv.Quote), so that it stays one line, shows no terminal escape, and
// reads back exactly.
func showName(p string) string {
	if q := strconv.Quote(p); q[1:len(q)-1] != p {
		return q
	}
	return p
}
