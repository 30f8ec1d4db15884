package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// ClientFDHeader on a CONNECT from netd says the sandbox-side client socket came along
// with the request (SCM_RIGHTS). The proxy then answers and relays on that socket itself,
// so bulk data crosses one hop (client socket to upstream, spliced by the kernel) instead
// of two. The socket lives in the sandbox's network namespace; the proxy only reads and
// writes it, and accepts nothing but a TCP stream socket.
const ClientFDHeader = "Trueforge-Client-Fd"

type connKey struct{}

// fdConn is the proxy's side of one unix connection; its first read collects a file
// descriptor sent with the request.
type fdConn struct {
	*net.UnixConn
	once sync.Once
	mu   sync.Mutex
	fd   int // -1: none
}

type fdListener struct{ net.Listener }

func (l fdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if uc, ok := c.(*net.UnixConn); ok {
		return &fdConn{UnixConn: uc, fd: -1}, nil
	}
	return c, nil
}

func (c *fdConn) Read(b []byte) (int, error) {
	var n int
	var err error
	first := false
	c.once.Do(func() {
		first = true
		oob := make([]byte, syscall.CmsgSpace(4*4))
		var oobn int
		n, oobn, _, _, err = c.UnixConn.ReadMsgUnix(b, oob)
		c.keepFDs(oob[:oobn])
	})
	if first {
		return n, err
	}
	return c.UnixConn.Read(b)
}

// keepFDs keeps the first descriptor received and closes any others.
func (c *fdConn) keepFDs(oob []byte) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if c.fd == -1 {
				c.fd = fd
			} else {
				syscall.Close(fd)
			}
		}
	}
}

func (c *fdConn) takeFD() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	fd := c.fd
	c.fd = -1
	return fd
}

func (c *fdConn) Close() error {
	if fd := c.takeFD(); fd != -1 {
		syscall.Close(fd)
	}
	return c.UnixConn.Close()
}

// handedOffClient returns the client socket that came with the request, or nil.
func handedOffClient(ctx context.Context) (net.Conn, error) {
	fc, ok := ctx.Value(connKey{}).(*fdConn)
	if !ok {
		return nil, errors.New("no descriptor came with the request")
	}
	fd := fc.takeFD()
	if fd == -1 {
		return nil, errors.New("no descriptor came with the request")
	}
	f := os.NewFile(uintptr(fd), "sandbox-client")
	defer f.Close()
	typ, err1 := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	dom, err2 := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_DOMAIN)
	proto, err3 := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_PROTOCOL)
	if err := errors.Join(err1, err2, err3); err != nil || typ != syscall.SOCK_STREAM || (dom != syscall.AF_INET && dom != syscall.AF_INET6) || proto != syscall.IPPROTO_TCP {
		return nil, fmt.Errorf("the descriptor sent is not a TCP socket (%v)", err)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// unwrap returns the plain connection under fdConn, so the kernel can splice it.
func unwrap(c net.Conn) net.Conn {
	if fc, ok := c.(*fdConn); ok {
		return fc.UnixConn
	}
	return c
}
