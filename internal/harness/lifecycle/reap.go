package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Timings used when a session's agent is gone from the store: the provider's defaults.
const (
	DefaultIdleStopMinutes     = 15
	DefaultArchiveAfterMinutes = 1440
	DefaultDeleteAfterMinutes  = 10080
)

// Timings are an agent's lifecycle timings.
type Timings struct {
	IdleStop, Archive, Delete time.Duration
}

// TimingsOf returns the timings of an agent spec, defaults for zero values.
func TimingsOf(s agents.SandboxSpec) Timings {
	pick := func(v, d int64) time.Duration {
		if v <= 0 {
			v = d
		}
		return time.Duration(v) * time.Minute
	}
	return Timings{
		IdleStop: pick(s.IdleStopMinutes, DefaultIdleStopMinutes),
		Archive:  pick(s.ArchiveAfterMinutes, DefaultArchiveAfterMinutes),
		Delete:   pick(s.DeleteAfterMinutes, DefaultDeleteAfterMinutes),
	}
}

// Transition is one lifecycle change a Reap made.
type Transition struct {
	SessionID, SandboxID, From, To string
	Err                            error
}

// Reap applies idle stop, archive and delete to every session sandbox whose agent's
// timings have passed, and returns what it did. A sandbox with a command running (busy,
// owner alive) is never touched.
func (m *Manager) Reap(ctx context.Context) ([]Transition, error) {
	recs, err := m.cfg.Store.ListSessionSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	timings := map[string]Timings{}
	var out []Transition
	for _, rec := range recs {
		switch rec.State {
		case store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived:
		default:
			continue
		}
		t, err := m.timingsFor(ctx, rec.SessionID, timings)
		if err != nil {
			out = append(out, Transition{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err})
			continue
		}
		if rec.ActiveExecs > 0 {
			if OwnerAlive(rec.ExecOwner) {
				continue
			}
			// Its harness died mid-command: the mark is stale.
			_ = m.cfg.Store.ClearStaleSandboxUse(ctx, rec.SessionID, rec.ExecOwner)
		}
		out = append(out, m.reapOne(ctx, rec, t)...)
	}
	return out, nil
}

func (m *Manager) timingsFor(ctx context.Context, sessionID string, cache map[string]Timings) (Timings, error) {
	ss, err := m.cfg.Store.GetSession(ctx, sessionID)
	if err != nil {
		return Timings{}, err
	}
	if t, ok := cache[ss.Agent]; ok {
		return t, nil
	}
	t := TimingsOf(agents.SandboxSpec{})
	if a, err := agents.Load(ctx, m.cfg.Store, ss.Agent); err == nil {
		t = TimingsOf(a.Spec.Sandbox)
	}
	cache[ss.Agent] = t
	return t, nil
}

func (m *Manager) reapOne(ctx context.Context, rec store.SessionSandbox, t Timings) []Transition {
	unlock := m.lock(rec.SessionID)
	defer unlock()
	now := m.cfg.Now()
	idle := now.Sub(rec.LastUsedAt)
	p, err := m.cfg.Store.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return []Transition{{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err}}
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, p)
	if err != nil {
		return []Transition{{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err}}
	}
	var out []Transition
	state := rec.State
	step := func(from []string, to string, after time.Duration, op func() error) bool {
		if idle < after {
			return false
		}
		// The CAS re-checks idleness and busyness in the store, against a call that
		// began since the list was read.
		ok, err := m.cfg.Store.SwapSandboxState(ctx, rec.SessionID, from, store.SandboxStateChanging, now, now.Add(-after).Add(time.Millisecond))
		if err != nil || !ok {
			return false
		}
		opErr := op()
		final := to
		if opErr != nil {
			final = state // put it back as it was
		}
		if _, err := m.cfg.Store.SwapSandboxState(context.WithoutCancel(ctx), rec.SessionID, []string{store.SandboxStateChanging}, final, now, time.Time{}); err != nil && opErr == nil {
			opErr = err
		}
		tr := Transition{SessionID: rec.SessionID, SandboxID: rec.SandboxID, From: state, To: final, Err: opErr}
		out = append(out, tr)
		if opErr != nil {
			if !errors.Is(opErr, errors.ErrUnsupported) {
				m.cfg.Logger.Warn("sandbox lifecycle step failed", "session", rec.SessionID, "sandbox", rec.SandboxID, "to", to, "err", opErr)
			}
			return false
		}
		m.cfg.Record(ctx, rec.SessionID, "sandbox_"+to, map[string]any{
			"sandbox_id": rec.SandboxID, "from": state, "idle_minutes": int64(idle / time.Minute), "snapshot_id": rec.SnapshotID,
		})
		state = to
		return true
	}
	ignoreMissing := func(err error) error {
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil
		}
		return err
	}
	if state == store.SandboxStateRunning {
		step([]string{store.SandboxStateRunning}, store.SandboxStateStopped, t.IdleStop, func() error { return ignoreMissing(rt.Stop(ctx, rec.SandboxID)) })
	}
	if state == store.SandboxStateStopped {
		step([]string{store.SandboxStateStopped}, store.SandboxStateArchived, t.Archive, func() error {
			if err := rt.Archive(ctx, rec.SandboxID); err != nil {
				return fmt.Errorf("archiving sandbox %s: %w", rec.SandboxID, err)
			}
			return nil
		})
	}
	if state == store.SandboxStateStopped || state == store.SandboxStateArchived {
		step([]string{state}, store.SandboxStateDeleted, t.Delete, func() error { return rt.Delete(ctx, rec.SandboxID) })
	}
	if state != rec.State && m.cfg.Network != nil {
		// A proxy lives while its sandbox runs in this process; a deleted sandbox's state
		// is dropped for good.
		m.cfg.Network.Detach(ctx, rec.SandboxID, state == store.SandboxStateDeleted)
	}
	return out
}
