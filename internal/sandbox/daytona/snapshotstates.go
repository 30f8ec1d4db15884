package daytona

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// SnapshotSnapshotting is the state (v0.205) of a snapshot being captured from a running
// sandbox: in progress, like pending, pulling and building, never a reason to rebuild.
const SnapshotSnapshotting = "snapshotting"

// Daytona refuses to activate a snapshot within 10 minutes of its deactivation (v0.190
// apps/api/src/sandbox/services/snapshot.service.ts, activateSnapshot: 400 "Snapshot
// deactivation is still in progress. Please try again in a few minutes."). The builder
// waits that out, retrying every activationRetryPolls poll intervals (10 s with the default
// 1 s polling), for at most activationWait; the caller's context bounds it too.
const (
	activationCooldown   = 10 * time.Minute
	activationWait       = activationCooldown + time.Minute
	activationRetryPolls = 10
)

// activate re-activates an inactive snapshot, waiting out Daytona's cooldown after a
// deactivation.
func (b *Builder) activate(ctx context.Context, s *Snapshot) error {
	wctx, cancel := context.WithTimeout(ctx, activationWait)
	defer cancel()
	for {
		_, err := b.C.ActivateSnapshot(wctx, s.ID)
		if !deactivationInProgress(err) {
			return ignoreAlreadyActive(err)
		}
		if serr := sleep(wctx, activationRetryPolls*b.C.poll); serr != nil {
			return fmt.Errorf("snapshot %s was deactivated less than %s ago and Daytona refuses to activate it until then (waited up to %s): %w",
				s.Name, activationCooldown, activationWait, err)
		}
	}
}

func deactivationInProgress(err error) bool {
	e, ok := asAPI(err)
	return ok && e.Status == 400 && strings.Contains(strings.ToLower(e.Message), "deactivation is still in progress")
}

// buildLogTimeout bounds GET /snapshots/{id}/build-logs-url and the log read: Daytona holds
// the call up to 30 s while it waits for a build runner (v0.190
// apps/api/src/sandbox/controllers/snapshot.controller.ts, getSnapshotBuildLogsUrl).
const buildLogTimeout = 35 * time.Second

// failureLogs remembers the log tail of each failed build (by API, snapshot id and
// update time), so that it is fetched once per failure, not on every read of the state.
var failureLogs = &logMemo{m: map[string]string{}}

// failureLogsMax bounds failureLogs; past it the memo starts over.
const failureLogsMax = 256

type logMemo struct {
	mu sync.Mutex
	m  map[string]string
}

// failureLog returns the tail of a failed snapshot's build log, or "" when there is none.
// A snapshot made from an image has no build log (the API answers 404 "has no build
// info"), so it is not asked for; a failed one is asked once (an error counts), however
// often its state is read.
func (b *Builder) failureLog(ctx context.Context, s *Snapshot) string {
	if s.BuildInfo == nil {
		return ""
	}
	key := b.C.baseURL + "\x00" + s.ID + "\x00" + s.UpdatedAt.String()
	failureLogs.mu.Lock()
	v, ok := failureLogs.m[key]
	failureLogs.mu.Unlock()
	if ok {
		return v
	}
	lctx, cancel := context.WithTimeout(ctx, buildLogTimeout)
	defer cancel()
	if logs, err := b.C.SnapshotBuildLogs(lctx, s.ID); err == nil {
		v = tail(logs, logTailBytes)
	}
	failureLogs.mu.Lock()
	defer failureLogs.mu.Unlock()
	if len(failureLogs.m) >= failureLogsMax {
		clear(failureLogs.m)
	}
	failureLogs.m[key] = v
	return v
}
