package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// alertUnrecognizedName is a fatal TLS alert record (unrecognized_name): what a client
// whose server name does not match the CONNECT host gets, since a 403 can no longer be
// sent once the tunnel is open.
var alertUnrecognizedName = []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x70}

// connect handles a CONNECT: policy on the target name, resolution with the address
// check, then either an opaque tunnel whose TLS server name must match, or TLS
// termination when the sandbox has secrets.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// With the client socket handed off, every answer goes to it, not to netd.
	var client net.Conn
	if r.Header.Get(ClientFDHeader) != "" {
		c, err := handedOffClient(ctx)
		if err != nil {
			d := deny(ReasonBadTarget, r.Host, "netd's hand-off failed: %v", err)
			p.logDeny("tunnel", r.Host, "", r, d)
			d.serve(w)
			return
		}
		client = c
		if !p.track(client) {
			client.Close()
			return
		}
		defer p.untrack(client)
		if nc, _, err := http.NewResponseController(w).Hijack(); err == nil {
			nc.Close() // netd's part is done
		}
	}
	refuse := func(mode, host, port string, d *Denial) {
		p.logDeny(mode, host, port, r, d)
		if client != nil {
			_ = d.write(client)
			client.Close()
			return
		}
		d.serve(w)
	}
	rawHost, rawPort, err := net.SplitHostPort(r.Host)
	if err != nil {
		refuse("tunnel", r.Host, "", deny(ReasonBadTarget, r.Host, "CONNECT needs host:port, got %q", r.Host))
		return
	}
	host, port, d := target(rawHost, rawPort)
	if d == nil {
		d = p.checkHost(host)
	}
	var addrs []netip.Addr
	if d == nil {
		addrs, d = p.resolve(ctx, host)
	}
	terminate := false
	if d == nil {
		terminate, d = p.shouldTerminate(ctx, host)
	}
	mode := "tunnel"
	if terminate {
		mode = "terminate"
	}
	if d != nil {
		refuse(mode, host, port, d)
		return
	}
	var upstream net.Conn
	if !terminate {
		if upstream, err = p.dial(ctx, addrs, port); err != nil {
			refuse(mode, host, port, asDenial(err, host))
			return
		}
	}
	conn := client
	var pre []byte
	if conn == nil {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			if upstream != nil {
				upstream.Close()
			}
			return
		}
		conn = unwrap(c)
		if !p.track(conn) {
			conn.Close()
			return
		}
		defer p.untrack(conn)
		// What the server already read past the CONNECT request belongs to the tunnel.
		b, _ := brw.Reader.Peek(brw.Reader.Buffered())
		pre = bytes.Clone(b)
	}
	preR := bytes.NewReader(pre)
	br := bufio.NewReaderSize(io.MultiReader(preR, conn), maxClientHello+5)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		if upstream != nil {
			upstream.Close()
		}
		return
	}
	if terminate {
		p.terminate(ctx, conn, br, host, port)
		return
	}
	p.tunnel(conn, br, preR, upstream, host, port)
}

// shouldTerminate: a sandbox with secrets has its TLS terminated, except Passthrough
// hosts (and, with TerminateOnlySecretHosts, hosts no secret is bound to).
func (p *Proxy) shouldTerminate(ctx context.Context, host string) (bool, *Denial) {
	if len(p.placeholders) == 0 || matchAny(p.passthrough, host) {
		return false, nil
	}
	if !p.cfg.TerminateOnlySecretHosts {
		return true, nil
	}
	cur, err := p.current(ctx)
	if err != nil {
		return false, deny(ReasonSecretSourceError, host, "the environment's secrets could not be read: %v", err)
	}
	return secretHost(cur, host), nil
}

// tunnel relays an opaque connection after checking its first flight: a TLS ClientHello
// must name the CONNECT host (domain fronting at the SNI layer); a plain HTTP request must
// carry it in Host. Server-first protocols work because upstream-to-client flows at once.
func (p *Proxy) tunnel(conn net.Conn, br *bufio.Reader, pre *bytes.Reader, upstream net.Conn, host, port string) {
	defer conn.Close()
	defer upstream.Close()
	down := make(chan struct{})
	go func() {
		defer close(down)
		_, _ = io.Copy(conn, upstream)
		closeWrite(conn)
	}()
	if d := p.inspectFirstFlight(conn, br, host); d != nil {
		p.logDeny("tunnel", host, port, nil, d)
		if d.Reason == ReasonSNIMismatch || d.Reason == ReasonNoSNI {
			_, _ = conn.Write(alertUnrecognizedName)
		} else {
			_ = d.write(conn)
		}
		return
	}
	p.log(Decision{Allowed: true, Mode: "tunnel", Host: host, Port: port, Addr: upstream.RemoteAddr().String()})
	bigBuffers(conn)
	// Hand over what was buffered, then copy from the raw connection so the kernel can
	// splice.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := upstream.Write(b); err != nil {
			return
		}
		_, _ = br.Discard(n)
	}
	// br has drained pre into its buffer unless the peek found nothing to read.
	if _, err := io.Copy(upstream, pre); err != nil {
		return
	}
	_, _ = io.Copy(upstream, conn)
	closeWrite(upstream)
	<-down
}

