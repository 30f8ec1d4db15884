package netd

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// DNS answers, built here so no query ever leaves the sandbox: A queries get a synthetic
// address (TTL dnsTTL), AAAA and other types an empty NOERROR answer (so clients fall
// back to IPv4), "localhost" its loopback address, malformed names NXDOMAIN.
const (
	dnsTTL      = 60
	typeA       = 1
	typeAAAA    = 28
	typeANY     = 255
	classIN     = 1
	rcodeOK     = 0
	rcodeFormat = 1
	rcodeNX     = 3
	rcodeNotImp = 4
	maxDNSMsg   = 4096
	dnsPort     = wire.DNSPort
)

var errBadQuery = errors.New("malformed DNS query")

// answer builds the response to one query message; nil means drop it (not even a header).
func (s *Server) answer(q []byte) []byte {
	if len(q) < 12 || q[2]&0x80 != 0 { // too short, or a response
		return nil
	}
	id, flags := q[0:2], binary.BigEndian.Uint16(q[2:4])
	opcode := (flags >> 11) & 0xf
	resp := func(rcode uint16, question []byte, answers ...[]byte) []byte {
		out := make([]byte, 12, 12+len(question)+32)
		copy(out, id)
		f := uint16(0x8000) | opcode<<11 | 0x0400 /* AA */ | flags&0x0100 /* RD */ | 0x0080 /* RA */ | rcode
		binary.BigEndian.PutUint16(out[2:], f)
		if question != nil {
			binary.BigEndian.PutUint16(out[4:], 1)
		}
		binary.BigEndian.PutUint16(out[6:], uint16(len(answers)))
		out = append(out, question...)
		for _, a := range answers {
			out = append(out, a...)
		}
		return out
	}
	if opcode != 0 {
		return resp(rcodeNotImp, nil)
	}
	if binary.BigEndian.Uint16(q[4:6]) != 1 {
		return resp(rcodeFormat, nil)
	}
	name, end, err := readName(q, 12)
	if err != nil || end+4 > len(q) {
		return resp(rcodeFormat, nil)
	}
	question := q[12 : end+4]
	qtype, qclass := binary.BigEndian.Uint16(q[end:]), binary.BigEndian.Uint16(q[end+2:])
	host, err := wire.NormalizeHost(name)
	if err != nil {
		return resp(rcodeNX, question)
	}
	if qclass != classIN {
		return resp(rcodeOK, question)
	}
	var ip netip.Addr
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		if qtype == typeAAAA {
			ip = netip.IPv6Loopback()
		} else if qtype == typeA || qtype == typeANY {
			ip = netip.MustParseAddr("127.0.0.1")
		}
	case qtype == typeA || qtype == typeANY:
		if _, err := netip.ParseAddr(host); err == nil {
			return resp(rcodeNX, question)
		}
		ip = s.names.addr(host)
	}
	if !ip.IsValid() {
		return resp(rcodeOK, question)
	}
	rr := []byte{0xc0, 12} // pointer to the question's name
	t := uint16(typeA)
	if ip.Is6() {
		t = typeAAAA
	}
	rr = binary.BigEndian.AppendUint16(rr, t)
	rr = binary.BigEndian.AppendUint16(rr, classIN)
	rr = binary.BigEndian.AppendUint32(rr, dnsTTL)
	b := ip.AsSlice()
	rr = binary.BigEndian.AppendUint16(rr, uint16(len(b)))
	rr = append(rr, b...)
	return resp(rcodeOK, question, rr)
}

// readName reads an uncompressed name (queries carry no pointers) and returns the offset
// after it.
func readName(m []byte, off int) (string, int, error) {
	var labels []string
	total := 0
	for {
		if off >= len(m) {
			return "", 0, errBadQuery
		}
		l := int(m[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(m) {
			return "", 0, errBadQuery
		}
		total += l + 1
		if total > 255 {
			return "", 0, errBadQuery
		}
		labels = append(labels, string(m[off:off+l]))
		off += l
	}
	if len(labels) == 0 {
		return ".", off, nil
	}
	return strings.Join(labels, "."), off, nil
}

func (s *Server) serveDNSUDP(pc net.PacketConn) {
	buf := make([]byte, maxDNSMsg)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if r := s.answer(buf[:n]); r != nil {
			_, _ = pc.WriteTo(r, from)
		}
	}
}

func (s *Server) serveDNSTCP(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			var hdr [2]byte
			for {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(hdr[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				r := s.answer(q)
				if r == nil {
					return
				}
				if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(r))), r...)); err != nil {
					return
				}
			}
		}()
	}
}
