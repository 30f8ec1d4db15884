//go:build linux

package local

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// TestProtocolFrames: a request carries its descriptors; replies never do; oversized
// or malformed frames and surplus descriptors are refused.
func TestProtocolFrames(t *testing.T) {
	a, b := unixPair(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := writeFrame(a, execRequest{Argv: []string{"echo", strings.Repeat("x", 100000)}}, []*os.File{pw, pw}); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var req execRequest
	files, err := readFrame(b, &req, 2)
	if err != nil || len(files) != 2 || len(req.Argv[1]) != 100000 {
		t.Fatalf("request: %v, %d files", err, len(files))
	}
	if _, err := files[0].WriteString("through\n"); err != nil {
		t.Fatal(err)
	}
	closeAll(files)
	buf := make([]byte, 8)
	if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "through\n" {
		t.Fatalf("passed pipe: %q %v", buf, err)
	}

	// More descriptors than allowed: refused, and none is leaked.
	if err := writeFrame(a, execRequest{Argv: []string{"x"}}, []*os.File{pr, pr, pr, pr}); err != nil {
		t.Fatal(err)
	}
	if files, err := readFrame(b, &req, 3); err == nil || files != nil {
		t.Fatalf("four descriptors for three: %v", err)
	}

	a2, b2 := unixPair(t)
	// Oversized.
	head := binary.BigEndian.AppendUint32(nil, maxFrame+1)
	if _, err := a2.Write(head); err != nil {
		t.Fatal(err)
	}
	var rep initReply
	if _, err := readFrame(b2, &rep, 0); err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("oversized frame: %v", err)
	}
	a3, b3 := unixPair(t)
	if _, err := a3.Write(append(binary.BigEndian.AppendUint32(nil, 5), "nope!"...)); err != nil {
		t.Fatal(err)
	}
	if _, err := readFrame(b3, &rep, 0); err == nil {
		t.Fatal("malformed frame accepted")
	}
	a3.Close()
	if _, err := readFrame(b3, &rep, 0); err != io.EOF {
		t.Fatalf("end of connection: %v, want EOF", err)
	}
}
