package egress

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// pumpWays are the two ways pump moves bytes: splice (on Linux, between sockets) and the
// pooled copy every other case uses; each test runs both.
var pumpWays = []struct {
	name string
	pump func(dst, src net.Conn, limit int64) (int64, error)
}{
	{"splice", pump},
	{"copy", func(dst, src net.Conn, limit int64) (int64, error) { return copyPooled(dst, src, limit) }},
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// sendAndHalfClose writes b to c in odd-sized pieces, then half-closes it.
func sendAndHalfClose(c net.Conn, b []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		for len(b) > 0 {
			n := min(len(b), 300_001)
			if _, err := c.Write(b[:n]); err != nil {
				done <- err
				return
			}
			b = b[n:]
		}
		done <- c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	return done
}

func readAll(c net.Conn) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- b
	}()
	return got
}

// The counts are the bytes that reached the other side, in each direction, and the
// bytes arrive intact and in order.
func TestRelayCountsEachDirection(t *testing.T) {
	for _, w := range pumpWays {
		t.Run(w.name, func(t *testing.T) {
			s := newSocketPair(t)
			upData, downData := randomBytes(t, 5<<20+17), randomBytes(t, 3<<20+5)
			atUpstream, atSandbox := readAll(s.upstreamEnd), readAll(s.sandboxEnd)
			sentUp, sentDown := sendAndHalfClose(s.sandboxEnd, upData), sendAndHalfClose(s.upstreamEnd, downData)
			pre := []byte("first flight ")
			up, down := relayWith(w.pump, s.sandbox, s.up, noLimit, func() (int64, error) {
				n, err := s.up.Write(pre)
				return int64(n), err
			})
			if err := errors.Join(<-sentUp, <-sentDown, up.err, down.err); err != nil {
				t.Fatal(err)
			}
			if got := <-atUpstream; !bytes.Equal(got, append(pre, upData...)) {
				t.Errorf("upstream received %d bytes, want the %d sent", len(got), len(pre)+len(upData))
			}
			if got := <-atSandbox; !bytes.Equal(got, downData) {
				t.Errorf("sandbox received %d bytes, want the %d sent", len(got), len(downData))
			}
			if up.n != int64(len(pre)+len(upData)) || down.n != int64(len(downData)) {
				t.Errorf("counted up %d, down %d; want %d, %d", up.n, down.n, len(pre)+len(upData), len(downData))
			}
		})
	}
}

// A limit lets exactly its bytes through and cuts the stream at the next one, in the
// middle of a transfer; a stream of exactly the limit ends normally.
func TestPumpLimitMidStream(t *testing.T) {
	const limit = 1<<20 + 123
	for _, w := range pumpWays {
		for _, tc := range []struct {
			name string
			send int
			want error
		}{{"over", 3 << 20, errTunnelLimit}, {"exact", limit, nil}, {"under", limit - 1, nil}} {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				s := newSocketPair(t)
				data := randomBytes(t, tc.send)
				got := readAll(s.sandboxEnd)
				sendAndHalfClose(s.upstreamEnd, data) // the test checks what arrives, not the sender
				n, err := w.pump(s.sandbox, s.up, limit)
				if !errors.Is(err, tc.want) {
					t.Fatalf("pump: %v, want %v", err, tc.want)
				}
				s.sandbox.Close()
				b := <-got
				want := min(tc.send, limit)
				if n != int64(want) || !bytes.Equal(b, data[:want]) {
					t.Fatalf("moved %d, received %d bytes; want %d of the sent bytes", n, len(b), want)
				}
			})
		}
	}
}

