package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The xz decoder allocates the dictionary a block's header asks for, up to 4 GiB, before
// reading any data: a 100-byte stream could take 4 GiB of the harness's memory. So no
// block header may ask for more than MaxXZDict. The decoder reads a block header only
// when its CRC-32 is right, so every such header in the archive (wherever the stream's
// structure puts it) is found by looking for the bytes of an LZMA2 filter with a large
// dictionary (0x21, 0x01, size) and checking whether a header with a valid CRC-32 holds
// them there. In real archives these bytes are rare (a few per GiB of random data), and
// the work is bounded so that an archive made of them costs little too.
const (
	xzFilterLZMA2 = 0x21
	// xzMaxHeader is the largest block header: (255+1)*4 bytes.
	xzMaxHeader = 1024
	// Work bounds: look-alikes of a large-dictionary filter, and headers checked.
	xzMaxCandidates = 4096
	xzMaxCRCs       = 1 << 16
)

// errXZDict is an xz stream that asks for a dictionary over MaxXZDict.
var errXZDict = errors.New("an xz block asks for a dictionary larger than the 64 MiB allowed (xz -9 uses 64 MiB)")

// lzma2Dict is the dictionary size an LZMA2 filter's property byte says (-1: invalid).
func lzma2Dict(b byte) int64 {
	switch {
	case b > 40:
		return -1
	case b == 40:
		return 0xFFFFFFFF
	}
	return int64(2|(b&1)) << (b/2 + 11)
}

// checkXZDicts refuses an xz archive with a block header that asks for a dictionary
// over MaxXZDict, or with too many look-alikes of one to check.
func checkXZDicts(b []byte) error {
	candidates, crcs := 0, 0
	for i := 0; ; i++ {
		j := bytes.Index(b[i:], []byte{xzFilterLZMA2, 0x01})
		if j < 0 || i+j+2 >= len(b) {
			return nil
		}
		i += j
		if d := lzma2Dict(b[i+2]); d <= MaxXZDict {
			continue // a small dictionary, or an invalid one the decoder refuses itself
		}
		if candidates++; candidates > xzMaxCandidates {
			return fmt.Errorf("more than %d places in the xz stream look like a block asking for a dictionary over 64 MiB: not read", xzMaxCandidates)
		}
		for p := i - 2; p >= 0 && p > i-xzMaxHeader; p-- {
			hs := (int(b[p]) + 1) * 4
			if b[p] == 0 || p+hs > len(b) || p+hs-4 < i+3 || !filterAt(b[p:p+hs-4], i-p) {
				continue
			}
			if crcs++; crcs > xzMaxCRCs {
				return fmt.Errorf("more than %d possible xz block headers to check: not read", xzMaxCRCs)
			}
			if crc32.ChecksumIEEE(b[p:p+hs-4]) == binary.LittleEndian.Uint32(b[p+hs-4:]) {
				return errXZDict
			}
		}
	}
}

// filterAt reports whether block header h (without its CRC-32), parsed as the xz
// format lays it out, has a filter starting at offset off.
func filterAt(h []byte, off int) bool {
	flags := h[1]
	if flags&0x3c != 0 { // reserved bits: not a header
		return false
	}
	q := 2
	skip := func() bool { // a multibyte integer
		for k := 0; k < 9 && q < len(h); k++ {
			q++
			if h[q-1]&0x80 == 0 {
				return true
			}
		}
		return false
	}
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} { // compressed, uncompressed size
		if present && !skip() {
			return false
		}
	}
	for range int(flags&0x03) + 1 {
		if q == off {
			return true
		}
		if !skip() || q >= len(h) { // the filter's id
			return false
		}
		size := int(h[q]) // its properties' size: filters have a handful of bytes at most
		if h[q]&0x80 != 0 {
			return false
		}
		q += 1 + size
		if q > len(h) {
			return false
		}
	}
	return false
}
