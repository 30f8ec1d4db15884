package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Repaired is a session that RepairStale repaired (or failed to).
type Repaired struct {
	SessionID string
	RunID     string // the running run whose harness was gone
	Owner     string // that harness process
	Added     int    // log entries the repair added
	Err       error
}

// RepairStale repairs every session whose running run's harness is gone (see stale): the
// run is marked interrupted, its dangling tool calls get their interrupted result, and
// commands it left running in the session's sandbox are stopped (when mgr is given).
// It is what each `serve` replica runs on every pass, so a run of a replica that died
// is repaired within the heartbeat timeout even when nobody sends its session another
// message, and the session goes on from any replica. Of two replicas that find the same
// dead run, one repairs it (the session's lease); a run still heartbeating is left
// alone. staleAfter <= 0 means DefaultHeartbeatTimeout.
func RepairStale(ctx context.Context, st *store.Store, mgr *lifecycle.Manager, self string, staleAfter time.Duration, logger *slog.Logger) ([]Repaired, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultHeartbeatTimeout
	}
	runs, err := st.RunningRuns(ctx)
	if err != nil {
		return nil, err
	}
	var reclaim reclaimer
	if mgr != nil {
		reclaim = mgr.Reclaim
	}
	var out []Repaired
	for _, run := range runs {
		if !stale(run, self, staleAfter) {
			continue
		}
		n, _, err := repair(ctx, st, run.SessionID, self, staleAfter, reclaim, logger)
		if (err == nil && n == 0) || errors.Is(err, ErrBusy) {
			continue // another replica repaired it first, or the run heartbeat again meanwhile
		}
		out = append(out, Repaired{SessionID: run.SessionID, RunID: run.ID, Owner: run.Owner, Added: n, Err: err})
	}
	return out, nil
}
