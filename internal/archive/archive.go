// Package archive reads an untrusted archive (zip, tar, and tar compressed with gzip,
// bzip2, xz or zstd; the format told by its first bytes, never by its name) as a stream
// of entries that are safe to create in an empty destination folder, and says of every
// other entry why it is skipped. It writes nothing itself: the caller creates what Walk
// accepts (extract_archive writes it into a sandbox through the runtime's file calls).
//
// What is refused, each named with its reason: absolute names, names with a ".."
// component, a backslash, a control character, a bidirectional override or invalid
// UTF-8; entries whose folder is a symlink of the archive ("through a symlink");
// symlinks whose target leads out of the destination or goes through another symlink;
// hard links to anything but a regular file extracted earlier from the same archive;
// devices, FIFOs and sockets; and a second entry with the name of an earlier one. A
// regular file keeps its permission bits without set-user-ID, set-group-ID and sticky
// (Entry.Stripped says which were dropped). A hard link is made as a copy of its
// target's content (Entry of kind HardLink): copies are counted against MaxBytes like
// any content, so a thousand links to one large file cost what a thousand files cost.
// Folder modes are not kept.
//
// Limits (Policy) are enforced while the archive is read, on what decompression
// actually yields (header sizes are never trusted): the walk stops as soon as one is
// passed, having decompressed at most the limit plus one buffer, and says which limit
// and where (Report.Stopped). The ratio is unpacked bytes over compressed bytes
// consumed: for tar.* over the whole stream, for zip per entry over the entry's stored
// compressed size; it is checked once more than RatioGrace bytes have unpacked, since a
// small file of zeros compresses a thousandfold and harms nothing. Memory is bounded
// too: a zip's central directory is counted before it is parsed (no more than
// MaxEntries records are), an xz stream may not ask for a dictionary over MaxXZDict,
// and zstd windows are capped at MaxZstdWindow.
package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/trueforge/terraform-provider-trueforge/internal/filetype"
)

// Format is an archive format Walk reads.
type Format string

// Formats, by what the archive's first bytes are.
const (
	Zip      Format = "zip"
	Tar      Format = "tar"
	TarGzip  Format = "tar.gz"
	TarBzip2 Format = "tar.bz2"
	TarXZ    Format = "tar.xz"
	TarZstd  Format = "tar.zst"
)

// Defaults of a Policy, what an agent that sets no sandbox.extract_limits gets: enough
// for a source tree or a data set, far below what a decompression bomb unpacks to.
const (
	DefaultMaxEntries = 10_000
	DefaultMaxBytes   = 1 << 30
	DefaultMaxRatio   = 100
)

// Bounds of reading, not of the policy: what keeps the harness's own memory bounded
// whatever the archive says.
const (
	// RatioGrace is how many bytes a stream (a zip entry, a tar's whole stream) may
	// unpack before its ratio is checked.
	RatioGrace = 1 << 20
	// MaxXZDict is the largest dictionary an xz stream may ask for (xz -9 uses 64 MiB);
	// the decoder allocates what the stream asks, up to 4 GiB.
	MaxXZDict = 64 << 20
	// MaxZstdWindow is the largest zstd window (zstd --ultra -22 uses 128 MiB).
	MaxZstdWindow = 128 << 20
	// maxLinkTarget bounds a zip symlink's target, which is the entry's content.
	maxLinkTarget = 4096
)

// Policy is what one archive may unpack to.
type Policy struct {
	// MaxEntries is how many entries are looked at (skipped ones included).
	MaxEntries int
	// MaxBytes is how many bytes the archive may unpack to in all.
	MaxBytes int64
	// MaxRatio is how many times its compressed size the archive may unpack to.
	MaxRatio float64
}

// DefaultPolicy is the policy with every default.
func DefaultPolicy() Policy {
	return Policy{MaxEntries: DefaultMaxEntries, MaxBytes: DefaultMaxBytes, MaxRatio: DefaultMaxRatio}
}

// orDefault fills what p leaves at zero (or below) with the defaults.
func (p Policy) orDefault() Policy {
	d := DefaultPolicy()
	if p.MaxEntries <= 0 {
		p.MaxEntries = d.MaxEntries
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = d.MaxBytes
	}
	if p.MaxRatio <= 0 {
		p.MaxRatio = d.MaxRatio
	}
	return p
}

