package harnesstest

import (
	"sync"
	"time"
)

// Clock is a clock that tests move instead of sleeping: its Now is what a lifecycle
// manager or an API server is given as theirs.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at the current time.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
