// Package netd is the sandbox side of egress: a small helper that runs inside the
// sandbox's network namespace (which has only lo), listens on loopback for HTTP proxy
// (CONNECT and absolute http://), SOCKS5 and DNS, and carries every connection to the
// harness through the one unix socket bound into the sandbox. It dials the socket by path
// for every connection, so a harness that replaces it (listens anew at the same path, in
// the directory the runtime bound) is reached from the next connection on.
//
// Each connection to the harness starts with a small header naming the target:
// "CONNECT host:port HTTP/1.1" (the host as a name, never an address netd resolved;
// synthetic addresses are mapped back to their names), or for http:// the request itself
// in absolute form. The harness answers as an HTTP proxy: 200 and a tunnel, or a 403 with
// X-Trueforge-Deny and a JSON reason, which netd relays to HTTP clients as is.
//
// netd is not the enforcement boundary: it holds no policy and no secret, and if it dies
// the sandbox simply has no network. It never sends a DNS query anywhere: names are
// answered locally with synthetic addresses from 198.18.0.0/15 (see names.go), so a
// lookup cannot carry data out of the sandbox.
//
// It runs inside the sandbox, so it imports nothing host-side: besides the standard
// library only the contract it shares with the proxy (internal/egress/wire: its listen
// ports, host-name normalisation) and the runtime's constants (internal/sandbox), never
// internal/egress, which holds the CA, TLS termination, policy and secrets
// (TestNoHostSideImports).
package netd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
)

// Config says where netd listens and where the harness is. An empty listen address
// turns that service off.
type Config struct {
	Socket    string // the harness's unix socket
	HTTPAddr  string // default in cmd/trueforge-netd: 127.0.0.1:3128
	SOCKSAddr string // default 127.0.0.1:1080
	DNSAddr   string // default 127.0.0.1:53 (UDP and TCP)
	// Log receives one line per refused or failed connection; nil discards.
	Log *log.Logger
}

// Server is a running netd.
type Server struct {
	cfg   Config
	names *names

	mu      sync.Mutex
	closers []io.Closer
	http    net.Listener
	socks   net.Listener
	dnsUDP  net.PacketConn
}

// New returns a server that has not started listening.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = log.New(io.Discard, "", 0)
	}
	return &Server{cfg: cfg, names: newNames()}
}

// Listen opens every configured listener. A DNS listener that cannot be opened (port 53
// needs a namespace prepared by PrepareNamespace, or privilege) is reported through
// dnsErr and the rest still runs: without DNS, names do not resolve in the sandbox, which
// leaks nothing, and proxy-aware tools never resolve anyway.
func (s *Server) Listen() (dnsErr error, err error) {
	if s.cfg.Socket == "" {
		return nil, errors.New("netd: no harness socket given")
	}
	listen := func(addr string) (net.Listener, error) {
		if addr == "" {
			return nil, nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("netd: listen %s: %w", addr, err)
		}
		s.closers = append(s.closers, ln)
		return ln, nil
	}
	if s.http, err = listen(s.cfg.HTTPAddr); err != nil {
		s.Close()
		return nil, err
	}
	if s.socks, err = listen(s.cfg.SOCKSAddr); err != nil {
		s.Close()
		return nil, err
	}
	if s.cfg.DNSAddr != "" {
		pc, err := net.ListenPacket("udp", s.cfg.DNSAddr)
		if err != nil {
			return fmt.Errorf("netd: dns %s: %w", s.cfg.DNSAddr, err), nil
		}
		s.closers = append(s.closers, pc)
		s.dnsUDP = pc
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			return fmt.Errorf("netd: dns tcp %s: %w", pc.LocalAddr(), err), nil
		}
		s.closers = append(s.closers, ln)
		go s.serveDNSTCP(ln)
		go s.serveDNSUDP(pc)
	}
	return nil, nil
}

// Serve accepts proxy connections until ctx ends or Close.
func (s *Server) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, l := range []struct {
		ln     net.Listener
		handle func(net.Conn)
	}{{s.http, s.serveHTTP}, {s.socks, s.serveSOCKS}} {
		if l.ln == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.ln.Accept()
				if err != nil {
					return
				}
				go l.handle(c)
			}
		}()
	}
	go func() { <-ctx.Done(); s.Close() }()
	wg.Wait()
	return ctx.Err()
}

// Close stops every listener; open connections finish on their own.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		c.Close()
	}
	s.closers = nil
}

// HTTPAddr, SOCKSAddr and DNSAddr report where the server listens (for ":0").
func (s *Server) HTTPAddr() string  { return addrOf(s.http) }
func (s *Server) SOCKSAddr() string { return addrOf(s.socks) }
func (s *Server) DNSAddr() string {
	if s.dnsUDP == nil {
		return ""
	}
	return s.dnsUDP.LocalAddr().String()
}

func addrOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

const socketBuffer = 4 << 20

// open connects to the harness and asks for a tunnel to host:port.
func (s *Server) open(host, port string) (net.Conn, error) {
	c, err := net.Dial("unix", s.cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	// A unix stream socket queues at most its sender's buffer; the default (about
	// 200 KB) makes bulk transfers stall on context switches.
	_ = c.(*net.UnixConn).SetWriteBuffer(socketBuffer)
	_ = c.(*net.UnixConn).SetReadBuffer(socketBuffer)
	hp := net.JoinHostPort(host, port)
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp); err != nil {
		c.Close()
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	return c, nil
}

// openResponse opens a tunnel and reads the harness's answer; r holds any bytes of the
// tunnel read past it.
func (s *Server) openResponse(host, port string) (net.Conn, *bufio.Reader, *http.Response, error) {
	c, err := s.open(host, port)
	if err != nil {
		return nil, nil, nil, err
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, nil, fmt.Errorf("egress socket: %w", err)
	}
	return c, r, resp, nil
}

// pipe copies both ways, half-closing so either side can finish first.
func pipe(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(a, b)
		closeWrite(a)
		close(done)
	}()
	_, _ = io.Copy(b, a)
	closeWrite(b)
	<-done
	a.Close()
	b.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// flush writes what r buffered to w.
func flush(w io.Writer, r *bufio.Reader) error {
	if n := r.Buffered(); n > 0 {
		b, _ := r.Peek(n)
		if _, err := w.Write(b); err != nil {
			return err
		}
		_, _ = r.Discard(n)
	}
	return nil
}
