// Package skills is a skill folder as trueforge publishes it. The provider reads the
// folder from the Terraform configuration (Read), checks it against the limits below,
// and encodes it in one canonical form (Encode) whose SHA-256 is the skill's digest; the
// control plane stores that encoding once per digest; the harness decodes it (Decode),
// checking everything again, and writes the files into a sandbox.
//
// A skill folder holds SKILL.md, whose YAML front matter gives the skill's name and
// description, and any scripts and resources beside it. The digest covers each file's
// path relative to the folder, its executable bit and its content, and nothing else
// (not times, owners or other mode bits), so the same folder has the same digest on
// every machine that applies it. Directories are implied by the files' paths: an empty
// directory is not part of a skill.
//
// Refused, naming the file: a folder without SKILL.md, front matter without a name or
// description, any symlink (one inside the folder could lead anywhere on the machine
// that applies it, or inside the sandbox that loads it; copy the file in instead), any
// other special file, and file names that cannot be written the same everywhere (".."
// or ".", control characters, backslashes, invalid UTF-8, a name longer than
// MaxNameBytes, a path deeper than MaxDepth). Limits: MaxBytes in all, MaxFiles files,
// MaxSkillMDBytes for SKILL.md, MaxDescriptionChars for the description.
package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Limits of one skill.
const (
	// MaxBytes is the size of a skill's files together.
	MaxBytes = 1 << 20
	// MaxFiles is how many files a skill may hold (directories are not counted, but a
	// folder with more than MaxFiles directories is refused too).
	MaxFiles = 512
	// MaxSkillMDBytes is the size of SKILL.md, which the model reads when it loads the
	// skill.
	MaxSkillMDBytes = 64 << 10
	// MaxDepth is how many components a file's path below the folder may have
	// ("a/b/c.txt" has 3).
	MaxDepth = 8
	// MaxNameBytes is the length of one file or directory name.
	MaxNameBytes = 255
	// MaxDescriptionChars is the length of the description in SKILL.md: every skill's
	// description is shown to the model in each prompt.
	MaxDescriptionChars = 1024
	// MaxPerAgent is how many skills one agent may list.
	MaxPerAgent = 32
)

// Manifest is the file every skill folder has at its top.
const Manifest = "SKILL.md"

// WorkspaceDir is where the harness writes skills in a sandbox, relative to the
// sandbox's workspace: skill <name> lands in /workspace/.skills/<name>/.
const WorkspaceDir = ".skills"

// namePattern is what a skill's name may be: the provider's names (lowercase letters,
// digits, '-' and '_', starting and ending with a letter or digit, at most 63), which are
// also safe as a directory name in any sandbox.
var namePattern = lazyRegexp(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)

// ValidName reports whether name can name a skill.
func ValidName(name string) bool { return namePattern().MatchString(name) }

// File is one file of a skill.
type File struct {
	// Path is relative to the skill's folder, slash-separated.
	Path       string
	Executable bool
	Content    []byte
}

// Bundle is a skill: its name and description (from SKILL.md), its files sorted by
// path, their canonical encoding and its digest.
type Bundle struct {
	Name        string
	Description string
	Files       []File
	// Size is the files' content in bytes, together.
	Size int64
	// Encoded is the canonical encoding (Encode), Digest its SHA-256 ("sha256:<hex>").
	Encoded []byte
	Digest  string
}

// SkillMD returns the content of SKILL.md.
func (b *Bundle) SkillMD() []byte {
	for _, f := range b.Files {
		if f.Path == Manifest {
			return f.Content
		}
	}
	return nil
}

// Problem is why a skill folder was refused: a short title, what is wrong with which
// file, and what to do about it.
type Problem struct {
	Summary string // Title Case, for a diagnostic's summary
	// File is the offending file, relative to the folder ("" for the folder itself).
	File   string
	Detail string // what is wrong, naming the file
	Fix    string // what to do
}

func (p *Problem) Error() string {
	return p.Detail + " " + p.Fix
}

func problem(summary, file, fix, format string, args ...any) *Problem {
	return &Problem{Summary: summary, File: file, Detail: fmt.Sprintf(format, args...), Fix: fix}
}