// A limit applies to the relay as a whole: the first flight counts, and passing the
// limit cuts both directions.
func TestRelayLimitCutsBoth(t *testing.T) {
	for _, w := range pumpWays {
		t.Run(w.name, func(t *testing.T) {
			s := newSocketPair(t)
			sendAndHalfClose(s.sandboxEnd, randomBytes(t, 2<<20)) // the test checks what arrives, not the sender
			atUpstream := readAll(s.upstreamEnd)
			done := make(chan [2]flow, 1)
			go func() {
				up, down := relayWith(w.pump, s.sandbox, s.up, 1<<20, func() (int64, error) { return 10, nil })
				done <- [2]flow{up, down}
			}()
			select {
			case f := <-done:
				if !errors.Is(f[0].err, errTunnelLimit) || f[0].n != 1<<20 {
					t.Fatalf("up: %d bytes, %v; want %d and the limit error", f[0].n, f[0].err, 1<<20)
				}
				if f[1].err == nil {
					t.Fatal("down ended cleanly; the cut should have ended it with an error")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("relay still running after its limit passed")
			}
			if n := len(<-atUpstream); n != 1<<20-10 {
				t.Fatalf("upstream received %d bytes, want %d", n, 1<<20-10)
			}
		})
	}
}

// Half-close goes through in both directions: after one side's EOF the other direction
// still carries bytes, until its own EOF.
func TestRelayHalfClose(t *testing.T) {
	for _, w := range pumpWays {
		t.Run(w.name, func(t *testing.T) {
			s := newSocketPair(t)
			done := make(chan [2]flow, 1)
			go func() {
				up, down := relayWith(w.pump, s.sandbox, s.up, noLimit, func() (int64, error) { return 0, nil })
				done <- [2]flow{up, down}
			}()
			// The upstream finishes first: the sandbox sees its bytes and EOF...
			if err := <-sendAndHalfClose(s.upstreamEnd, []byte("response")); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(s.sandboxEnd); err != nil || string(b) != "response" {
				t.Fatalf("sandbox read %q, %v", b, err)
			}
			// ...and can still send, which the upstream receives, then its EOF.
			if err := <-sendAndHalfClose(s.sandboxEnd, []byte("late request")); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(s.upstreamEnd); err != nil || string(b) != "late request" {
				t.Fatalf("upstream read %q, %v", b, err)
			}
			select {
			case f := <-done:
				if f[0].err != nil || f[1].err != nil || f[0].n != 12 || f[1].n != 8 {
					t.Fatalf("flows up %+v down %+v", f[0], f[1])
				}
			case <-time.After(10 * time.Second):
				t.Fatal("relay did not end after both EOFs")
			}
		})
	}
}

// Closing the sandbox's connection (what Proxy.Close does to a cancelled session's
// tunnels) ends the relay and closes the upstream too, though it sends nothing.
func TestRelayEndsWhenClosed(t *testing.T) {
	for _, w := range pumpWays {
		t.Run(w.name, func(t *testing.T) {
			s := newSocketPair(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				relayWith(w.pump, s.sandbox, s.up, noLimit, func() (int64, error) { return 0, nil })
			}()
			time.Sleep(50 * time.Millisecond) // both directions waiting for bytes
			s.sandbox.Close()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("relay still running after its sandbox connection was closed")
			}
			_ = s.upstreamEnd.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := s.upstreamEnd.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("upstream read after the cut: %v, want EOF", err)
			}
		})
	}
}

// A deadline on a socket applies to the splice as it does to Read.
func TestPumpDeadline(t *testing.T) {
	for _, w := range pumpWays {
		t.Run(w.name, func(t *testing.T) {
			s := newSocketPair(t)
			_ = s.up.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, err := w.pump(s.sandbox, s.up, noLimit)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("pump with a passed read deadline: %v, want a timeout", err)
			}
		})
	}
}

// socketPair is a tunnel's two hops as the proxy sees them: up is the proxy's end of a
// loopback TCP connection whose peer (upstreamEnd) plays the server, sandbox is the
// proxy's end of a unix stream connection whose peer (sandboxEnd) plays netd.
type socketPair struct {
	up, upstreamEnd     net.Conn
	sandbox, sandboxEnd net.Conn
}

func newSocketPair(tb testing.TB) *socketPair {
	tb.Helper()
	var s socketPair
	s.upstreamEnd, s.up = connected(tb, "tcp", "127.0.0.1:0")
	s.sandboxEnd, s.sandbox = connected(tb, "unix", filepath.Join(tb.TempDir(), "s"))
	bigBuffers(s.sandbox)
	bigBuffers(s.sandboxEnd)
	return &s
}

// connected returns both ends of one connection: the accepted one first.
func connected(tb testing.TB, network, addr string) (accepted, dialed net.Conn) {
	tb.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	dialed, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	accepted = <-got
	if accepted == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { accepted.Close(); dialed.Close() })
	return accepted, dialed
}
