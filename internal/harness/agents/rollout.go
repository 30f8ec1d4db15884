package agents

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Bounds of an environment's rollout percent: 0 would send no session to the current
// version (revert the environment instead), and 100 sends them all.
const (
	MinRolloutPercent = 1
	MaxRolloutPercent = 100
)

// The versions a session's sandbox may come from under a rollout, as its
// sandbox_provisioned event records them.
const (
	VersionCurrent  = "current"
	VersionPrevious = "previous"
)

// Rollout is which version of its environment a session's sandbox comes from under the
// environment's rollout: the zero value when none applies (no rollout, or a pinned
// agent), and the sandbox comes from the agent's snapshot as it is.
type Rollout struct {
	Version string // VersionCurrent or VersionPrevious
	Percent int64  // the environment's rollout percent
}

// InRolloutShare reports whether session sessionID is among the percent of sessions
// that use the current version: the first 8 bytes of sha256(sessionID), mod 100, are
// below percent. The same session always chooses the same.
func InRolloutShare(sessionID string, percent int64) bool {
	sum := sha256.Sum256([]byte(sessionID))
	return int64(binary.BigEndian.Uint64(sum[:8])%100) < percent
}

// ForSession is the agent whose sandbox session sessionID gets now, and which version
// its environment's rollout chose. The environment's rollout (issue 28) sends percent
// of the sessions to the current version and the others to the latest previous kept
// version, by InRolloutShare, so each sandbox of a session (a re-provisioned one too)
// makes the same choice. Everything uses the current version (the agent, unchanged)
// when the environment has no rollout or no previous kept version whose snapshot is
// Ready, or when the agent pins a version (pinVersion), which a rollout never moves.
// The versions unread (a database error) is no reason to refuse a sandbox: the
// current version is used, as with no rollout.
func (a *Agent) ForSession(ctx context.Context, st *store.Store, sessionID string) (*Agent, Rollout) {
	r := a.Environment.Settings.Rollout
	if r == nil || a.pinned() || !a.Spec.Sandbox.Enabled {
		return a, Rollout{}
	}
	current := Rollout{Version: VersionCurrent, Percent: r.Percent}
	if InRolloutShare(sessionID, r.Percent) {
		return a, current
	}
	versions, err := st.EnvironmentVersions(ctx, a.Environment.Name)
	if err != nil {
		return a, current
	}
	for _, v := range versions {
		if v.Current || !v.Kept || v.SnapshotID == a.Environment.SnapshotID {
			continue
		}
		c := *a
		if c.useVersion(ctx, st, v) != nil { // environment_version.go
			return a, current
		}
		return &c, Rollout{Version: VersionPrevious, Percent: r.Percent}
	}
	return a, current
}
