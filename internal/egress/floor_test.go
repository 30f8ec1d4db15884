package egress_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

// floorPath is the tunnel's hops with nothing else: a client's TCP connection on
// loopback relayed (egress.RelayBare, the tunnel's splice) into a unix socket, and that
// relayed into a TCP connection to the upstream, as netd and the harness proxy relay an
// opaque tunnel, with no CONNECT, no policy and no accounting. It returns the loopback
// address the client dials. What this path costs against direct is what the hops
// themselves cost on this machine: the floor any tunnel with these hops can reach.
func floorPath(tb testing.TB, upstream string) string {
	sock := filepath.Join(tb.TempDir(), "floor.sock")
	unixLn, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unixLn.Close(); tcpLn.Close() })
	serveRelays(tcpLn, "unix", sock)     // the sandbox side: netd's hop
	serveRelays(unixLn, "tcp", upstream) // the harness side: the proxy's hop
	return tcpLn.Addr().String()
}

// serveRelays relays each connection ln accepts to a new connection to network/addr,
// until ln is closed.
func serveRelays(ln net.Listener, network, addr string) {
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go func() {
				var d net.Dialer
				up, err := d.DialContext(context.Background(), network, addr)
				if err != nil {
					c.Close()
					return
				}
				egress.RelayBare(c, up)
				c.Close()
				up.Close()
			}()
		}
	}()
}

// oneHopPath is the least any proxy in the path adds: one loopback TCP hop relayed
// straight to the upstream. It returns the address the client dials.
func oneHopPath(tb testing.TB, upstream string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	serveRelays(ln, "tcp", upstream)
	return ln.Addr().String()
}
