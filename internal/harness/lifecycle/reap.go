package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Timings are an agent's lifecycle timings.
type Timings struct {
	IdleStop, Archive, Delete time.Duration
}

// TimingsOf returns the timings of an agent spec, the spec's defaults (agentspec) for
// zero values: what a session whose agent is gone from the store gets.
func TimingsOf(s agents.SandboxSpec) Timings {
	pick := func(v, d int64) time.Duration {
		if v <= 0 {
			v = d
		}
		return time.Duration(v) * time.Minute
	}
	return Timings{
		IdleStop: pick(s.IdleStopMinutes, agentspec.DefaultIdleStopMinutes),
		Archive:  pick(s.ArchiveAfterMinutes, agentspec.DefaultArchiveAfterMinutes),
		Delete:   pick(s.DeleteAfterMinutes, agentspec.DefaultDeleteAfterMinutes),
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
//
// A lost record (a call saw the sandbox fail; the box may well still run) is reaped by
// what the backend says the box is: running, stopped or archived, each on the normal
// timings; gone or broken, deleted on the delete timing. A changing record whose
// transition is older than StaleChange (its reaper or harness died midway) is taken over
// as a call does (tWait): moved to lost, then reaped as such.
//
// With replicas (replicas.go), a sandbox with a step due is reaped under its lease
// (SandboxLeaseName), from its record read again once the lease is held; one whose
// lease another replica holds is left to that replica. A sandbox of a backend whose
// snapshots are files on a machine, made from a snapshot on another machine, runs
// there, and is left to the harness on that machine (place.go).
func (m *Manager) Reap(ctx context.Context) ([]Transition, error) {
	recs, err := m.cfg.Store.ListSessionSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	timings := map[string]Timings{}
	places := map[string]error{}
	var out []Transition
	for _, rec := range recs {
		if !reapable(rec.State) {
			continue
		}
		t, err := m.timingsFor(ctx, rec.SessionID, timings)
		if err != nil {
			out = append(out, Transition{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err})
			continue
		}
		if !m.due(rec, t) {
			continue // nothing to do: no lease taken, no backend asked
		}
		release, held, err := HoldLease(ctx, m.cfg.Store, SandboxLeaseName(rec.SessionID), m.cfg.Owner, m.cfg.LeaseTTL, m.cfg.Logger)
		if err != nil {
			out = append(out, Transition{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err})
			continue
		}
		if !held {
			continue // another replica is reaping it
		}
		out = append(out, m.reapHeld(ctx, rec.SessionID, t, places)...)
		release()
	}
	return out, nil
}

func reapable(state string) bool {
	switch state {
	case store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived,
		store.SandboxStateLost, store.SandboxStateChanging:
		return true
	}
	return false
}

// due reports whether a step may be due for rec: its first timing has passed, or it has
// been changing for longer than StaleChange. A busy sandbox is due when its busy mark
// may be stale (reapHeld checks the owner).
func (m *Manager) due(rec store.SessionSandbox, t Timings) bool {
	now := m.cfg.Now()
	idle := now.Sub(rec.LastUsedAt)
	switch rec.State {
	case store.SandboxStateChanging:
		return now.Sub(rec.StateAt) > StaleChange
	case store.SandboxStateRunning:
		return idle >= t.IdleStop
	case store.SandboxStateStopped:
		return idle >= min(t.Archive, t.Delete)
	case store.SandboxStateArchived:
		return idle >= t.Delete
	case store.SandboxStateLost:
		return idle >= min(t.IdleStop, t.Archive, t.Delete)
	}
	return false
}

// reapHeld reaps the sandbox of a session whose lease this process holds, from its
// record as it is now: another replica may have moved it since the list was read.
func (m *Manager) reapHeld(ctx context.Context, sessionID string, t Timings, places map[string]error) []Transition {
	rec, err := m.cfg.Store.GetSessionSandbox(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return []Transition{{SessionID: sessionID, Err: err}}
	}
	if !reapable(rec.State) || !m.due(rec, t) {
		return nil
	}
	if rec.ActiveExecs > 0 {
		if OwnerAlive(rec.ExecOwner) {
			return nil
		}
		// Its harness died mid-command: the mark is stale.
		_ = m.cfg.Store.ClearStaleSandboxUse(ctx, rec.SessionID, rec.ExecOwner)
	}
	return m.reapOne(ctx, rec, t, places)
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

// statusBroken stands, in reapOne, for a lost sandbox the backend has but reports
// broken (sandbox.ErrLost) or in a status it does not name: only deleting it is safe.
const statusBroken = "broken"

func (m *Manager) reapOne(ctx context.Context, rec store.SessionSandbox, t Timings, places map[string]error) []Transition {
	unlock := m.lock(rec.SessionID)
	defer unlock()
	now := m.cfg.Now()
	p, err := m.cfg.Store.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return []Transition{{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err}}
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, p)
	if err != nil {
		return []Transition{{SessionID: rec.SessionID, SandboxID: rec.SandboxID, Err: err}}
	}
	if _, ok := places[rec.SnapshotID]; !ok {
		places[rec.SnapshotID] = m.checkPlace(ctx, rt, rec.Environment, rec.SnapshotID)
	}
	if places[rec.SnapshotID] != nil {
		// Made from a snapshot whose files are on another machine, so it runs there and
		// is that machine's harness's to reap: this runtime would find no such sandbox
		// and take it for gone.
		return nil
	}
	var out []Transition
	if rec.State == store.SandboxStateChanging {
		cur, tr, ok := m.takeOverStaleChange(ctx, rec, now)
		if tr != nil {
			out = append(out, *tr)
		}
		if !ok {
			return out
		}
		rec = cur
	}
	idle := now.Sub(rec.LastUsedAt)
	if rec.State == store.SandboxStateLost && idle < min(t.IdleStop, t.Archive, t.Delete) {
		// No timing is due whatever the box is: do not ask the backend.
		return out
	}
	// state is the record's state, what each compare-and-swap moves from; status is what
	// the box is, in the record's terms. They differ only for a lost record.
	// seen is what the backend said of a lost sandbox, for the events.
	state, status, seen := rec.State, rec.State, ""
	if state == store.SandboxStateLost {
		var err error
		if status, seen, err = lostStatus(ctx, rt, rec.SandboxID); err != nil {
			// Unknown (an API error): touch nothing, ask again next time.
			return append(out, Transition{SessionID: rec.SessionID, SandboxID: rec.SandboxID, From: state, Err: err})
		}
	}
	moved := false
	step := func(to string, after time.Duration, op func() error) {
		if idle < after {
			return
		}
		// The CAS re-checks idleness and busyness in the store, against a call that
		// began since the list was read.
		ok, err := m.cfg.Store.SwapSandboxState(ctx, rec.SessionID, []string{state}, store.SandboxStateChanging, now, now.Add(-after).Add(time.Millisecond))
		if err != nil || !ok {
			return
		}
		opErr := m.traceIdle(ctx, to, rec, op) // trace.go
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
			return
		}
		m.cfg.Record(ctx, rec.SessionID, events.SandboxIdle{State: to, SandboxID: rec.SandboxID, From: state,
			IdleMinutes: int64(idle / time.Minute), SnapshotID: rec.SnapshotID, BackendStatus: seen})
		state, status, seen, moved = to, to, "", true
	}
	ignoreMissing := func(err error) error {
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil
		}
		return err
	}
	if status == store.SandboxStateRunning {
		step(store.SandboxStateStopped, t.IdleStop, func() error { return ignoreMissing(rt.Stop(ctx, rec.SandboxID)) })
	}
	if status == store.SandboxStateStopped {
		step(store.SandboxStateArchived, t.Archive, func() error {
			if err := rt.Archive(ctx, rec.SandboxID); err != nil {
				return fmt.Errorf("archiving sandbox %s: %w", rec.SandboxID, err)
			}
			return nil
		})
	}
	switch status {
	case store.SandboxStateStopped, store.SandboxStateArchived, store.SandboxStateDeleted, statusBroken:
		// Deleting what is already gone is done: the record follows.
		step(store.SandboxStateDeleted, t.Delete, func() error { return ignoreMissing(rt.Delete(ctx, rec.SandboxID)) })
	}
	if moved && m.cfg.Network != nil {
		// A proxy lives while its sandbox runs in this process; a deleted sandbox's state
		// is dropped for good.
		m.cfg.Network.Detach(ctx, rec.SandboxID, state == store.SandboxStateDeleted)
	}
	return out
}

