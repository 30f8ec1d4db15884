package egress

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
)

// connect handles a CONNECT: policy on the target name, resolution with the address
// check, then either an opaque tunnel whose TLS server name must match, or TLS
// termination when the sandbox has secrets.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	refuse := func(mode, host, port string, d *Denial) {
		p.logDeny(mode, host, port, r, d)
		d.serve(w)
	}
	if p.full() {
		refuse("tunnel", r.Host, "", deny(ReasonTooManyTunnels, r.Host, "this sandbox has %d connections open, the most it may; close some and retry", p.cfg.MaxTunnels))
		return
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
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		if upstream != nil {
			upstream.Close()
		}
		return
	}
	if !p.track(conn) {
		conn.Close()
		if upstream != nil {
			upstream.Close()
		}
		return
	}
	defer p.untrack(conn)
	// What the server already read past the CONNECT request belongs to the tunnel.
	pre, _ := brw.Reader.Peek(brw.Reader.Buffered())
	preR := bytes.NewReader(bytes.Clone(pre))
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
// The bytes move with splice(2) on Linux (relay, pump).
func (p *Proxy) tunnel(conn net.Conn, br *bufio.Reader, pre *bytes.Reader, upstream net.Conn, host, port string) {
	defer conn.Close()
	defer upstream.Close()
	bigBuffers(conn)
	relay(conn, upstream, noLimit, func() (int64, error) {
		if d := p.inspectFirstFlight(conn, br, host); d != nil {
			p.logDeny("tunnel", host, port, nil, d)
			if d.Reason == ReasonSNIMismatch || d.Reason == ReasonNoSNI {
				_, _ = conn.Write(alertUnrecognizedName)
			} else {
				_ = d.write(conn)
			}
			return 0, d
		}
		p.log(Decision{Allowed: true, Mode: "tunnel", Host: host, Port: port, Addr: upstream.RemoteAddr().String()})
		return handOver(upstream, br, pre)
	})
}

// handOver sends upstream what was read from the client before the relay took over:
// what br buffered, then what is left of pre (br has drained pre into its buffer unless
// the peek found nothing to read). From then on the relay reads the raw connection.
func handOver(upstream net.Conn, br *bufio.Reader, pre *bytes.Reader) (int64, error) {
	var n int64
	if b := br.Buffered(); b > 0 {
		buf, _ := br.Peek(b)
		w, err := upstream.Write(buf)
		n += int64(w)
		if err != nil {
			return n, err
		}
		_, _ = br.Discard(b)
	}
	w, err := io.Copy(upstream, pre)
	return n + w, err
}

// tunnelSocketBuffer is the send and receive buffer asked for on the unix side of a
// tunnel: a unix stream socket queues at most its sender's buffer, and the default
// (about 200 KB) makes bulk downloads stall on context switches.
const tunnelSocketBuffer = 4 << 20

func bigBuffers(c net.Conn) {
	if u, ok := netConnOf(c).(*net.UnixConn); ok {
		_ = u.SetWriteBuffer(tunnelSocketBuffer)
		_ = u.SetReadBuffer(tunnelSocketBuffer)
	}
}
