//go:build linux

package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// tunnelPipeSize is the capacity asked for the pipe each direction of a spliced tunnel
// moves its bytes through, and so the most one splice(2) call moves. 1 MiB is the
// kernel's default /proc/sys/fs/pipe-max-size; in BenchmarkTunnelPump/splice it cost
// 430–530 µs of CPU per MiB against 520–560 for 256 KiB and 590–740 for the default
// 64 KiB (sender and reader included, a shared machine). A user past /proc/sys/fs/pipe-user-pages-soft gets
// smaller pipes, which still work: the pipe's actual capacity is read back.
const tunnelPipeSize = 1 << 20

// splice is pump for two sockets on Linux: bytes go from src into a pipe and from the
// pipe into dst with splice(2), never through user space. The counts are what splice
// returned for the pipe-to-dst side, so they are the bytes dst accepted. handled is
// false, with nothing moved, when either end is not a socket or no pipe could be made;
// the caller copies then.
func splice(dst, src net.Conn, limit int64) (n int64, handled bool, err error) {
	rs, ok1 := rawConn(src)
	rd, ok2 := rawConn(dst)
	if !ok1 || !ok2 {
		return 0, false, nil
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return 0, false, nil
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	size, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, tunnelPipeSize)
	if err != nil {
		if size, err = unix.FcntlInt(uintptr(p[1]), unix.F_GETPIPE_SZ, 0); err != nil || size <= 0 {
			size = 64 << 10
		}
	}
	for {
		in, err := spliceIn(rs, p[1], chunk(size, n, limit))
		if err != nil || in == 0 { // in == 0: src's EOF
			return n, true, err
		}
		out, over := in, limit >= 0 && n+in > limit
		if over {
			out = limit - n // the excess stays in the pipe, which is closed unread
		}
		w, err := spliceOut(rd, p[0], out)
		n += w
		if err != nil {
			return n, true, err
		}
		if over {
			return n, true, errTunnelLimit
		}
	}
}

// rawConn is a socket's raw descriptor access, for AF_INET/AF_INET6/AF_UNIX stream
// sockets (what the proxy's tunnels join); anything else is copied.
func rawConn(c net.Conn) (syscall.RawConn, bool) {
	switch c := c.(type) {
	case *net.TCPConn:
	case *net.UnixConn:
		if c.LocalAddr().Network() != "unix" { // a seqpacket socket would lose its boundaries
			return nil, false
		}
	default:
		return nil, false
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	return rc, err == nil
}

// spliceIn moves up to most bytes from socket src into the (empty) pipe, waiting for src
// to be readable as Read does, its read deadline included. It returns 0 at src's EOF.
func spliceIn(src syscall.RawConn, pipeW int, most int) (int64, error) {
	var n int64
	var serr error
	err := src.Read(func(fd uintptr) bool {
		n, serr = spliceRetry(int(fd), pipeW, most)
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err != nil {
		return 0, err // closed, or the read deadline passed
	}
	if serr != nil {
		return 0, os.NewSyscallError("splice", serr)
	}
	return n, nil
}

// spliceOut moves exactly n bytes from the pipe into socket dst, waiting for dst to be
// writable as Write does, its write deadline included.
func spliceOut(dst syscall.RawConn, pipeR int, n int64) (int64, error) {
	var moved int64
	for moved < n {
		var w int64
		var serr error
		err := dst.Write(func(fd uintptr) bool {
			w, serr = spliceRetry(pipeR, int(fd), int(n-moved))
			return !errors.Is(serr, unix.EAGAIN)
		})
		if err != nil {
			return moved, err
		}
		if serr != nil {
			return moved, os.NewSyscallError("splice", serr)
		}
		if w == 0 {
			return moved, io.ErrUnexpectedEOF // the pipe cannot run dry while it holds n bytes
		}
		moved += w
	}
	return moved, nil
}

func spliceRetry(from, to, most int) (int64, error) {
	for {
		// n is an int64 on 64-bit Linux and an int on 32-bit (386, arm).
		n, err := unix.Splice(from, nil, to, nil, most, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if !errors.Is(err, unix.EINTR) {
			return int64(n), err //nolint:unconvert // an int64 here, an int on 32-bit Linux
		}
	}
}