// Read reads the skill folder dir (a path on this machine; the folder itself may be
// reached through a symlink, nothing inside it may be one) and checks it. A folder that
// breaks a rule is a *Problem; an error reading it is returned wrapped.
func Read(dir string) (*Bundle, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, problem("Skill Folder Not Found", "",
			"Give the folder's path relative to the Terraform working directory, for example \"${path.module}/skills/<name>\", and check that it exists on the machine that runs Terraform (skills are read from the configuration, not from the harness's host).",
			"The skill folder %q does not exist.", dir)
	case err != nil:
		return nil, fmt.Errorf("reading skill folder %q: %w", dir, err)
	case !info.IsDir():
		return nil, problem("Skill Folder Is Not A Folder", "",
			"Name the folder that holds SKILL.md, not a file in it.", "The skill path %q is a file, not a folder.", dir)
	}
	r := reader{dir: dir}
	if err := filepath.WalkDir(dir, r.visit); err != nil {
		return nil, err
	}
	return newBundle(r.files, func(msg, fix string) *Problem {
		return problem("Invalid SKILL.md", Manifest, fix, "%s/%s %s.", dir, Manifest, msg)
	}, dir)
}

// reader collects a folder's files as filepath.WalkDir visits them.
type reader struct {
	dir   string
	files []File
	size  int64
	dirs  int
}

func (r *reader) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return fmt.Errorf("reading skill folder %q: %w", r.dir, err)
	}
	if p == r.dir {
		return nil
	}
	rel, err := filepath.Rel(r.dir, p)
	if err != nil {
		return fmt.Errorf("reading skill folder %q: %w", r.dir, err)
	}
	rel = filepath.ToSlash(rel)
	if prob := CheckPath(rel); prob != nil {
		prob.Detail = fmt.Sprintf("In skill folder %q, %s", r.dir, prob.Detail)
		return prob
	}
	switch t := d.Type(); {
	case t&fs.ModeSymlink != 0:
		target, _ := os.Readlink(p)
		return problem("Symlink In Skill Folder", rel,
			"Replace the symlink with a copy of the file or folder it points to: a skill is published as regular files and folders only.",
			"%s in skill folder %q is a symlink (to %q); skills may not contain symlinks.", rel, r.dir, target)
	case d.IsDir():
		if r.dirs++; r.dirs > MaxFiles {
			return problem("Skill Folder Too Large", rel, "Remove folders the skill does not need, or split it into several skills.",
				"Skill folder %q has more than %d folders (at %s).", r.dir, MaxFiles, rel)
		}
		return nil
	case !t.IsRegular():
		return problem("Special File In Skill Folder", rel, "Remove it: a skill holds regular files and folders only.",
			"%s in skill folder %q is not a regular file (%s).", rel, r.dir, t.Type())
	}
	if len(r.files) >= MaxFiles {
		return problem("Skill Folder Too Large", rel, "Remove files the skill does not need, or split it into several skills.",
			"Skill folder %q has more than %d files (at %s); the limit is %d files per skill.", r.dir, MaxFiles, rel, MaxFiles)
	}
	info, err := d.Info()
	if err != nil {
		return fmt.Errorf("reading %s in skill folder %q: %w", rel, r.dir, err)
	}
	if prob := r.checkSize(rel, info.Size()); prob != nil {
		return prob
	}
	content, err := readAtMost(p, MaxBytes-r.size)
	if err != nil {
		return fmt.Errorf("reading %s in skill folder %q: %w", rel, r.dir, err)
	}
	if prob := r.checkSize(rel, int64(len(content))); prob != nil { // it grew while read
		return prob
	}
	r.size += int64(len(content))
	r.files = append(r.files, File{Path: rel, Executable: info.Mode().Perm()&0o111 != 0, Content: content})
	return nil
}

// checkSize refuses file rel of size n when it is SKILL.md over its limit, or when it
// takes the folder over MaxBytes.
func (r *reader) checkSize(rel string, n int64) *Problem {
	if rel == Manifest && n > MaxSkillMDBytes {
		return problem("Skill Folder Too Large", rel, "Keep SKILL.md to the instructions the model needs first, and move details to other files it can read when needed.",
			"%s/%s is %d bytes; the limit is %d bytes (64 KiB).", r.dir, Manifest, n, MaxSkillMDBytes)
	}
	if r.size+n > MaxBytes {
		return problem("Skill Folder Too Large", rel, "Remove files the skill does not need (large data belongs in the environment's image or build script), or split it into several skills.",
			"Skill folder %q is larger than %d bytes (1 MiB) with %s (%d bytes); the limit is %d bytes per skill.", r.dir, MaxBytes, rel, n, MaxBytes)
	}
	return nil
}

