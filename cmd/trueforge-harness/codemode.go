package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
)

// waitCodeModes waits, before the harness exits, for MCP calls that Code Mode scripts
// left running (a cancelled script's call goes on until it ends or times out), so that
// each one's outcome lands in the session's log instead of being dropped. It waits at
// most the longest call timeout an agent may set; Ctrl-C stops the wait (the calls
// then stay recorded as unknown).
func (h *harness) waitCodeModes() {
	h.mu.Lock()
	modes := slices.Clone(h.codeModes)
	h.mu.Unlock()
	if len(modes) == 0 {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, agentspec.MaxCodeCallTimeoutSeconds*time.Second)
	defer cancel()
	for _, m := range modes {
		quick, qcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := m.Wait(quick)
		qcancel()
		if err == nil {
			continue
		}
		fmt.Fprintln(os.Stderr, "trueforge-harness: waiting for MCP calls that a stopped Code Mode script left running, so their outcome is recorded (Ctrl-C to stop waiting: they stay recorded as unknown)")
		if err := m.Wait(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "trueforge-harness: stopped waiting; those calls stay recorded as unknown")
			return
		}
	}
}

// idleMode reports whether a Code Mode tool has no MCP call in flight (its scripts'
// calls all ended), so nothing is left to wait for.
func idleMode(m *codemode.Mode) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	return m.Wait(ctx) == nil
}
