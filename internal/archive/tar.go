package archive

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// tar walks a tar archive, compressed as f says. The ratio is taken over the whole
// stream: what the decompressor yielded (headers and skipped content included, since
// tar reads through them) over what it consumed.
func (w *walker) tar(archive []byte, f Format) error {
	src := &consumed{r: bytes.NewReader(archive)}
	dec, done, err := decompressor(f, archive, src)
	if err != nil {
		return fmt.Errorf("%w: a %s stream that cannot be read: %w", ErrNotArchive, f, err)
	}
	defer done()
	tr := tar.NewReader(&unpacked{m: &w.m, r: dec, in: func() int64 { return src.n }})
	defer func() { w.rep.Compressed = src.n }()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if w.m.stop == nil && w.seen == 0 {
				return fmt.Errorf("%w: the %s stream holds no tar archive (%w)", ErrNotArchive, f, err)
			}
			w.m.halt("damaged", "the archive is damaged after the entries above and was not read further: "+err.Error())
			w.stopAt(w.m.stop)
			return nil
		}
		if !w.count() {
			return nil
		}
		if err := w.tarEntry(tr, h); err != nil {
			return err
		}
		if w.rep.Stopped != nil {
			return nil
		}
	}
}

// tarEntry checks and creates one tar entry.
func (w *walker) tarEntry(tr *tar.Reader, h *tar.Header) error {
	mode := h.FileInfo().Mode()
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont:
		return w.entry(h.Name, File, mode, "", func() io.Reader { return tr })
	case tar.TypeDir:
		return w.entry(h.Name, Dir, mode, "", nil)
	case tar.TypeSymlink:
		return w.entry(h.Name, Symlink, mode, h.Linkname, nil)
	case tar.TypeLink:
		return w.entry(h.Name, HardLink, mode, h.Linkname, nil)
	case tar.TypeXGlobalHeader:
		return nil // metadata for the entries after it, nothing to create
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		w.skip(h.Name, skipSpecial(mode))
		return nil
	}
	w.skip(h.Name, fmt.Sprintf("a tar entry of type %q, which is not extracted", h.Typeflag))
	return nil
}

// decompressor is the tar stream inside an archive of format f read from src, and what
// releases it. The decoders are set up so that their memory does not depend on what
// the stream asks for: an xz dictionary is checked first (xzDicts), a zstd window
// capped, and zstd decodes in this goroutine.
func decompressor(f Format, archive []byte, src io.Reader) (io.Reader, func(), error) {
	none := func() {}
	switch f {
	case Tar:
		return src, none, nil
	case TarGzip:
		r, err := gzip.NewReader(src)
		return r, none, err
	case TarBzip2:
		return bzip2.NewReader(src), none, nil
	case TarXZ:
		if err := checkXZDicts(archive); err != nil {
			return nil, none, err
		}
		r, err := xz.ReaderConfig{DictCap: lzma.MinDictCap}.NewReader(src)
		return r, none, err
	case TarZstd:
		r, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(MaxZstdWindow))
		if err != nil {
			return nil, none, err
		}
		return r, r.Close, nil
	}
	return nil, none, fmt.Errorf("format %q", f)
}
