// Package filetype tells what a file is from its first bytes (magic numbers), not from
// its name, and whether the name says the same: what a download is checked for before
// its first byte leaves the harness. Executables (ELF, PE, Mach-O, scripts with a
// shebang) and archives that hold one are what an operator's download policy may
// refuse: executable outputs go through a build and signing pipeline, not a chat.
package filetype

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"
)

// Kinds of content.
const (
	ELF     = "elf"     // Linux and BSD executables and libraries
	PE      = "pe"      // Windows executables and DLLs (MZ)
	MachO   = "macho"   // macOS executables (thin and universal)
	Script  = "script"  // text starting with a shebang line
	Zip     = "zip"     // zip and the formats built on it (jar, docx, xlsx, ...)
	Gzip    = "gzip"    // gzip (a .tar.gz is one)
	Bzip2   = "bzip2"   // bzip2
	XZ      = "xz"      // xz
	Zstd    = "zstd"    // Zstandard
	Tar     = "tar"     // an uncompressed tar archive
	PDF     = "pdf"     // PDF
	PNG     = "png"     // PNG image
	JPEG    = "jpeg"    // JPEG image
	GIF     = "gif"     // GIF image
	WebP    = "webp"    // WebP image
	Text    = "text"    // UTF-8 text (no NUL)
	Binary  = "binary"  // anything else
	Unknown = "unknown" // nothing to read (empty)
)

// Sniff is the kind of content, read from its first bytes (a few KiB are enough; the
// whole file lets a zip's entries be read).
func Sniff(content []byte) string {
	b := content
	switch {
	case len(b) == 0:
		return Unknown
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return ELF
	case bytes.HasPrefix(b, []byte("MZ")):
		return PE
	case hasAnyPrefix(b, "\xfe\xed\xfa\xce", "\xfe\xed\xfa\xcf", "\xce\xfa\xed\xfe", "\xcf\xfa\xed\xfe"):
		return MachO
	case bytes.HasPrefix(b, []byte("\xca\xfe\xba\xbe")) && len(b) >= 8 && b[7] < 20:
		// A universal Mach-O binary; a Java class file shares the magic but gives a
		// version (at least 45) where a universal binary counts its architectures.
		return MachO
	case bytes.HasPrefix(b, []byte("#!")):
		return Script
	case hasAnyPrefix(b, "PK\x03\x04", "PK\x05\x06"):
		return Zip
	case bytes.HasPrefix(b, []byte("\x1f\x8b")):
		return Gzip
	case bytes.HasPrefix(b, []byte("BZh")):
		return Bzip2
	case bytes.HasPrefix(b, []byte("\xfd7zXZ\x00")):
		return XZ
	case bytes.HasPrefix(b, []byte("\x28\xb5\x2f\xfd")):
		return Zstd
	case len(b) > 262 && bytes.Equal(b[257:262], []byte("ustar")):
		return Tar
	case bytes.HasPrefix(b, []byte("%PDF-")):
		return PDF
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return JPEG
	case hasAnyPrefix(b, "GIF87a", "GIF89a"):
		return GIF
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return WebP
	}
	head := b[:min(len(b), 8<<10)]
	if bytes.IndexByte(head, 0) < 0 && utf8.Valid(trimPartialRune(head)) {
		return Text
	}
	return Binary
}

func hasAnyPrefix(b []byte, prefixes ...string) bool {
	for _, p := range prefixes {
		if bytes.HasPrefix(b, []byte(p)) {
			return true
		}
	}
	return false
}

// trimPartialRune drops a rune cut at the end of a head of a longer file.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// Executable reports whether kind runs as a program.
func Executable(kind string) bool {
	switch kind {
	case ELF, PE, MachO, Script:
		return true
	}
	return false
}

// byExtension is what a name's extension claims, for the kinds a name can claim.
var byExtension = map[string]string{
	".pdf": PDF, ".png": PNG, ".jpg": JPEG, ".jpeg": JPEG, ".gif": GIF, ".webp": WebP,
	".zip": Zip, ".jar": Zip, ".docx": Zip, ".xlsx": Zip, ".pptx": Zip, ".odt": Zip,
	".gz": Gzip, ".tgz": Gzip, ".bz2": Bzip2, ".xz": XZ, ".zst": Zstd, ".tar": Tar,
	".exe": PE, ".dll": PE, ".sh": Script,
	".txt": Text, ".md": Text, ".csv": Text, ".json": Text, ".yaml": Text, ".yml": Text, ".html": Text,
	".xml": Text, ".py": Text, ".js": Text, ".ts": Text, ".go": Text, ".tf": Text, ".log": Text,
}

