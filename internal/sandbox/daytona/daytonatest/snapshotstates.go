package daytonatest

import (
	"net/http"
	"time"
)

// WithActivationCooldown makes POST /snapshots/{id}/activate answer 400 "Snapshot
// deactivation is still in progress. Please try again in a few minutes." within d of the
// snapshot's deactivation (its updatedAt), as Daytona does for 10 minutes (v0.190
// apps/api/src/sandbox/services/snapshot.service.ts, activateSnapshot). Default 0: no
// cooldown, so that tests need not wait Daytona's 10 minutes.
func WithActivationCooldown(d time.Duration) Option {
	return func(c *config) { c.activationCooldown = d }
}

// WithBuildLogsURLDelay makes GET /snapshots/{id}/build-logs-url take d before it answers,
// as Daytona holds it up to 30 s while it waits for a build runner (v0.190
// apps/api/src/sandbox/controllers/snapshot.controller.ts, getSnapshotBuildLogsUrl).
func WithBuildLogsURLDelay(d time.Duration) Option {
	return func(c *config) { c.buildLogsDelay = d }
}

// SetSnapshotState puts a snapshot in state out of band, e.g. "snapshotting" (v0.205's
// SnapshotState for a snapshot captured from a running sandbox), which the emulator
// otherwise never enters and leaves alone. It reports whether the snapshot exists.
func (s *Server) SetSnapshotState(name, state string) bool {
	return s.onSnap(name, func(sn *snap) { sn.State, sn.UpdatedAt = state, time.Now().UTC() })
}

// activationRefused reports an activation within the cooldown. Called with mu held.
func (s *Server) activationRefused(sn *snap) bool {
	return s.cfg.activationCooldown > 0 && time.Since(sn.UpdatedAt) < s.cfg.activationCooldown
}

// buildLogsURLRefused answers what Daytona answers before any runner is asked: 404 "has
// no build info" for a snapshot made from an image (snapshot.controller.ts). Otherwise it
// waits the configured runner-assignment delay, without holding the server's lock, and
// reports false. Called with mu held.
func (s *Server) buildLogsURLRefused(w http.ResponseWriter, r *http.Request, sn *snap) bool {
	if sn.Dockerfile == "" {
		writeErr(w, r, http.StatusNotFound, "Snapshot "+r.PathValue("id")+" has no build info")
		return true
	}
	if d := s.cfg.buildLogsDelay; d > 0 {
		s.mu.Unlock()
		time.Sleep(d)
		s.mu.Lock()
	}
	return false
}
