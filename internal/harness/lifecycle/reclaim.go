package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Reclaim ends what a dead harness left running in a session's sandbox: when the
// sandbox is marked busy by a process that no longer exists, its commands are orphans,
// so the sandbox is stopped (killing them; files kept) and started again, and the mark
// is cleared. dead names owners the caller knows are dead although OwnerAlive cannot
// tell (in another pid space: their runs' heartbeats lapsed). It reports whether it did
// anything.
func (m *Manager) Reclaim(ctx context.Context, sessionID string, dead ...string) (bool, error) {
	unlock := m.lock(sessionID)
	defer unlock()
	st := m.cfg.Store
	rec, err := st.GetSessionSandbox(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rec.ActiveExecs == 0 || rec.ExecOwner == m.cfg.Owner || rec.State != store.SandboxStateRunning ||
		(OwnerAlive(rec.ExecOwner) && !slices.Contains(dead, rec.ExecOwner)) {
		return false, nil
	}
	p, err := st.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return false, err
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, p)
	if err != nil {
		return false, err
	}
	if err := rt.Stop(ctx, rec.SandboxID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return false, fmt.Errorf("stopping the orphaned commands of sandbox %s: %w", rec.SandboxID, err)
	}
	if m.proxied(rec.ProviderType) {
		// The dead harness's proxy died with it: serve a new one before the sandbox
		// starts again and binds its socket directory.
		if _, err := m.cfg.Network.Ensure(ctx, sessionID, rec.SandboxID); err != nil {
			return false, err
		}
	}
	if err := rt.Start(ctx, rec.SandboxID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return false, fmt.Errorf("restarting sandbox %s: %w", rec.SandboxID, err)
	}
	claimed, err := st.ClaimStaleSandboxUse(ctx, sessionID, rec.ExecOwner)
	if err != nil {
		return false, err
	}
	if !claimed {
		// Another replica reclaimed it at the same moment, and records it.
		return false, nil
	}
	m.cfg.Record(ctx, sessionID, events.SandboxReclaimed{SandboxID: rec.SandboxID, DeadOwner: rec.ExecOwner,
		Reason: "commands left running by a harness that died were stopped; files kept"})
	return true, nil
}
