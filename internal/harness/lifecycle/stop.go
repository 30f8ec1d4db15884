package lifecycle

import (
	"context"
	"math"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// stopNowTimings are the reaper's timings that make a running sandbox due for its idle
// stop at once and never due for archive or delete.
var stopNowTimings = Timings{IdleStop: 0, Archive: time.Duration(math.MaxInt64), Delete: time.Duration(math.MaxInt64)}

// StopNow stops the running sandbox of a session now, whatever its agent's idle timings
// (trueforge_sandboxes_stop, e.g. after a secret leak): the reaper's idle-stop step with
// no idle time required, under the same lease and compare-and-swap, recording the same
// event. stopped is true when this call stopped it. A sandbox running a command at that
// moment is left running (busy), as the reaper leaves it; the session's next sandbox
// call starts a stopped sandbox again, with its environment's settings and secrets as
// they are then.
func (m *Manager) StopNow(ctx context.Context, sessionID string) (stopped, busy bool, err error) {
	release, held, err := HoldLease(ctx, m.cfg.Store, SandboxLeaseName(sessionID), m.cfg.Owner, m.cfg.LeaseTTL, m.cfg.Logger)
	if err != nil || !held {
		return false, !held && err == nil, err // not held: another replica is moving it right now
	}
	defer release()
	for _, tr := range m.reapHeld(ctx, sessionID, stopNowTimings, map[string]error{}) {
		if tr.Err != nil {
			return false, false, tr.Err
		}
		if tr.To == store.SandboxStateStopped {
			return true, false, nil
		}
	}
	rec, err := m.cfg.Store.GetSessionSandbox(ctx, sessionID)
	if err != nil {
		return false, false, err
	}
	return false, rec.State == store.SandboxStateRunning && rec.ActiveExecs > 0, nil
}