// Kind is what an accepted entry is.
type Kind string

// Kinds of accepted entries.
const (
	Dir      Kind = "dir"
	File     Kind = "file"
	Symlink  Kind = "symlink"
	HardLink Kind = "hard link" // made as a copy of Target's content
)

// Entry is an entry to create.
type Entry struct {
	// Name is the path to create, relative to the destination, slash-separated.
	Name string
	Kind Kind
	// Mode is the permission bits of a file (0o777 at most).
	Mode fs.FileMode
	// Stripped are the set-user-ID, set-group-ID and sticky bits the archive gave a
	// file and that Mode does not carry.
	Stripped fs.FileMode
	// Target is a symlink's target as the archive has it (relative, checked to stay in
	// the destination), or the Name of the earlier file a hard link copies.
	Target string
	// Size is the size of the file a hard link copies.
	Size int64
	// Content is a file's content, to be read before the callback returns; reading it
	// fails once a limit is passed.
	Content io.Reader
}

// Skipped is an entry that was not created, and why.
type Skipped struct {
	Name   string `json:"name"` // as the archive has it (Display)
	Reason string `json:"reason"`
}

// Stop is why a walk ended before the archive's end.
type Stop struct {
	// Limit is the policy's limit that was passed (max_entries, max_bytes, max_ratio),
	// or "damaged" when the archive could not be read on.
	Limit string `json:"limit"`
	// Entry is the entry being read when it stopped ("" between entries); Partial says
	// part of it was handed to the callback, whose file must then be removed.
	Entry   string `json:"entry,omitempty"`
	Partial bool   `json:"partial,omitempty"`
	Reason  string `json:"reason"`
}

// Report is what a walk did.
type Report struct {
	Format                           Format
	Files, Dirs, Symlinks, HardLinks int
	// Bytes is the content of the files created (hard-link copies included).
	Bytes int64
	// Unpacked is what decompression yielded, headers and skipped entries included;
	// Compressed what it consumed.
	Unpacked, Compressed int64
	Skipped              []Skipped
	Stopped              *Stop
	// NotLookedAt is how many entries were not looked at after a stop, when the format
	// says (a zip's directory); -1 when unknown.
	NotLookedAt int
}

// Entries is how many entries were created.
func (r *Report) Entries() int { return r.Files + r.Dirs + r.Symlinks + r.HardLinks }

// SkipError, returned by Walk's callback, skips the entry with Reason (it is then in
// the Report's Skipped) instead of failing the walk: for an entry the caller will not
// make, such as a hard link whose copy it does not take.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return e.Reason }

// ErrNotArchive is content that is none of the formats Walk reads.
var ErrNotArchive = errors.New("not an archive this tool reads (zip, tar, tar.gz, tar.bz2, tar.xz, tar.zst)")

// Detect is the format of an archive by its first bytes; a compressed stream is taken
// for a compressed tar (Walk says so when it holds none).
func Detect(b []byte) (Format, error) {
	// The tar magic first: a tar's first bytes are its first entry's name, which may
	// well begin like another format ("MZ...", "#!...").
	if len(b) > 262 && bytes.Equal(b[257:262], []byte("ustar")) {
		return Tar, nil
	}
	switch filetype.Sniff(b[:min(len(b), 512)]) {
	case filetype.Zip:
		return Zip, nil
	case filetype.Gzip:
		return TarGzip, nil
	case filetype.Bzip2:
		return TarBzip2, nil
	case filetype.XZ:
		return TarXZ, nil
	case filetype.Zstd:
		return TarZstd, nil
	}
	return "", ErrNotArchive
}

// Walk reads archive under policy p (zero fields: the defaults) and calls fn with each
// entry to create, in the archive's order; everything else is in the Report's Skipped.
// The walk stops early at a limit or damage (Report.Stopped) with a nil error; an error
// is returned only when the content is not an archive or fn failed (wrapped, with the
// entry's name), the Report then saying what was done before.
func Walk(archive []byte, p Policy, fn func(Entry) error) (*Report, error) {
	f, err := Detect(archive)
	if err != nil {
		return nil, err
	}
	w := &walker{p: p.orDefault(), fn: fn, tree: newTree(), rep: &Report{Format: f, NotLookedAt: -1}}
	w.m.p = w.p
	if f == Zip {
		err = w.zip(archive)
	} else {
		err = w.tar(archive, f)
	}
	w.rep.Unpacked = w.m.out
	return w.rep, err
}

