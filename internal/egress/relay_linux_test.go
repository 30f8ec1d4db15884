package egress

import (
	"net"
	"path/filepath"
	"testing"
)

// On Linux the tunnel's two sockets (loopback TCP and unix, as the proxy holds them
// behind its connection wrapper) are spliced, so the "splice" cases test splice.
func TestSpliceHandlesTunnelSockets(t *testing.T) {
	s := newSocketPair(t)
	wrapped := &limitedConn{Conn: s.sandbox, release: func() {}}
	sendAndHalfClose(s.upstreamEnd, []byte("x")) // the test checks what arrives, not the sender
	readAll(s.sandboxEnd)                        // drained, so the splice can finish
	n, handled, err := splice(netConnOf(wrapped), s.up, noLimit)
	if !handled || err != nil || n != 1 {
		t.Fatalf("splice TCP -> unix: handled %v, %d bytes, %v", handled, n, err)
	}
	type other struct{ net.Conn }
	if _, handled, _ := splice(other{s.sandbox}, s.up, noLimit); handled {
		t.Fatal("splice took a connection that is not a socket")
	}
}

// Only stream sockets are spliced: a seqpacket socket's messages are copied whole.
func TestSpliceOnlyStreams(t *testing.T) {
	src, _ := connected(t, "unixpacket", filepath.Join(t.TempDir(), "p"))
	dst, _ := connected(t, "tcp", "127.0.0.1:0")
	if _, handled, err := splice(dst, src, noLimit); handled {
		t.Fatalf("splice took a seqpacket socket (%v)", err)
	}
}