// inspectFirstFlight peeks at what the client sends first (without consuming it).
func (p *Proxy) inspectFirstFlight(conn net.Conn, br *bufio.Reader, host string) *Denial {
	_ = conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	defer conn.SetReadDeadline(time.Time{})
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
				return nil // not HTTP after all
			}
			if !sameHost(req.Host, host) {
				return deny(ReasonHostMismatch, host, "the request's Host header %q differs from the CONNECT host %s", req.Host, host)
			}
			return nil
		}
		if err != nil || n >= br.Size() {
			return nil // no complete header: not HTTP, or a slow client; carry it
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

// terminate serves the tunnel as TLS with a leaf of the sandbox CA for host, then carries
// each HTTP request upstream with secrets substituted.
func (p *Proxy) terminate(ctx context.Context, conn net.Conn, br *bufio.Reader, host, port string) {
	_ = conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	first, err := br.Peek(1)
	_ = conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return
	}
	if first[0] != 0x16 {
		// Plain HTTP inside the tunnel (a SOCKS client fetching http://): carried like
		// http:// through the proxy, so placeholders are refused and Host is checked.
		p.serveTunnelHTTP(&bufConn{Conn: conn, r: br}, "http", host, port)
		return
	}
	var sniErr *Denial
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" {
				if n, err := NormalizeHost(hello.ServerName); err != nil || n != host {
					sniErr = deny(ReasonSNIMismatch, host, "TLS server name %q differs from the CONNECT host %s", hello.ServerName, host)
					return nil, sniErr
				}
			}
			return p.ca.leaf(host)
		},
	}
	tc := tls.Server(&bufConn{Conn: conn, r: br}, cfg)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		d := sniErr
		if d == nil {
			d = deny(ReasonUnsupported, host, "TLS handshake with the sandbox failed (does it trust %s?): %v", FileCABundle, err)
		}
		p.logDeny("terminate", host, port, nil, d)
		conn.Close()
		return
	}
	p.log(Decision{Allowed: true, Mode: "terminate", Host: host, Port: port})
	p.serveTunnelHTTP(tc, "https", host, port)
}

// serveTunnelHTTP serves the requests of one tunnel to host:port, refusing any whose Host
// header names another host.
func (p *Proxy) serveTunnelHTTP(c net.Conn, scheme, host, port string) {
	l := newOneConnListener(c)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !sameHost(r.Host, host) {
				d := deny(ReasonHostMismatch, host, "the request's Host header %q differs from the CONNECT host %s", r.Host, host)
				p.logDeny("terminate", host, port, r, d)
				d.serve(w)
				return
			}
			p.forward(w, r, scheme, host, port, scheme == "https")
		}),
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          discardLog,
	}
	_ = srv.Serve(l)
	<-l.done
}

// bufConn reads through the reader that already holds the tunnel's first bytes.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// oneConnListener lets an http.Server serve a single connection; Accept blocks after the
// first until that connection is closed.
type oneConnListener struct {
	c    net.Conn
	done chan struct{}
	once chan net.Conn
}

func newOneConnListener(c net.Conn) *oneConnListener {
	l := &oneConnListener{done: make(chan struct{}), once: make(chan net.Conn, 1)}
	l.c = &notifyConn{Conn: c, done: l.done}
	l.once <- l.c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.once:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

type notifyConn struct {
	net.Conn
	done chan struct{}
	once sync.Once
}

func (c *notifyConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// tunnelSocketBuffer is the send and receive buffer asked for on the unix side of a
// tunnel: a unix stream socket queues at most its sender's buffer, and the default
// (about 200 KB) makes bulk downloads stall on context switches.
const tunnelSocketBuffer = 4 << 20

func bigBuffers(c net.Conn) {
	if u, ok := c.(*net.UnixConn); ok {
		_ = u.SetWriteBuffer(tunnelSocketBuffer)
		_ = u.SetReadBuffer(tunnelSocketBuffer)
	}
}
