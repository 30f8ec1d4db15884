package sandbox

import (
	"fmt"
	"sort"
)

// Listing bounds (Runtime.ListFiles). A workspace is the sandbox's to fill: a directory
// of 100,000 files must not become a 100,000-line tool result, a 10 MB JSON answer or a
// minute of lstat calls, so every listing is cut to a limit the caller picks and says
// how much it left out.
const (
	// DefaultListEntries is how many entries ListFiles returns when asked for 0.
	DefaultListEntries = 1000
	// MaxListScan is how many names of one directory a runtime reads at most (the local
	// backend; Daytona's toolbox answers a whole directory at once, within the client's
	// 64 MiB response cap). Past it, FileList.OmittedAtLeast is set.
	MaxListScan = 1 << 20
)

// FileList is one directory's listing, bounded (Runtime.ListFiles).
type FileList struct {
	// Entries are the directory's first entries by path, at most the limit asked for.
	Entries []FileInfo
	// Omitted counts the directory's entries left out of Entries, all of which sort
	// after them.
	Omitted int
	// OmittedAtLeast: the directory holds more than MaxListScan entries and only that
	// many were read, so Omitted is a lower bound and Entries are the first by path of
	// those read.
	OmittedAtLeast bool
}

// OmittedNote says what the listing left out, for a person or a model: "" when nothing,
// else "99000 more entries not shown" (or "at least ...").
func (l FileList) OmittedNote() string {
	if l.Omitted == 0 && !l.OmittedAtLeast {
		return ""
	}
	if l.OmittedAtLeast {
		return fmt.Sprintf("at least %d more entries not shown (the directory holds more than %d)", l.Omitted, MaxListScan)
	}
	return fmt.Sprintf("%d more entries not shown", l.Omitted)
}

// ListLimit is the number of entries a listing asked for limit returns: limit, or
// DefaultListEntries when limit is 0 or less.
func ListLimit(limit int) int {
	if limit <= 0 {
		return DefaultListEntries
	}
	return limit
}

// CutList is the listing of a directory whose entries are all (in any order): sorted
// by path and cut to ListLimit(limit). Runtimes whose backend answers a whole
// directory at once (Daytona) list through it.
func CutList(all []FileInfo, limit int) FileList {
	sort.Slice(all, func(i, j int) bool { return all[i].Path < all[j].Path })
	n := min(len(all), ListLimit(limit))
	return FileList{Entries: all[:n:n], Omitted: len(all) - n}
}
