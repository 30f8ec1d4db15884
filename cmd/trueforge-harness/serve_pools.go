package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/periodic"
)

// keepPools runs the warm pools' keeper (lifecycle.KeepPools) every interval until ctx
// ends, on a loop of its own: a pool refilled only at the reaper's --interval (30 s)
// would stay empty between two busy minutes.
func (h *harness) keepPools(ctx context.Context, out io.Writer, interval time.Duration) {
	h.poolPass(ctx, out)
	periodic.Run(ctx, interval, func(ctx context.Context) bool {
		h.poolPass(ctx, out)
		return true
	})
}

// poolPass keeps the warm pools once and prints what it created and deleted.
func (h *harness) poolPass(ctx context.Context, out io.Writer) {
	stamp := time.Now().UTC().Format(time.RFC3339)
	trs, err := h.manager.KeepPools(ctx)
	if err != nil && ctx.Err() == nil {
		h.logger.Error("keeping the warm pools failed", "err", err)
	}
	for _, t := range trs {
		switch {
		case t.Err != nil:
			fmt.Fprintf(out, "%s warm pool: sandbox %s %s -> %s failed: %v\n", stamp, t.SandboxID, t.From, t.To, t.Err)
		case t.To == "claimed":
			// A session took it before the keeper could drop it: nothing happened here.
		case t.From == "":
			fmt.Fprintf(out, "%s warm pool: sandbox %s created\n", stamp, t.SandboxID)
		default:
			fmt.Fprintf(out, "%s warm pool: sandbox %s %s -> %s\n", stamp, t.SandboxID, t.From, t.To)
		}
	}
}

// lockedWriter serializes the writes of serve's loops to one output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
