package scan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseReply(t *testing.T) {
	cases := []struct {
		reply     string
		clean     bool
		signature string
		err       error
	}{
		{"stream: OK", true, "", nil},
		{"stream: Trueforge.Test.EICAR.UNOFFICIAL FOUND", false, "Trueforge.Test.EICAR.UNOFFICIAL", nil},
		{"stream: Win.Test.EICAR_HDB-1 FOUND", false, "Win.Test.EICAR_HDB-1", nil},
		{"INSTREAM size limit exceeded. ERROR", false, "", ErrTooLarge},
		{"stream: Can't allocate memory ERROR", false, "", ErrFailed},
		{"stream:  FOUND", false, "", ErrFailed},
		{"stream: OK FOUND?", false, "", ErrFailed},
		{"UNKNOWN COMMAND", false, "", ErrFailed},
		{"", false, "", ErrFailed},
		{"1: stream: OK", false, "", ErrFailed}, // an IDSESSION answer: not ours
	}
	for _, tc := range cases {
		clean, sig, err := ParseReply(tc.reply)
		if clean != tc.clean || sig != tc.signature || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseReply(%q) = %v, %q, %v; want %v, %q, %v", tc.reply, clean, sig, err, tc.clean, tc.signature, tc.err)
		}
	}
}

func TestParse(t *testing.T) {
	good := map[string]Clamd{
		"unix:/run/clamav/clamd.ctl": {Network: "unix", Address: "/run/clamav/clamd.ctl"},
		"tcp:127.0.0.1:3310":         {Network: "tcp", Address: "127.0.0.1:3310"},
		"tcp:[::1]:3310":             {Network: "tcp", Address: "[::1]:3310"},
		"tcp:clamav.internal:3310":   {Network: "tcp", Address: "clamav.internal:3310"},
	}
	for s, want := range good {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("Parse(%q).String() = %q", s, got.String())
		}
	}
	// Each error names the fix.
	bad := map[string]string{
		"":                      "unix:/run/clamav/clamd.ctl",
		"/run/clamav/clamd.ctl": "unix:/run/clamav/clamd.ctl",
		"unix:clamd.ctl":        "must be absolute",
		"unix:":                 "must be absolute",
		"tcp:127.0.0.1":         "tcp:HOST:PORT",
		"tcp::3310":             "tcp:127.0.0.1:3310",
		"tcp:127.0.0.1:clamd":   "not a port number",
		"tcp:127.0.0.1:0":       "not a port number",
		"tcp:127.0.0.1:65536":   "not a port number",
		"tcp:::1:3310":          "in brackets",
		"http://clamd:3310":     "unknown kind",
		"clamd":                 "tcp:127.0.0.1:3310",
	}
	for s, fix := range bad {
		got, err := Parse(s)
		if err == nil {
			t.Errorf("Parse(%q) = %+v; want an error", s, got)
			continue
		}
		if !strings.Contains(err.Error(), fix) {
			t.Errorf("Parse(%q): %v; want it to name %q", s, err, fix)
		}
	}
}

// fakeClamd serves one connection with serve on a loopback port, and returns a client
// of it.
func fakeClamd(t *testing.T, serve func(conn net.Conn)) *Clamd {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			serve(conn)
			conn.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return &Clamd{Network: "tcp", Address: l.Addr().String(), Timeout: 5 * time.Second}
}

// readCommand reads a z-prefixed command up to its NUL.
func readCommand(r io.Reader) (string, error) {
	var cmd []byte
	b := make([]byte, 1)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			return string(cmd), err
		}
		if b[0] == 0 {
			return string(cmd), nil
		}
		cmd = append(cmd, b[0])
	}
}

// TestInstreamFraming checks what Scan sends against clamd(8): zINSTREAM, chunks of a
// 4-byte big-endian length and the data, none longer than chunkSize, and a zero-length
// chunk at the end; and that it reads the NUL-terminated answer.
func TestInstreamFraming(t *testing.T) {
	file := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320000 bytes: 5 chunks
	got := make(chan []byte, 1)
	chunks := make(chan int, 1)
	c := fakeClamd(t, func(conn net.Conn) {
		cmd, err := readCommand(conn)
		if err != nil {
			t.Errorf("reading the command: %v", err)
			return
		}
		switch cmd {
		case "zVERSION":
			_, _ = conn.Write([]byte("ClamAV 1.4.6/27530/Tue Jan 13 09:25:45 2026\x00"))
			return
		case "zINSTREAM":
		default:
			t.Errorf("command %q", cmd)
			return
		}
		var data []byte
		n := 0
		for {
			var size [4]byte
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				t.Errorf("reading a chunk's length: %v", err)
				return
			}
			l := binary.BigEndian.Uint32(size[:])
			if l == 0 {
				break
			}
			if l > chunkSize {
				t.Errorf("a chunk of %d bytes, over %d", l, chunkSize)
			}
			chunk := make([]byte, l)
			if _, err := io.ReadFull(conn, chunk); err != nil {
				t.Errorf("reading a chunk: %v", err)
				return
			}
			data = append(data, chunk...)
			n++
		}
		got <- data
		chunks <- n
		_, _ = conn.Write([]byte("stream: Some.Thing FOUND\x00"))
	})
	v, err := c.Scan(t.Context(), bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if v.Clean || v.Signature != "Some.Thing" || v.Scanner != "ClamAV 1.4.6/27530/Tue Jan 13 09:25:45 2026" {
		t.Errorf("verdict %+v", v)
	}
	if data := <-got; !bytes.Equal(data, file) {
		t.Errorf("clamd received %d bytes, not the %d of the file", len(data), len(file))
	}
	if n := <-chunks; n != 5 {
		t.Errorf("%d chunks, want 5", n)
	}
}

// TestSilentScanner: a scanner that takes the connection and never answers is
// unavailable once Timeout runs out.
func TestSilentScanner(t *testing.T) {
	c := fakeClamd(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	c.Timeout = 200 * time.Millisecond
	begin := time.Now()
	err := c.Ping(t.Context())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Ping of a silent scanner: %v; want ErrUnavailable", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("Ping with Timeout %v took %v", c.Timeout, d)
	}
}

// TestOddAnswers: answers that are no verdict are errors.
func TestOddAnswers(t *testing.T) {
	for _, answer := range []string{"PONG", "ClamAV\x00", "stream: OK", "stream: OK\n", strings.Repeat("x", 10000)} {
		c := fakeClamd(t, func(conn net.Conn) {
			_, _ = readCommand(conn)
			_, _ = conn.Write([]byte(answer))
		})
		if _, err := c.Version(t.Context()); err == nil {
			t.Errorf("Version answered %q: no error", answer)
		}
	}
	// A PING answered with something else than PONG.
	c := fakeClamd(t, func(conn net.Conn) {
		_, _ = readCommand(conn)
		_, _ = conn.Write([]byte("UNKNOWN COMMAND\x00"))
	})
	if err := c.Ping(t.Context()); !errors.Is(err, ErrFailed) {
		t.Errorf("Ping answered UNKNOWN COMMAND: %v; want ErrFailed", err)
	}
}

// TestNotANetwork: a Clamd not made by Parse, with a network it cannot dial.
func TestNotANetwork(t *testing.T) {
	c := &Clamd{Network: "udp", Address: "127.0.0.1:3310"}
	if err := c.Ping(t.Context()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Ping over udp: %v", err)
	}
}
