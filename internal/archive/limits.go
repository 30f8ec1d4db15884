package archive

import (
	"errors"
	"fmt"
	"io"
)

// errStopped is what reading unpacked content returns once the walk must stop (the
// meter's stop says why): the reader that hit it, tar's or the caller's, gives up.
var errStopped = errors.New("archive: extraction stopped")

// meter enforces MaxBytes and MaxRatio on everything the archive unpacks to, and keeps
// the first stop.
type meter struct {
	p   Policy
	out int64 // unpacked bytes, the whole archive
	// entry is the entry whose content is being read ("" between entries), partial
	// whether the caller was writing it.
	entry   string
	partial bool
	stop    *Stop
}

func (m *meter) halt(limit, reason string) {
	if m.stop == nil {
		m.stop = &Stop{Limit: limit, Entry: m.entry, Partial: m.partial, Reason: reason}
	}
}

// add counts n more unpacked bytes against MaxBytes (a hard link's copy: its source is
// not compressed, so no ratio applies); false once passed.
func (m *meter) add(n int64, entry string) bool {
	m.out += n
	if m.out > m.p.MaxBytes {
		m.entry = entry
		m.halt("max_bytes", m.bytesReason())
		return false
	}
	return true
}

func (m *meter) bytesReason() string {
	return fmt.Sprintf("the archive unpacks to more than %d bytes (sandbox.extract_limits.max_bytes); the rest was not extracted", m.p.MaxBytes)
}

// unpacked is a stream of unpacked bytes (a tar's whole stream, or one zip entry)
// whose ratio is taken over in(), the compressed bytes behind it.
type unpacked struct {
	m  *meter
	r  io.Reader
	in func() int64
	n  int64
}

// Read passes on what the decompressor yields until a limit is passed: then nothing
// more, so no more than one buffer past the limit is ever decompressed. A read error
// other than the stream's end is damage, and stops the walk as well.
func (u *unpacked) Read(p []byte) (int, error) {
	if u.m.stop != nil {
		return 0, errStopped
	}
	n, err := u.r.Read(p)
	u.n += int64(n)
	u.m.out += int64(n)
	if u.m.out > u.m.p.MaxBytes {
		u.m.halt("max_bytes", u.m.bytesReason())
		return 0, errStopped
	}
	if in := max(u.in(), 1); u.n > RatioGrace && float64(u.n) > u.m.p.MaxRatio*float64(in) {
		u.m.halt("max_ratio", fmt.Sprintf("the archive unpacks to more than %g times its compressed size (%d bytes from %d; sandbox.extract_limits.max_ratio): "+
			"a decompression bomb; the rest was not extracted", u.m.p.MaxRatio, u.n, in))
		return 0, errStopped
	}
	if err != nil && !errors.Is(err, io.EOF) {
		u.m.halt("damaged", "the archive is damaged here and was not read further: "+err.Error())
		return n, errStopped
	}
	return n, err
}

// consumed counts the compressed bytes a decompressor reads.
type consumed struct {
	r io.Reader
	n int64
}

func (c *consumed) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
