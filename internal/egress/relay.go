package egress

import (
	"errors"
	"io"
	"net"
	"sync"
)

// errTunnelLimit ends a direction of a tunnel that would carry more than its limit.
var errTunnelLimit = errors.New("egress: the tunnel passed its byte limit")

// copyBufferSize is the size of the pooled buffers that user-space copies move bytes
// through (the tunnel where splice(2) is not available, the response bodies of
// terminated and plain requests). 64 KiB is four full TLS records, and a sandbox's
// 1024 connections cannot pin more than 64 MiB of them; 256 KiB was not measurably
// better in BenchmarkTunnelPump/copy (CPU per MiB within the noise of a shared machine).
const copyBufferSize = 64 << 10

// copyBuffers holds *[]byte of copyBufferSize (pointers, so Put does not allocate).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// bufferPool lends copyBuffers to httputil.ReverseProxy.
type bufferPool struct{}

func (bufferPool) Get() []byte { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) {
	if cap(b) == copyBufferSize {
		b = b[:copyBufferSize]
		copyBuffers.Put(&b)
	}
}

// noLimit is the limit of a direction that may carry any number of bytes.
const noLimit = -1

// pump moves src's bytes to dst until src ends (io.EOF, reported as nil) or either side
// fails, and returns how many bytes dst accepted. With limit >= 0 it moves at most limit
// bytes and returns errTunnelLimit as soon as src offers one more (noLimit: no bound).
// On Linux it splices when both ends are sockets (see splice_linux.go), else it copies
// through a pooled buffer; either way deadlines set on src and dst apply as they do to
// Read and Write.
func pump(dst, src net.Conn, limit int64) (int64, error) {
	dst, src = netConnOf(dst), netConnOf(src)
	if n, handled, err := splice(dst, src, limit); handled {
		return n, err
	}
	return copyPooled(dst, src, limit)
}

// chunk is how much a pump asks for next: size, or under a limit one byte more than
// what is left (that one byte tells a stream that used its whole allowance from one that
// passes it).
func chunk(size int, n, limit int64) int {
	if limit >= 0 && int64(size) > limit-n+1 {
		return int(limit - n + 1)
	}
	return size
}

// copyPooled is pump through a pooled buffer.
func copyPooled(dst io.Writer, src io.Reader, limit int64) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	var n int64
	for {
		b := (*bp)[:chunk(copyBufferSize, n, limit)]
		r, rerr := src.Read(b)
		if r > 0 {
			over := limit >= 0 && n+int64(r) > limit
			if over {
				r = int(limit - n)
			}
			w, werr := dst.Write(b[:r])
			n += int64(w)
			switch {
			case werr != nil:
				return n, werr
			case w < r:
				return n, io.ErrShortWrite
			case over:
				return n, errTunnelLimit
			}
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// flow is what one direction of a relay carried and how it ended.
type flow struct {
	n   int64
	err error // nil: the source ended cleanly and the destination was half-closed
}

// relay carries a tunnel both ways between the sandbox's connection and the upstream
// until both directions have ended, each direction carrying at most limit bytes
// (noLimit: any number), and returns what each carried; up includes what start sent
// upstream first. A direction whose source ends (EOF) half-closes its destination and
// the other direction goes on, so either side may finish first; a direction that fails
// (an error, a deadline, its limit, a connection closed by Proxy.Close) closes both
// connections, which ends the other direction too. down is started first and up only
// after start returns nil, so a server that speaks first is heard while the proxy still
// inspects what the client sends.
func relay(client, upstream net.Conn, limit int64, start func() (int64, error)) (up, down flow) {
	return relayWith(pump, client, upstream, limit, start)
}

// relayWith is relay moving bytes with move (pump, or in tests its copy alone).
func relayWith(move func(dst, src net.Conn, limit int64) (int64, error), client, upstream net.Conn, limit int64, start func() (int64, error)) (up, down flow) {
	var cut sync.Once
	cutBoth := func() {
		cut.Do(func() {
			_ = client.Close()
			_ = upstream.Close()
		})
	}
	run := func(dst, src net.Conn, f *flow, pre int64) {
		left := int64(noLimit)
		if limit >= 0 {
			left = limit - pre
		}
		n, err := move(dst, src, left)
		f.n, f.err = pre+n, err
		if err != nil {
			cutBoth()
			return
		}
		closeWrite(dst)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(client, upstream, &down, 0)
	}()
	pre, err := start()
	if err != nil || limit >= 0 && pre > limit {
		up = flow{n: pre, err: err}
		if up.err == nil {
			up.err = errTunnelLimit
		}
		cutBoth()
	} else {
		run(upstream, client, &up, pre)
	}
	<-done
	return up, down
}

// netConnOf returns the socket under the proxy's own connection wrappers, for splice
// and for CloseWrite; closing stays with the wrapper, which gives back its slot.
func netConnOf(c net.Conn) net.Conn {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = u.NetConn()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := netConnOf(c).(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
