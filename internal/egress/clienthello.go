package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
)

// maxClientHello bounds how much of a tunnel's first flight the proxy buffers to find the
// server name. Post-quantum key shares make hellos around 2 KB; 64 KB is generous.
const maxClientHello = 64 << 10

var errNotTLS = errors.New("not a TLS handshake")

// peekSNI reads (without consuming) the TLS ClientHello at the start of r and returns its
// server name, "" when it has none. errNotTLS means the stream does not start with a TLS
// handshake record.
func peekSNI(r *bufio.Reader) (string, error) {
	var msg []byte // handshake bytes gathered from one or more records
	off := 0
	for {
		hdr, err := r.Peek(off + 5)
		if err != nil {
			return "", err
		}
		h := hdr[off:]
		if h[0] != 0x16 || h[1] != 0x03 {
			if off == 0 {
				return "", errNotTLS
			}
			return "", errors.New("TLS ClientHello interrupted by another record type")
		}
		n := int(binary.BigEndian.Uint16(h[3:5]))
		if off+5+n > maxClientHello {
			return "", errors.New("TLS ClientHello too large")
		}
		rec, err := r.Peek(off + 5 + n)
		if err != nil {
			return "", err
		}
		msg = append(msg, rec[off+5:]...)
		off += 5 + n
		if len(msg) >= 4 {
			if msg[0] != 1 {
				return "", errors.New("first TLS handshake message is not a ClientHello")
			}
			want := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
			if len(msg) >= 4+want {
				return sniFromHello(msg[4 : 4+want])
			}
		}
	}
}

func sniFromHello(b []byte) (string, error) {
	bad := errors.New("malformed TLS ClientHello")
	// client_version(2) random(32)
	if len(b) < 34 {
		return "", bad
	}
	b = b[34:]
	skip := func(lenBytes int) bool {
		if len(b) < lenBytes {
			return false
		}
		n := 0
		for i := 0; i < lenBytes; i++ {
			n = n<<8 | int(b[i])
		}
		if len(b) < lenBytes+n {
			return false
		}
		b = b[lenBytes+n:]
		return true
	}
	if !skip(1) || !skip(2) || !skip(1) { // session id, cipher suites, compression
		return "", bad
	}
	if len(b) == 0 {
		return "", nil // no extensions
	}
	if len(b) < 2 {
		return "", bad
	}
	ext := b[2:]
	if int(binary.BigEndian.Uint16(b)) != len(ext) {
		return "", bad
	}
	for len(ext) >= 4 {
		typ, n := binary.BigEndian.Uint16(ext), int(binary.BigEndian.Uint16(ext[2:]))
		if len(ext) < 4+n {
			return "", bad
		}
		data := ext[4 : 4+n]
		ext = ext[4+n:]
		if typ != 0 { // server_name
			continue
		}
		if len(data) < 2 || int(binary.BigEndian.Uint16(data)) != len(data)-2 {
			return "", bad
		}
		list := data[2:]
		for len(list) >= 3 {
			nt, l := list[0], int(binary.BigEndian.Uint16(list[1:]))
			if len(list) < 3+l {
				return "", bad
			}
			if nt == 0 {
				return string(list[3 : 3+l]), nil
			}
			list = list[3+l:]
		}
		return "", bad
	}
	return "", nil
}
