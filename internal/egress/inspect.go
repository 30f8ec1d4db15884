package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// alertUnrecognizedName is a fatal TLS alert record (unrecognized_name): what a client
// whose server name does not match the CONNECT host gets, since a 403 can no longer be
// sent once the tunnel is open.
var alertUnrecognizedName = []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x70}

// inspectFirstFlight peeks at what the client sends first (without consuming it).
func (p *Proxy) inspectFirstFlight(conn net.Conn, br *bufio.Reader, host string) *Denial {
	_ = conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	first, err := br.Peek(1)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			// A client that waits for the server (SMTP-style) sends nothing at first;
			// there is nothing to front with.
			return nil
		}
		return deny(ReasonUnsupported, host, "reading the tunnel's first bytes: %v", err)
	}
	switch {
	case first[0] == 0x16:
		sni, err := peekSNI(br)
		if err != nil {
			return deny(ReasonUnsupported, host, "the tunnel's TLS ClientHello could not be read: %v", err)
		}
		if sni == "" {
			if len(p.policy.allow) > 0 {
				return deny(ReasonNoSNI, host, "TLS to %s without a server name; under an allow list the server name must be sent", host)
			}
			return nil
		}
		if n, err := NormalizeHost(sni); err != nil || n != host {
			return deny(ReasonSNIMismatch, host, "TLS server name %q differs from the CONNECT host %s", sni, host)
		}
	case first[0] >= 'A' && first[0] <= 'Z':
		return checkPlainHost(br, host)
	}
	return nil
}

// checkPlainHost: an HTTP request inside a tunnel must be for the tunnel's host.
func checkPlainHost(br *bufio.Reader, host string) *Denial {
	n := br.Buffered()
	for {
		// Peeking one byte more than is buffered waits for whatever the client sends next.
		b, err := br.Peek(n)
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:i+4])))
			if err != nil {
				return nil //nolint:nilerr // not HTTP after all
			}
			if !sameHost(req.Host, host) {
				return deny(ReasonHostMismatch, host, "the request's Host header %q differs from the CONNECT host %s", req.Host, host)
			}
			return nil
		}
		if err != nil || n >= br.Size() {
			return nil //nolint:nilerr // no complete header: not HTTP, or a slow client; carry it
		}
		n = br.Buffered() + 1
	}
}

// sameHost compares a Host header (maybe with a port) with a normalized host name.
func sameHost(hostHeader, host string) bool {
	h := hostHeader
	if hh, _, err := net.SplitHostPort(hostHeader); err == nil {
		h = hh
	}
	n, err := NormalizeHost(h)
	return err == nil && n == host
}
