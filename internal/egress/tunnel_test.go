package egress_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

// rawUpstream is a TCP server on loopback that hands its one accepted connection to the
// test, for tunnels whose bytes the test drives both ways.
func rawUpstream(t *testing.T) (port string, accepted <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, ch
}

// openTunnel CONNECTs to api.allowed.test on a raw upstream and sends a plain HTTP
// request head as the first flight (which the proxy checks before relaying); it returns
// the sandbox's end and the upstream's, the head already read from it.
func openTunnel(t *testing.T, f *fixture) (sandbox net.Conn, sbr *bufio.Reader, up net.Conn) {
	t.Helper()
	port, accepted := rawUpstream(t)
	resp, c, br := f.connect(t, "api.allowed.test:"+port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	head := "GET / HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	select {
	case up = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not dial the upstream")
	}
	got := make([]byte, len(head))
	if _, err := io.ReadFull(up, got); err != nil || string(got) != head {
		t.Fatalf("upstream got %q, %v", got, err)
	}
	return c, br, up
}

// Through the proxy, a tunnel carries megabytes intact both ways, and each side's
// half-close reaches the other while the other direction goes on: the upstream may
// finish its answer first and still receive what the sandbox sends after.
func TestTunnelHalfCloseAndBulk(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	sandbox, sbr, up := openTunnel(t, f)
	down, late := make([]byte, 8<<20), make([]byte, 4<<20)
	_, _ = rand.Read(down)
	_, _ = rand.Read(late)
	go func() {
		_, _ = up.Write(down)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(sbr)
	if err != nil || !bytes.Equal(got, down) {
		t.Fatalf("sandbox received %d bytes (%v), want the upstream's %d then EOF", len(got), err, len(down))
	}
	go func() {
		_, _ = sandbox.Write(late)
		_ = sandbox.(*net.UnixConn).CloseWrite()
	}()
	got, err = io.ReadAll(up)
	if err != nil || !bytes.Equal(got, late) {
		t.Fatalf("upstream received %d bytes (%v) after its own EOF, want the sandbox's %d then EOF", len(got), err, len(late))
	}
}

// Closing the proxy (a session cancelled, a sandbox replaced) ends a tunnel on both
// sides, the upstream's too, though neither side is sending.
func TestCloseEndsTunnelUpstreamSide(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	_, sbr, up := openTunnel(t, f)
	f.proxy.Close()
	_ = up.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := up.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("upstream read after Close: %v, want EOF", err)
	}
	if _, err := sbr.ReadByte(); err == nil {
		t.Fatal("sandbox side still open after Close")
	}
}
