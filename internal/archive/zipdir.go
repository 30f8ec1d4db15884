package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// archive/zip reads every record of a zip's central directory into memory before the
// first entry can be opened (about 250 bytes each, from 46 in the archive: a 256 MiB
// archive of empty entries would take over a GiB). So the directory is found and its
// records counted here first, without allocating, exactly where archive/zip would read
// them (zipDirectory mirrors its readDirectoryEnd), and archive/zip is given a view of
// the archive that ends after the first MaxEntries records (zipView), with an end
// record of its own that says so.

// Signatures and fixed sizes of the zip records read here.
const (
	zipDirSig      = 0x02014b50 // central directory record
	zipEndSig      = 0x06054b50 // end of central directory
	zip64EndSig    = 0x06064b50
	zip64LocSig    = 0x07064b50
	zipDirLen      = 46
	zipEndLen      = 22
	zip64EndLen    = 56
	zip64LocLen    = 20
	zipMaxComment  = 0xffff
	zip16Saturated = 0xffff
)

var errZipFormat = errors.New("not a valid zip: its central directory is not where its end record says")

// zipDir is where a zip's central directory starts (absolute), and the offset that the
// archive's own offsets are relative to (data prepended to the zip moves it).
type zipDir struct {
	base, start int64
}

func le16(b []byte) uint64 { return uint64(binary.LittleEndian.Uint16(b)) }
func le32(b []byte) uint64 { return uint64(binary.LittleEndian.Uint32(b)) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// zipDirectory finds the central directory as archive/zip does.
func zipDirectory(b []byte) (zipDir, error) {
	end := -1
	for i := len(b) - zipEndLen; i >= 0 && i >= len(b)-zipEndLen-zipMaxComment; i-- {
		if le32(b[i:]) == zipEndSig && i+zipEndLen+int(le16(b[i+20:])) <= len(b) {
			end = i
			break
		}
	}
	if end < 0 {
		return zipDir{}, errZipFormat
	}
	endOff := int64(end)
	records, size, offset := le16(b[end+10:]), le32(b[end+12:]), le32(b[end+16:])
	if records == zip16Saturated || size == zip16Saturated || offset == 0xffffffff {
		if loc := end - zip64LocLen; loc >= 0 && le32(b[loc:]) == zip64LocSig && le32(b[loc+4:]) == 0 && le32(b[loc+16:]) == 1 {
			p := le64(b[loc+8:])
			if len(b) < zip64EndLen || p > uint64(len(b)-zip64EndLen) || le32(b[p:]) != zip64EndSig {
				return zipDir{}, errZipFormat
			}
			endOff, size, offset = int64(p), le64(b[p+40:]), le64(b[p+48:])
		}
	}
	if size > uint64(len(b)) || offset > uint64(len(b)) {
		return zipDir{}, errZipFormat
	}
	d := zipDir{base: endOff - int64(size) - int64(offset)}
	if o := d.base + int64(offset); o < 0 || o >= int64(len(b)) {
		return zipDir{}, errZipFormat
	}
	// archive/zip's own repair: an end record that implies data prepended to the zip,
	// where the directory is found at the offset as written, is read with no base.
	if d.base > 0 && zipRecordAt(b, int64(offset)) > 0 {
		d.base = 0
	}
	d.start = d.base + int64(offset)
	return d, nil
}

// zipRecordAt is the length of the central directory record at off, or 0 if none is.
func zipRecordAt(b []byte, off int64) int64 {
	if off < 0 || off+zipDirLen > int64(len(b)) || le32(b[off:]) != zipDirSig {
		return 0
	}
	n := int64(zipDirLen) + int64(le16(b[off+28:])+le16(b[off+30:])+le16(b[off+32:]))
	if off+n > int64(len(b)) {
		return 0
	}
	return n
}

// zipView is the archive as archive/zip is to read it: from the base to the end of the
// first limit directory records, then an end record (zip64 when the count needs it)
// that lists just those. It returns the view, how many records it lists, and how many
// the directory has in all.
func zipView(b []byte, d zipDir, limit int) (view []byte, listed, total int) {
	off, cut := d.start, d.start
	for n := zipRecordAt(b, off); n > 0; n = zipRecordAt(b, off) {
		off += n
		if total++; total <= limit {
			cut = off
		}
	}
	listed = min(total, limit)
	var v bytes.Buffer
	v.Grow(int(cut-d.base) + zip64EndLen + zip64LocLen + zipEndLen)
	v.Write(b[d.base:cut])
	dirOff, dirSize := uint64(d.start-d.base), uint64(cut-d.start)
	count16 := uint64(listed)
	// archive/zip looks for a zip64 end record when a field of the plain one is
	// saturated (its directory size at 0xffff too): then one is written, so that it
	// never finds one that the archive planted in its last record.
	if listed >= zip16Saturated || dirSize == zip16Saturated || dirOff >= 0xffffffff {
		end64 := uint64(v.Len())
		v.Write(le(4, zip64EndSig, 8, zip64EndLen-12, 2, 45, 2, 45, 4, 0, 4, 0, 8, uint64(listed), 8, uint64(listed), 8, dirSize, 8, dirOff))
		v.Write(le(4, zip64LocSig, 4, 0, 8, end64, 4, 1))
		count16, dirOff = zip16Saturated, 0xffffffff
	}
	v.Write(le(4, zipEndSig, 2, 0, 2, 0, 2, count16, 2, count16, 4, min(dirSize, 0xffffffff), 4, dirOff, 2, 0))
	return v.Bytes(), listed, total
}

// le lays out (width, value) pairs little-endian.
func le(pairs ...uint64) []byte {
	var out []byte
	for i := 0; i+1 < len(pairs); i += 2 {
		out = binary.LittleEndian.AppendUint64(out, pairs[i+1])[:len(out)+int(pairs[i])]
	}
	return out
}
