package archive

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a name, as Linux file systems have them: a name past them could not be
// created anyway, and the reason is clearer said here than as a write error.
const (
	maxComponentBytes = 255
	maxNameBytes      = 4096
)

// cleanName is an archive's entry name as a path relative to the destination
// (slash-separated, no "." components, no trailing slash), or why it is refused. "" with
// no reason is the destination itself ("./", "."), which an archive may list as a folder.
func cleanName(raw string) (string, string) {
	if reason := badText(raw); reason != "" {
		return "", "the name " + reason
	}
	if strings.Contains(raw, `\`) {
		// Names are slash-separated in both formats; a backslash is a folder separator to
		// the tools that made the archive on Windows, so "..\..\x" must not be read as
		// a harmless file name by one reader and as a way out by another.
		return "", "the name holds a backslash, which some tools read as a folder separator"
	}
	if strings.HasPrefix(raw, "/") {
		return "", "an absolute path: entries must be relative to the destination"
	}
	var parts []string
	for _, p := range strings.Split(raw, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", "the name has a \"..\" component, which would lead out of the destination"
		}
		if len(p) > maxComponentBytes {
			return "", fmt.Sprintf("a name component is %d bytes, more than the %d a file system allows", len(p), maxComponentBytes)
		}
		parts = append(parts, p)
	}
	name := strings.Join(parts, "/")
	if len(name) > maxNameBytes {
		return "", fmt.Sprintf("the name is %d bytes, more than the %d a path may have", len(name), maxNameBytes)
	}
	return name, ""
}

// badText says what makes s unfit for a name or a link target: invalid UTF-8, a control
// character (a terminal escape in a listing, a newline that splits a log line), or a
// bidirectional override that makes a name read as another ("exe.txt" shown for
// "txt.exe"). "" when there is nothing.
func badText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("holds the control character %U", r)
		}
		if (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return fmt.Sprintf("holds the bidirectional control %U, which makes a name display as another", r)
		}
	}
	return ""
}

// Display is an entry name as a report shows it: as it is when it is printable, else
// quoted with its control characters and invalid bytes escaped, so that a hostile name
// cannot write to the terminal or the log that shows it.
func Display(raw string) string {
	if badText(raw) == "" {
		return raw
	}
	return strconv.QuoteToASCII(raw)
}

// tree is what the walk has accepted so far, by cleaned name: every path it made or
// will make, the folders that their names imply included. The destination starts empty
// (the caller sees to that), so this is all there is in it, and the checks below are
// decided on it alone, never on what the disk holds.
type tree struct {
	kinds map[string]Kind
	sizes map[string]int64 // files (and hard-link copies): their sizes, for hard links to them
	// traversed are the paths that accepted symlinks' targets go through as folders: a
	// symlink made there later would redirect those links (a link to "s/../x" is inside
	// until "s" becomes a link to ".").
	traversed map[string]bool
	// refused are symlinks of the archive that were not made: what the archive puts
	// under one is refused as well, since it was meant to go through the link.
	refused map[string]bool
}

func newTree() *tree {
	return &tree{kinds: map[string]Kind{}, sizes: map[string]int64{}, traversed: map[string]bool{}, refused: map[string]bool{}}
}

// place checks that an entry of kind k may be made at name, and why not. Folders are
// the only kind that may appear twice (the second is a no-op: dup true).
func (t *tree) place(name string, k Kind) (dup bool, reason string) {
	if reason := t.parents(name); reason != "" {
		return false, reason
	}
	if have, ok := t.kinds[name]; ok {
		if have == Dir && k == Dir {
			return true, ""
		}
		return false, fmt.Sprintf("appears earlier in the archive (as a %s); the first is kept", have)
	}
	if k == Symlink && t.traversed[name] {
		return false, "an earlier symbolic link's target goes through this path as a folder; a link here would redirect it"
	}
	return false, ""
}

// parents refuses a name whose folders include a symlink or a file of the archive.
func (t *tree) parents(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		if t.refused[name[:i]] {
			return fmt.Sprintf("through a symlink: %s is a symbolic link of this archive (refused), and nothing is written through one", name[:i])
		}
		switch t.kinds[name[:i]] {
		case Symlink:
			return fmt.Sprintf("through a symlink: %s is a symbolic link from this archive, and nothing is written through one", name[:i])
		case File, HardLink:
			return fmt.Sprintf("%s is a file of this archive, not a folder", name[:i])
		}
	}
	return ""
}

// add records an accepted entry and the folders its name implies.
func (t *tree) add(name string, k Kind, size int64) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			t.kinds[name[:i]] = Dir
		}
	}
	t.kinds[name] = k
	if k == File || k == HardLink {
		t.sizes[name] = size
	}
}

// symlinkTarget checks the target of a symlink at name: it must resolve inside the
// destination, read the way the kernel reads it (component by component from the
// link's folder), and go through no symlink of the archive on the way, since a link's
// own target is checked only from where that link is. The folders the target goes
// through are recorded (traversed) once it is accepted.
func (t *tree) symlinkTarget(name, target string) string {
	if target == "" {
		return "a symbolic link with an empty target"
	}
	if r := badText(target); r != "" {
		return "a symbolic link whose target " + r
	}
	if strings.HasPrefix(target, "/") {
		return fmt.Sprintf("a symbolic link to %s, an absolute path outside the destination", Display(target))
	}
	var stack []string
	if dir := path.Dir(name); dir != "." {
		stack = strings.Split(dir, "/")
	}
	var through []string
	parts := strings.Split(target, "/")
	for i, p := range parts {
		switch p {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return fmt.Sprintf("a symbolic link to %s, which leads out of the destination", Display(target))
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, p)
		cur := strings.Join(stack, "/")
		if i == len(parts)-1 {
			break // the last component may be a link: it is checked where it is
		}
		if t.kinds[cur] == Symlink {
			return fmt.Sprintf("a symbolic link to %s, which goes through %s, a symbolic link of this archive", Display(target), cur)
		}
		through = append(through, cur)
	}
	for _, p := range through {
		t.traversed[p] = true
	}
	return ""
}

// hardLinkTarget is the cleaned name of the file a hard link copies, or why it is
// refused: a hard link is made as a copy of a regular file this archive extracted
// before it, never a link to anything already on the disk.
func (t *tree) hardLinkTarget(linkname string) (string, string) {
	target, reason := cleanName(linkname)
	switch {
	case reason != "":
		return "", fmt.Sprintf("a hard link to %s, outside the destination (%s)", Display(linkname), reason)
	case target == "":
		return "", "a hard link to the destination itself"
	}
	switch t.kinds[target] {
	case File, HardLink:
		return target, ""
	case Symlink:
		return "", fmt.Sprintf("a hard link to %s, a symbolic link: not copied", target)
	}
	return "", fmt.Sprintf("a hard link to %s, which is not a file this archive extracted before it", target)
}
