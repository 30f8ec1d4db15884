// Package periodic runs a function at a fixed interval until its context ends: the
// loop that a heartbeat, a lease's renewal and a poll each need, written once.
package periodic

import (
	"context"
	"time"
)

// Run calls fn every interval (the first time one interval from now) until ctx ends or
// fn returns false.
func Run(ctx context.Context, interval time.Duration, fn func(context.Context) bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !fn(ctx) {
				return
			}
		}
	}
}
