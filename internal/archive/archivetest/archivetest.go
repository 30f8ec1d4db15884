// Package archivetest builds archives for tests, hostile ones included: entries with any
// name, type and mode (zip slip, absolute paths, symlinks and hard links out, devices,
// FIFOs, set-user-ID files), every compression extract_archive reads, and decompression
// bombs made without holding what they unpack to.
package archivetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"io"
	"io/fs"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Entry is one entry of an archive to build.
type Entry struct {
	Name string
	// Type is a tar type flag (tar.TypeReg when zero); Zip maps it to a mode.
	Type byte
	// Mode is the permission bits, and fs.ModeSetuid/ModeSetgid/ModeSticky.
	Mode fs.FileMode
	Body string
	// Zeros, when set, is the content instead of Body: that many zero bytes, streamed.
	Zeros int64
	// Link is a symlink's or hard link's target.
	Link string
}

// File, Dir, Symlink and HardLink are entries of those types.
func File(name, body string) Entry { return Entry{Name: name, Body: body, Mode: 0o644} }
func Dir(name string) Entry        { return Entry{Name: name, Type: tar.TypeDir, Mode: 0o755} }
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Link: target, Mode: 0o777}
}
func HardLink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeLink, Link: target, Mode: 0o644}
}

func (e Entry) size() int64 {
	if e.Zeros > 0 {
		return e.Zeros
	}
	return int64(len(e.Body))
}

func (e Entry) content() io.Reader {
	if e.Zeros > 0 {
		return io.LimitReader(zeros{}, e.Zeros)
	}
	return bytes.NewReader([]byte(e.Body))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Tar is a tar of entries, written to w (an io.Writer, so that a bomb never exists
// whole).
func Tar(tb testing.TB, w io.Writer, entries ...Entry) {
	tb.Helper()
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: tarMode(e.Mode), Linkname: e.Link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = e.size()
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		must(tb, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := io.Copy(tw, e.content())
			must(tb, err)
		}
	}
	must(tb, tw.Close())
}

// tarMode is a mode as a tar header's mode field has it.
func tarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	for bit, c := range map[fs.FileMode]int64{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if m&bit != 0 {
			v |= c
		}
	}
	return v
}

// TarBytes is Tar into memory.
func TarBytes(tb testing.TB, entries ...Entry) []byte {
	var b bytes.Buffer
	Tar(tb, &b, entries...)
	return b.Bytes()
}

// Zip is a zip of entries, each deflated; tar types map to the modes zip stores.
func Zip(tb testing.TB, entries ...Entry) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate}
		mode := e.Mode
		switch e.Type {
		case tar.TypeDir:
			mode |= fs.ModeDir
		case tar.TypeSymlink:
			mode |= fs.ModeSymlink
		case tar.TypeChar:
			mode |= fs.ModeDevice | fs.ModeCharDevice
		case tar.TypeBlock:
			mode |= fs.ModeDevice
		case tar.TypeFifo:
			mode |= fs.ModeNamedPipe
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		must(tb, err)
		body := e.content()
		if e.Type == tar.TypeSymlink {
			body = bytes.NewReader([]byte(e.Link))
		}
		_, err = io.Copy(w, body)
		must(tb, err)
	}
	must(tb, zw.Close())
	return b.Bytes()
}

// Compressions of a tar, by the format name extract_archive reports.
const (
	Gzip  = "tar.gz"
	Bzip2 = "tar.bz2"
	XZ    = "tar.xz"
	Zstd  = "tar.zst"
)

// Compressed is a tar of entries compressed as format says (Gzip, Bzip2, XZ, Zstd).
// Bzip2 is made by the bzip2 program (Go has no bzip2 writer): the test is skipped
// without it.
func Compressed(tb testing.TB, format string, entries ...Entry) []byte {
	tb.Helper()
	var b bytes.Buffer
	w := compressor(tb, format, &b)
	Tar(tb, w, entries...)
	must(tb, w.Close())
	return b.Bytes()
}

func compressor(tb testing.TB, format string, b *bytes.Buffer) io.WriteCloser {
	tb.Helper()
	switch format {
	case Gzip:
		w, err := gzip.NewWriterLevel(b, flate.BestCompression)
		must(tb, err)
		return w
	case XZ:
		w, err := xz.NewWriter(b)
		must(tb, err)
		return w
	case Zstd:
		w, err := zstd.NewWriter(b, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
		must(tb, err)
		return w
	case Bzip2:
		return bzip2Writer(tb, b)
	}
	tb.Fatalf("archivetest: no compression %q", format)
	return nil
}

// bzip2Writer pipes what is written through the bzip2 program into b.
func bzip2Writer(tb testing.TB, b *bytes.Buffer) io.WriteCloser {
	tb.Helper()
	if _, err := exec.LookPath("bzip2"); err != nil {
		tb.Skip("skipping: the bzip2 program is not installed (Go has no bzip2 writer)")
	}
	cmd := exec.Command("bzip2", "-c")
	cmd.Stdout = b
	in, err := cmd.StdinPipe()
	must(tb, err)
	must(tb, cmd.Start())
	return &waitCloser{WriteCloser: in, cmd: cmd}
}

type waitCloser struct {
	io.WriteCloser
	cmd *exec.Cmd
}

func (w *waitCloser) Close() error {
	if err := w.WriteCloser.Close(); err != nil {
		return err
	}
	return w.cmd.Wait()
}

// Bomb is a zstd-compressed tar holding one file of size zero bytes, named name: a 1
// GiB one is 32 KiB (32,000 to 1, zstd RLE blocks), and is made in well under a second
// without ever holding the GiB.
func Bomb(tb testing.TB, name string, size int64) []byte {
	tb.Helper()
	return Compressed(tb, Zstd, Entry{Name: name, Zeros: size, Mode: 0o644})
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
