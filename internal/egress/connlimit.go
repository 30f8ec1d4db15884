package egress

import (
	"net"
	"sync"
	"time"
)

// DefaultMaxConns bounds the connections one sandbox may hold open to its proxy.
const DefaultMaxConns = 1024

// connLimit is the proxy's listener: it holds at most cap(slots) of the sandbox's
// connections open at once, tunnels, plain requests in flight and idle keep-alives
// alike. Each accepted connection costs the harness a file descriptor, and a plain
// request in flight one more upstream, so without this bound a sandbox sending many
// slow plain-http requests could exhaust the harness's descriptors (MaxTunnels counts
// only CONNECTs). A connection past the bound gets a 429 too_many_connections and is
// closed at once; it is not queued, so the sandbox learns why.
type connLimit struct {
	net.Listener
	slots chan struct{}
}

func newConnLimit(ln net.Listener, n int) *connLimit {
	return &connLimit{Listener: ln, slots: make(chan struct{}, n)}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			// Best effort and brief: the refusal fits the socket's buffer, and a sandbox
			// that does not read cannot hold the accept loop for long.
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_ = deny(ReasonTooManyConns, "", "this sandbox has %d connections open to the proxy, the most it may; close some (or reuse keep-alive connections) and retry", cap(l.slots)).write(c)
			c.Close()
		}
	}
}

// limitedConn gives its slot back once, when closed (also after a hijack: the tunnel
// closes the connection it took over).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// NetConn is the accepted socket, for the tunnel's splice and half-close (netConnOf).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
