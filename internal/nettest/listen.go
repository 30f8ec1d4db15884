package nettest

import (
	"net"
	"sync/atomic"
	"testing"
)

// CountingServer listens on TCP address addr (port 0 for any), closing each connection
// it accepts and counting it, until the test ends: a host service that a sandbox must
// not reach, where accepted() > 0 says it did. err is the listen's (an address family the
// machine lacks, say).
func CountingServer(tb testing.TB, addr string) (port string, accepted func() int64, err error) {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	tb.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, n.Load, nil
}