// walker is one walk's state.
type walker struct {
	p    Policy
	fn   func(Entry) error
	tree *tree
	rep  *Report
	m    meter
	seen int // entries looked at
}

// skip records an entry that is not created.
func (w *walker) skip(raw, reason string) {
	w.rep.Skipped = append(w.rep.Skipped, Skipped{Name: Display(raw), Reason: reason})
}

// count counts one more entry, false (the walk stopped) past MaxEntries.
func (w *walker) count() bool {
	if w.seen >= w.p.MaxEntries {
		w.stopAt(&Stop{Limit: "max_entries", Reason: fmt.Sprintf("the archive has more than %d entries (sandbox.extract_limits.max_entries); the rest were not looked at",
			w.p.MaxEntries)})
		return false
	}
	w.seen++
	return true
}

// stopAt records why the walk stopped (the first reason wins).
func (w *walker) stopAt(s *Stop) {
	if w.rep.Stopped == nil {
		w.rep.Stopped = s
	}
}

// accept hands a checked entry to fn and records it with its size (read after fn: a
// file's is what fn read of it). A limit passed or damage met while fn read the content
// stops the walk (the entry partial); fn's own failure is the walk's error.
func (w *walker) accept(e Entry, size func() int64) error {
	w.m.entry, w.m.partial = e.Name, e.Kind == File
	err := w.fn(e)
	if s := w.m.stop; s != nil {
		w.stopAt(s)
		return nil
	}
	w.m.entry, w.m.partial = "", false
	var skip *SkipError
	if errors.As(err, &skip) {
		w.skip(e.Name, skip.Reason)
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", e.Name, err)
	}
	n := size()
	w.tree.add(e.Name, e.Kind, n)
	switch e.Kind {
	case Dir:
		w.rep.Dirs++
	case File:
		w.rep.Files++
		w.rep.Bytes += n
	case Symlink:
		w.rep.Symlinks++
	case HardLink:
		w.rep.HardLinks++
		w.rep.Bytes += n
	}
	return nil
}

// entry checks one entry of the archive and creates it when it passes. mode is the
// entry's mode as fs.FileMode; link a symlink's or hard link's target; content a file's
// (its size counted as it is read).
func (w *walker) entry(raw string, k Kind, mode fs.FileMode, link string, content func() io.Reader) error {
	name, reason := cleanName(raw)
	if reason == "" && name == "" {
		if k == Dir {
			return nil // the destination itself
		}
		reason = "an empty name"
	}
	if reason != "" {
		w.skip(raw, reason)
		return nil
	}
	dup, reason := w.tree.place(name, k)
	if reason == "" && k == Symlink {
		reason = w.tree.symlinkTarget(name, link)
	}
	var size int64
	if reason == "" && k == HardLink {
		link, reason = w.tree.hardLinkTarget(link)
		size = w.tree.sizes[link]
	}
	if reason != "" {
		if k == Symlink {
			w.tree.refused[name] = true
		}
		w.skip(raw, reason)
		return nil
	}
	if dup {
		return nil
	}
	e := Entry{Name: name, Kind: k, Target: link, Size: size}
	fixed := func() int64 { return size }
	switch k {
	case File:
		e.Mode, e.Stripped = mode.Perm(), mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		c := &byteCount{r: content()}
		e.Content = c
		return w.accept(e, func() int64 { return c.n })
	case HardLink:
		// A copy is content like any other: counted against MaxBytes before it is made.
		e.Mode = mode.Perm()
		if !w.m.add(size, name) {
			w.stopAt(w.m.stop)
			return nil
		}
	}
	return w.accept(e, fixed)
}

// byteCount counts what is read through it.
type byteCount struct {
	r io.Reader
	n int64
}

func (c *byteCount) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// skipSpecial is the reason an entry of a kind that is never created is skipped.
func skipSpecial(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeCharDevice != 0:
		return "a character device: devices are never created"
	case mode&fs.ModeDevice != 0:
		return "a block device: devices are never created"
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe): FIFOs are never created"
	case mode&fs.ModeSocket != 0:
		return "a socket: sockets are never created"
	}
	return "an entry of a type that is not extracted (" + mode.Type().String() + ")"
}
