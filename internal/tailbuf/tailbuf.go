// Package tailbuf provides a writer that keeps only the tail of what is written to it:
// the output of a test peer (clamd, Jaeger) kept to show in a failure, however long the
// peer runs.
package tailbuf

import "sync"

// DefaultMax is how many bytes a Buffer with no Max keeps.
const DefaultMax = 64 << 10

// Buffer keeps the last Max bytes written to it (DefaultMax when Max is 0). It is safe
// for concurrent use, as a process's stdout and stderr writing at once need.
type Buffer struct {
	Max int

	mu  sync.Mutex
	buf []byte
}

func (b *Buffer) Write(p []byte) (int, error) {
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
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
