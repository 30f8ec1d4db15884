package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// provision creates the session's sandbox (generation gen) from the agent's environment.
// resetNote, when set, is what the model is told of the workspace it replaces, given the
// new snapshot's id.
func (m *Manager) provision(ctx context.Context, sessionID string, a *agents.Agent, gen int64, resetNote func(snapshot string) string) (*Lease, error) {
	st := m.cfg.Store
	// The sandbox is labelled with the session's owner, who talks to the agent, not the
	// agent's publisher: that is whose files it holds.
	sess, err := st.GetSession(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, err)
	}
	if sess.Environment != "" {
		// The session's one-off environment, chosen when it was created: resolved now,
		// so that a sandbox made later (after a loss or an idle delete) is made from the
		// environment as it is then, and one no longer Ready is refused with the reason.
		if a, err = a.WithEnvironment(ctx, st, sess.Environment); err != nil {
			return nil, fmt.Errorf("the session's environment: %w", err)
		}
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, a.Provider)
	if err != nil {
		return nil, err
	}
	env := a.Environment
	if err := checkSharing(a, env); err != nil { // sharing.go
		return nil, err
	}
	if err := m.checkPlace(ctx, rt, env.Name, env.SnapshotID); err != nil {
		return nil, err
	}
	id := sandboxID(sessionID, gen)
	if gen > 1 && m.cfg.Network != nil {
		// The sandbox this one replaces is gone: so is its proxy.
		m.cfg.Network.Detach(ctx, sandboxID(sessionID, gen-1), true)
	}
	req := sandbox.CreateRequest{
		ID:           id,
		SnapshotID:   env.SnapshotID,
		Env:          env.Env,
		BlockNetwork: env.BlockAll,
		Limits:       sandbox.Limits{CPU: env.CPU, MemoryMB: env.MemoryGB * 1024, DiskMB: env.DiskGB * 1024},
		Labels: map[string]string{
			LabelSession: sessionID, LabelAgent: a.Name, LabelOwner: sess.Owner, LabelEnvironment: env.Name,
		},
	}
	if err := m.volumes(ctx, env, a, &req); err != nil { // volumes.go
		return nil, err
	}
	// Limits the backend cannot enforce on this host (a local runtime without a
	// writable cgroup) are asked for all the same: the runtime enforces what it can and
	// the event says what it does not, or, with require_limits, Create refuses them.
	var unenforced []sandbox.UnenforcedLimit
	if r, ok := rt.(sandbox.LimitReporter); ok {
		unenforced = r.UnenforcedLimits(req.Limits)
	}
	if r, ok := rt.(sandbox.VolumeLimitReporter); ok {
		unenforced = append(unenforced, r.UnenforcedVolumes(req.Volumes)...) // a volume's size
	}
	began := time.Now()
	network, err := m.network(ctx, sessionID, a, &req)
	if err != nil {
		return nil, err
	}
	liveSettings(&req, a, network) // labels, CIDRs, lifecycle timings (create_request.go)
	if err := rt.Create(ctx, req); err != nil {
		if errors.Is(err, sandbox.ErrExists) && req.Egress != nil {
			// A previous attempt created it and died before recording it, with another
			// proxy's CA and placeholders: replace it.
			if derr := rt.Delete(ctx, id); derr == nil {
				err = rt.Create(ctx, req)
			}
		}
		if err != nil && !errors.Is(err, sandbox.ErrExists) {
			if req.Egress != nil {
				m.cfg.Network.Detach(ctx, id, true)
			}
			return nil, fmt.Errorf("provisioning a sandbox from environment %q (snapshot %s): %w", env.Name, env.SnapshotID, err)
		}
		// A previous attempt created it and died before recording it: take it over.
	}
	now := m.cfg.Now()
	rec := store.SessionSandbox{
		SessionID: sessionID, Provider: a.Provider.Name, ProviderType: a.Provider.Type, SandboxID: id,
		Environment: env.Name, SnapshotID: env.SnapshotID, State: store.SandboxStateRunning, Generation: gen,
		CreatedAt: now, LastUsedAt: now, StateAt: now, Volumes: volumeNames(env),
	}
	if err := st.PutSessionSandbox(ctx, rec); err != nil {
		_ = rt.Delete(context.WithoutCancel(ctx), id)
		if req.Egress != nil {
			m.cfg.Network.Detach(ctx, id, true)
		}
		return nil, err
	}
	reason := "first call that needs a sandbox"
	if gen > 1 {
		reason = "the previous sandbox was lost or deleted; workspace reset"
	}
	m.cfg.Record(ctx, sessionID, events.SandboxProvisioned{
		SandboxID: id, Provider: a.Provider.Name, ProviderType: a.Provider.Type, Environment: env.Name,
		SnapshotID: env.SnapshotID, Generation: gen, Reason: reason, TookMS: time.Since(began).Milliseconds(),
		Limits: req.Limits, LimitsEnforced: len(unenforced) == 0, UnenforcedLimits: unenforced, Network: network,
	})
	m.cfg.Logger.Info("sandbox provisioned", "session", sessionID, "sandbox", id, "snapshot", env.SnapshotID)
	if len(unenforced) > 0 {
		m.cfg.Logger.Warn("sandbox runs without some of its limits", "session", sessionID, "sandbox", id, "unenforced", unenforced)
	}
	lease := &Lease{Record: rec, Runtime: rt, Provisioned: true, m: m}
	if resetNote != nil {
		lease.Notes = append(lease.Notes, resetNote(env.SnapshotID))
	} else {
		lease.Notes = append(lease.Notes, fmt.Sprintf("A sandbox (%s) was provisioned for this session from environment %q, snapshot %s.", id, env.Name, env.SnapshotID))
	}
	ok, err := st.BeginSandboxUse(ctx, sessionID, m.cfg.Owner, now)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the new sandbox of session %s changed state before its first call", sessionID)
	}
	return lease, nil
}
