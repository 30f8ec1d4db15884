package archive

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// zip walks a zip archive. Each entry's ratio is taken over its compressed size as the
// central directory states it, which bounds what archive/zip reads of its data.
func (w *walker) zip(archive []byte) error {
	d, err := zipDirectory(archive)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotArchive, err)
	}
	view, listed, total := zipView(archive, d, w.p.MaxEntries)
	zr, err := zip.NewReader(bytes.NewReader(view), int64(len(view)))
	// ErrInsecurePath comes with a usable reader: such names are refused one by one.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return fmt.Errorf("%w: %w", ErrNotArchive, err)
	}
	for _, f := range zr.File {
		w.seen++
		if err := w.zipEntry(f); err != nil {
			return err
		}
		if w.rep.Stopped != nil {
			w.rep.NotLookedAt = total - w.seen
			return nil
		}
	}
	if total > listed {
		w.stopAt(&Stop{Limit: "max_entries", Reason: fmt.Sprintf("the archive has %d entries, more than %d (sandbox.extract_limits.max_entries); the last %d were not looked at",
			total, w.p.MaxEntries, total-listed)})
		w.rep.NotLookedAt = total - listed
	}
	return nil
}

// zipEntry checks and creates one zip entry.
func (w *walker) zipEntry(f *zip.File) error {
	mode := f.Mode()
	switch {
	case mode.IsDir():
		return w.entry(f.Name, Dir, mode, "", nil)
	case f.Flags&0x1 != 0: // encrypted: there is no key to read it with
		w.skip(f.Name, "an encrypted entry, which is not read")
		return nil
	case mode&fs.ModeSymlink != 0:
		target, reason := w.zipLinkTarget(f)
		if reason != "" {
			if w.rep.Stopped == nil {
				w.skip(f.Name, reason)
			}
			return nil
		}
		return w.entry(f.Name, Symlink, mode, target, nil)
	case !mode.IsRegular():
		w.skip(f.Name, skipSpecial(mode))
		return nil
	case f.Method != zip.Store && f.Method != zip.Deflate:
		w.skip(f.Name, fmt.Sprintf("compressed with zip method %d, which is not read (stored and deflated entries are)", f.Method))
		return nil
	}
	var rc io.ReadCloser
	defer func() {
		if rc != nil {
			_ = rc.Close()
		}
	}()
	return w.entry(f.Name, File, mode, "", func() io.Reader {
		var err error
		if rc, err = f.Open(); err != nil {
			rc = io.NopCloser(errReader{err})
		}
		return w.zipContent(f, rc)
	})
}

// zipContent is an entry's content under the limits, its ratio over its compressed size.
func (w *walker) zipContent(f *zip.File, rc io.Reader) io.Reader {
	w.rep.Compressed += int64(min(f.CompressedSize64, 1<<62))
	return &unpacked{m: &w.m, r: rc, in: func() int64 { return int64(min(f.CompressedSize64, 1<<62)) }}
}

// zipLinkTarget reads a zip symlink's target (its content), or why it cannot be.
func (w *walker) zipLinkTarget(f *zip.File) (string, string) {
	if f.Method != zip.Store && f.Method != zip.Deflate {
		return "", fmt.Sprintf("a symbolic link compressed with zip method %d, which is not read", f.Method)
	}
	rc, err := f.Open()
	if err != nil {
		return "", "a symbolic link whose target cannot be read: " + err.Error()
	}
	defer rc.Close()
	w.m.entry = f.Name
	b, err := io.ReadAll(io.LimitReader(w.zipContent(f, rc), maxLinkTarget+1))
	w.m.entry = ""
	switch {
	case w.m.stop != nil:
		w.stopAt(w.m.stop)
		return "", "stopped"
	case err != nil:
		return "", "a symbolic link whose target cannot be read: " + err.Error()
	case len(b) > maxLinkTarget:
		return "", fmt.Sprintf("a symbolic link whose target is longer than %d bytes", maxLinkTarget)
	}
	return string(b), ""
}

// errReader fails every read with its error.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
