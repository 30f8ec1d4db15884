package codemode

import (
	"sync"
	"time"
)

// MaxApprovalWait is how long, in all, a script's calls may wait for people's
// approvals: the backstop the runtime's own timeout adds to run_timeout_seconds, since
// the run clock below stops while a call waits.
const MaxApprovalWait = 24 * time.Hour

// runClock is a script's wall-clock limit (code_mode_limits.run_timeout_seconds) that
// does not run while one of its calls waits at the gate (a person's approval): a
// script that waits ten minutes for a reviewer is not stopped for it. When the time
// is spent, expire stops the script.
type runClock struct {
	mu      sync.Mutex
	left    time.Duration
	since   time.Time // when it last started running
	waiting int       // calls at the gate: the clock stands while any is
	timer   *time.Timer
}

func newRunClock(limit time.Duration, expire func()) *runClock {
	return &runClock{left: limit, since: time.Now(), timer: time.AfterFunc(limit, expire)}
}

// pause stops the clock for a call that enters the gate.
func (c *runClock) pause() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting == 0 && c.timer.Stop() {
		c.left -= time.Since(c.since)
	}
	c.waiting++
}

// resume starts it again when the last waiting call leaves the gate.
func (c *runClock) resume() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting--
	if c.waiting == 0 {
		c.since = time.Now()
		c.timer.Reset(max(c.left, 0))
	}
}

// halt ends the clock with its script.
func (c *runClock) halt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer.Stop()
	c.waiting = -1 << 30 // a late resume never starts it again
}