// lostStatus is what a lost record's sandbox is, in the record's terms, and what the
// backend said of it (for the events): gone (deleted: only the record is left to delete),
// broken, or the state it reports. An error is an unknown answer (an API error).
func lostStatus(ctx context.Context, rt sandbox.Runtime, id string) (status, seen string, err error) {
	info, err := rt.Get(ctx, id)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return store.SandboxStateDeleted, "gone", nil
	case errors.Is(err, sandbox.ErrLost):
		return statusBroken, err.Error(), nil
	case err != nil:
		return "", "", fmt.Errorf("looking up lost sandbox %s: %w", id, err)
	case info.Status == sandbox.SandboxRunning:
		return store.SandboxStateRunning, info.Status, nil
	case info.Status == sandbox.SandboxStopped:
		return store.SandboxStateStopped, info.Status, nil
	case info.Status == sandbox.SandboxArchived:
		return store.SandboxStateArchived, info.Status, nil
	}
	return statusBroken, info.Status, nil
}

// takeOverStaleChange applies a call's rule (tWait) to a changing record read again
// now: once its transition is older than StaleChange, the reaper or harness that began
// it died midway, so the record becomes lost (and is then reaped as one). It returns the
// record as taken over and whether it was; a change that is recent, or that landed since
// the list was read, is left alone.
func (m *Manager) takeOverStaleChange(ctx context.Context, rec store.SessionSandbox, now time.Time) (store.SessionSandbox, *Transition, bool) {
	cur, err := m.cfg.Store.GetSessionSandbox(ctx, rec.SessionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return cur, nil, false
		}
		return cur, &Transition{SessionID: rec.SessionID, SandboxID: rec.SandboxID, From: rec.State, Err: err}, false
	}
	if cur.State != store.SandboxStateChanging {
		return cur, nil, false
	}
	ok, err := m.loseStaleChange(ctx, cur, now)
	if err != nil {
		return cur, &Transition{SessionID: cur.SessionID, SandboxID: cur.SandboxID, From: cur.State, To: store.SandboxStateLost, Err: err}, false
	}
	if !ok {
		return cur, nil, false
	}
	tr := &Transition{SessionID: cur.SessionID, SandboxID: cur.SandboxID, From: cur.State, To: store.SandboxStateLost}
	cur.State, cur.StateAt = store.SandboxStateLost, now
	return cur, tr, true
}

// loseStaleChange moves a changing record whose transition began more than StaleChange
// ago to lost: what the box is now is unknown, so it is treated like a loss (recovered
// after a health check, else recreated). It reports whether it moved the record.
func (m *Manager) loseStaleChange(ctx context.Context, rec store.SessionSandbox, now time.Time) (bool, error) {
	if now.Sub(rec.StateAt) <= StaleChange {
		return false, nil
	}
	ok, err := m.cfg.Store.SwapSandboxState(ctx, rec.SessionID, []string{store.SandboxStateChanging}, store.SandboxStateLost, now, time.Time{})
	if err != nil || !ok {
		return false, err
	}
	m.cfg.Record(ctx, rec.SessionID, events.SandboxLost{SandboxID: rec.SandboxID, State: store.SandboxStateChanging,
		Reason: fmt.Sprintf("a lifecycle transition begun %s ago never finished", now.Sub(rec.StateAt).Round(time.Second))})
	m.cfg.Logger.Warn("stale sandbox transition taken over", "session", rec.SessionID, "sandbox", rec.SandboxID, "since", rec.StateAt)
	return true, nil
}
