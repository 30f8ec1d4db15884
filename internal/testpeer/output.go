// Package testpeer is what the test helpers that start a real peer (clamd, Jaeger, the
// MCP server everything) share: the rule for a peer that is not there, and a writer
// keeping the tail of a peer's output to show in a failure, however long it runs.
package testpeer

import "sync"

// DefaultMax is how many bytes an Output with no Max keeps.
const DefaultMax = 64 << 10

// Output keeps the last Max bytes written to it (DefaultMax when Max is 0). It is safe
// for concurrent use, as a process's stdout and stderr writing at once need.
type Output struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	limit := b.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	if len(b.buf) > limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-limit:]...)
	}
	return len(p), nil
}

// String returns the tail kept.
func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
