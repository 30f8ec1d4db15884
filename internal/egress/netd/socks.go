package netd

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// SOCKS5 (RFC 1928) with no authentication and CONNECT only. Names are passed to the
// harness as names ("socks5h"); an IPv4 address that netd's DNS handed out is mapped back
// to its name, so plain "socks5" clients that resolved first work too.
const (
	socksVersion      = 5
	socksOK           = 0x00
	socksFailure      = 0x01
	socksNotAllowed   = 0x02
	socksHostUnreach  = 0x04
	socksCmdNotSupp   = 0x07
	socksAddrNotSupp  = 0x08
	socksCmdConnect   = 0x01
	socksAtypIPv4     = 0x01
	socksAtypDomain   = 0x03
	socksAtypIPv6     = 0x04
	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff
)

func (s *Server) serveSOCKS(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	host, port, ok := s.socksHandshake(c)
	if !ok {
		c.Close()
		return
	}
	up, r, resp, err := s.openResponse(host, port)
	if err != nil {
		s.cfg.Log.Printf("SOCKS %s:%s: %v", host, port, err)
		_ = socksReply(c, socksFailure)
		c.Close()
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		code := byte(socksFailure)
		switch resp.StatusCode {
		case http.StatusForbidden:
			code = socksNotAllowed
		case http.StatusBadGateway:
			code = socksHostUnreach
		}
		s.cfg.Log.Printf("SOCKS %s:%s refused: %s", host, port, resp.Header.Get("X-Trueforge-Deny"))
		_ = socksReply(c, code)
		c.Close()
		up.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if socksReply(c, socksOK) != nil || flush(c, r) != nil {
		c.Close()
		up.Close()
		return
	}
	pipe(c, up)
}

// socksHandshake reads the greeting and the request; on failure it has already replied.
func (s *Server) socksHandshake(c net.Conn) (host, port string, ok bool) {
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != socksVersion {
		return "", "", false
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return "", "", false
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == socksNoAuth
	}
	if !noAuth {
		_, _ = c.Write([]byte{socksVersion, socksNoAcceptable})
		return "", "", false
	}
	if _, err := c.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return "", "", false
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != socksVersion {
		return "", "", false
	}
	switch req[3] {
	case socksAtypIPv4:
		var b [4]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return "", "", false
		}
		host = s.names.hostFor(netip.AddrFrom4(b).String())
	case socksAtypIPv6:
		var b [16]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return "", "", false
		}
		host = netip.AddrFrom16(b).String()
	case socksAtypDomain:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return "", "", false
		}
		b := make([]byte, l[0])
		if _, err := io.ReadFull(c, b); err != nil {
			return "", "", false
		}
		host = string(b)
	default:
		_ = socksReply(c, socksAddrNotSupp)
		return "", "", false
	}
	var pb [2]byte
	if _, err := io.ReadFull(c, pb[:]); err != nil {
		return "", "", false
	}
	if req[1] != socksCmdConnect {
		_ = socksReply(c, socksCmdNotSupp)
		return "", "", false
	}
	return host, strconv.Itoa(int(binary.BigEndian.Uint16(pb[:]))), true
}

func socksReply(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
