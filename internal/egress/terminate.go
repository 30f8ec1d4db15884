package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

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
