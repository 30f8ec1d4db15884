//go:build linux

package egress

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkTunnelPump moves 64 MiB from a loopback TCP peer through the proxy's end to a
// unix socket peer, the download direction of a tunnel, four ways: "splice" (pump on
// Linux), "copy" (pump's user-space copy through a pooled buffer), "io.Copy" (the
// standard library on the same raw sockets; Go 1.22+ splices TCP to unix too) and
// "wrapped" (io.Copy through the proxy's connection wrapper, what the tunnel did before,
// a 32 KiB copy). It reports the process's CPU time per MiB beside the throughput: the
// figure the machine's other load disturbs least.
func BenchmarkTunnelPump(b *testing.B) {
	const size = 64 << 20
	type wrapped struct{ net.Conn }
	ways := []struct {
		name string
		move func(dst, src net.Conn) (int64, error)
	}{
		{"splice", func(dst, src net.Conn) (int64, error) { return pump(dst, src, noLimit) }},
		{"copy", func(dst, src net.Conn) (int64, error) { return copyPooled(dst, src, noLimit) }},
		{"io.Copy", func(dst, src net.Conn) (int64, error) { return io.Copy(dst, src) }},
		{"wrapped", func(dst, src net.Conn) (int64, error) { return io.Copy(wrapped{dst}, wrapped{src}) }},
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			chunk := make([]byte, 1<<20)
			b.SetBytes(size)
			var cpu time.Duration
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				s := newSocketPair(b)
				go func() {
					for sent := 0; sent < size; sent += len(chunk) {
						if _, err := s.upstreamEnd.Write(chunk); err != nil {
							return
						}
					}
					s.upstreamEnd.Close()
				}()
				got := make(chan int64, 1)
				go func() { n, _ := io.Copy(io.Discard, s.sandboxEnd); got <- n }()
				c0 := ProcessCPU()
				b.StartTimer()
				n, err := w.move(s.sandbox, s.up)
				closeWrite(s.sandbox)
				if m := <-got; err != nil || n != size || m != size {
					b.Fatalf("moved %d, received %d of %d: %v", n, m, size, err)
				}
				b.StopTimer()
				cpu += ProcessCPU() - c0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*size>>20), "cpu-us/MiB")
		})
	}
}