// readAtMost reads file p, failing once it holds more than limit bytes.
func readAtMost(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// newBundle checks what every skill needs (SKILL.md with a valid name and description)
// and encodes the files. invalid builds the problem of a bad SKILL.md; where names the
// skill in other problems.
func newBundle(files []File, invalid func(msg, fix string) *Problem, where string) (*Bundle, error) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	b := &Bundle{Files: files}
	for _, f := range files {
		b.Size += int64(len(f.Content))
	}
	md := b.SkillMD()
	if md == nil {
		return nil, problem("Missing SKILL.md", Manifest,
			"Add a SKILL.md at the top of the folder that starts with front matter giving the skill's name and description:\n\n---\nname: <name>\ndescription: <what the skill does and when to use it>\n---",
			"Skill folder %q has no %s at its top.", where, Manifest)
	}
	fm, err := parseFrontMatter(md)
	if err != nil {
		return nil, invalid(err.Error(), "Start SKILL.md with front matter between two --- lines, giving name: and description:.")
	}
	switch {
	case fm.name == "":
		return nil, invalid("has no name in its front matter", "Add a line name: <name> (lowercase letters, digits, '-' and '_') between the --- lines.")
	case !ValidName(fm.name):
		return nil, invalid(fmt.Sprintf("names the skill %q, which is not a valid skill name", fm.name),
			"Use lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, at most 63 characters.")
	case fm.description == "":
		return nil, invalid("has no description in its front matter",
			"Add a line description: <what the skill does and when to use it> between the --- lines: the model decides from it when to load the skill.")
	case strings.ContainsFunc(fm.description, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return nil, invalid("has a description with control characters", "Write the description as plain text.")
	case utf8.RuneCountInString(fm.description) > MaxDescriptionChars:
		return nil, invalid(fmt.Sprintf("has a description of %d characters; the limit is %d", utf8.RuneCountInString(fm.description), MaxDescriptionChars),
			"Shorten it: every skill's description is part of each prompt. Put the details in the body of SKILL.md.")
	}
	b.Name, b.Description = fm.name, fm.description
	b.Encoded = Encode(files)
	b.Digest = Digest(b.Encoded)
	return b, nil
}

// CheckPath refuses a file path (relative to a skill's folder, slash-separated) that
// cannot be written the same in every sandbox, or that could leave the folder.
func CheckPath(rel string) *Problem {
	const summary = "Invalid File Name In Skill Folder"
	const fix = "Rename it: skill file names must be valid UTF-8 without control characters or backslashes, at most 255 bytes per name, at most 8 levels deep."
	if !utf8.ValidString(rel) {
		return problem(summary, strings.ToValidUTF8(rel, "?"), fix, "the file name %q is not valid UTF-8.", rel)
	}
	if rel == "" || strings.HasPrefix(rel, "/") {
		return problem(summary, rel, fix, "the path %q is not relative to the folder.", rel)
	}
	parts := strings.Split(rel, "/")
	if len(parts) > MaxDepth {
		return problem(summary, rel, fix, "%s is %d levels deep; the limit is %d.", rel, len(parts), MaxDepth)
	}
	for _, part := range parts {
		switch {
		case part == "" || part == "." || part == "..":
			return problem(summary, rel, fix, "the path %q has an empty, \".\" or \"..\" component.", rel)
		case len(part) > MaxNameBytes:
			return problem(summary, rel, fix, "%q has a name of %d bytes; the limit is %d.", rel, len(part), MaxNameBytes)
		case strings.ContainsRune(part, '\\'):
			return problem(summary, rel, fix, "%q contains a backslash.", rel)
		case strings.ContainsFunc(part, unicode.IsControl):
			return problem(summary, rel, fix, "%q contains a control character.", rel)
		}
	}
	return nil
}

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