// Mismatch says how content of kind contradicts name's extension ("" when it does not,
// or the extension claims nothing): a report.pdf that is an ELF binary. A script may be
// named .py, .js, .txt and so on (a shebang line is text), and an empty file matches
// any name.
func Mismatch(name, kind string) string {
	ext := strings.ToLower(path.Ext(name))
	claimed, ok := byExtension[ext]
	if !ok || kind == Unknown || claimed == kind {
		return ""
	}
	if kind == Script && claimed == Text {
		return ""
	}
	return "named " + ext + " but its content is " + kind
}

// Bounds of looking into an archive: a download is at most 16 MiB, but a compressed
// one may unpack to far more, so reading stops at these.
const (
	MaxEntries       = 10000
	MaxUnpackedBytes = 256 << 20
)

// ErrNotInspected is an archive whose entries were not all read: a compression this
// package does not read (xz, zstd), one that is damaged, or one past MaxEntries or
// MaxUnpackedBytes. Whether it holds an executable is unknown.
var ErrNotInspected = errors.New("the archive could not be looked into")

// ArchiveExecutables lists the entries of an archive (zip, tar, tar.gz, tar.bz2; of kind
// as Sniff says) whose content is an executable by its first bytes, at most limit of
// them. Content of another kind lists none. ErrNotInspected (wrapped) when the archive
// could not be read to its end.
func ArchiveExecutables(content []byte, kind string, limit int) ([]string, error) {
	switch kind {
	case Zip:
		return zipExecutables(content, limit)
	case Tar:
		return tarExecutables(bytes.NewReader(content), limit)
	case Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(content))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotInspected, err)
		}
		return compressedTar(zr, limit)
	case Bzip2:
		return compressedTar(bzip2.NewReader(bytes.NewReader(content)), limit)
	case XZ, Zstd:
		return nil, fmt.Errorf("%w: %s is not read here", ErrNotInspected, kind)
	}
	return nil, nil
}

// compressedTar lists the executables of a compressed stream that holds a tar; a
// compressed single file (not a tar) is itself sniffed.
func compressedTar(r io.Reader, limit int) ([]string, error) {
	lr := &io.LimitedReader{R: r, N: MaxUnpackedBytes + 1}
	head := make([]byte, 512)
	n, err := io.ReadFull(lr, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrNotInspected, err)
	}
	head = head[:n]
	if n < 262 || !bytes.Equal(head[257:262], []byte("ustar")) {
		if Executable(Sniff(head)) {
			return []string{"(the compressed file itself)"}, nil
		}
		return nil, nil
	}
	return tarExecutables(io.MultiReader(bytes.NewReader(head), lr), limit)
}

func tarExecutables(r io.Reader, limit int) ([]string, error) {
	lr, ok := r.(*io.LimitedReader)
	if !ok {
		lr = &io.LimitedReader{R: r, N: MaxUnpackedBytes + 1}
	}
	tr := tar.NewReader(lr)
	var out []string
	for entries := 0; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil || entries >= MaxEntries || lr.N <= 0 {
			return out, fmt.Errorf("%w: after %d entries: %v", ErrNotInspected, entries, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		head := make([]byte, 512)
		n, _ := io.ReadFull(tr, head)
		if (Executable(Sniff(head[:n])) || h.Mode&0o111 != 0 && n > 0) && len(out) < limit {
			out = append(out, h.Name)
		}
	}
}

// zipExecutables lists the entries of a zip archive whose content is an executable (by
// its first bytes, not its name, or an executable bit), at most limit of them.
func zipExecutables(content []byte, limit int) ([]string, error) {
	r, err := zip.NewReader(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotInspected, err)
	}
	if len(r.File) > MaxEntries {
		return nil, fmt.Errorf("%w: %d entries, more than %d", ErrNotInspected, len(r.File), MaxEntries)
	}
	var out []string
	for _, f := range r.File {
		if len(out) >= limit {
			break
		}
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			continue
		}
		head := make([]byte, 512)
		n, _ := io.ReadFull(rc, head)
		_ = rc.Close()
		if Executable(Sniff(head[:n])) || f.Mode()&0o111 != 0 && n > 0 {
			out = append(out, f.Name)
		}
	}
	return out, nil
}
