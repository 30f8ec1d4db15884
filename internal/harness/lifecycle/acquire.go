package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// attempt is one pass of Acquire over a session's sandbox: the record as read, the
// runtime its sandbox lives on, and what the backend says of the box. Its methods are
// the transitions a call takes (transitions.go). Each returns the lease, or retry when
// the record moved under it (another process won a compare-and-swap, or is moving the
// sandbox) and Acquire should read it again.
type attempt struct {
	m         *Manager
	sessionID string
	a         *agents.Agent
	rec       store.SessionSandbox // State is noRecord when the session has none
	rt        sandbox.Runtime
	box       box
	info      sandbox.SandboxInfo // when box is boxRunning or boxDown
	// claimed: recover holds the record (lost → changing) and has not moved it on yet.
	claimed bool
}

// attemptOnce reads the session's sandbox, picks the transition (next) and takes it.
func (m *Manager) attemptOnce(ctx context.Context, sessionID string, a *agents.Agent) (*Lease, bool, error) {
	at, err := m.read(ctx, sessionID, a)
	if err != nil {
		return nil, false, err
	}
	tr, err := next(at.rec.State, at.box)
	if err != nil {
		return nil, false, fmt.Errorf("the sandbox of session %s: %w", sessionID, err)
	}
	lease, retry, err := at.take(ctx, tr)
	if lease != nil && lease.via == "" {
		lease.via = tr
	}
	return lease, retry, err
}

// read is the attempt's input: the record, cleared of a dead harness's busy mark and
// checked against what its owners still share, its runtime, and the backend's word on
// the box where next needs it.
func (m *Manager) read(ctx context.Context, sessionID string, a *agents.Agent) (*attempt, error) {
	st := m.cfg.Store
	at := &attempt{m: m, sessionID: sessionID, a: a}
	rec, err := st.GetSessionSandbox(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		at.rec.State = noRecord
		return at, nil
	}
	if err != nil {
		return nil, err
	}
	if rec.ActiveExecs > 0 && rec.ExecOwner != m.cfg.Owner && !OwnerAlive(rec.ExecOwner) {
		// A harness died mid-call: its busy mark would keep the sandbox busy forever.
		_ = st.ClearStaleSandboxUse(ctx, sessionID, rec.ExecOwner)
	}
	if rec.State != store.SandboxStateDeleted {
		if err := m.checkSharingOf(ctx, a, rec.Environment); err != nil { // sharing.go
			return nil, err
		}
		if err := m.checkVolumesOf(ctx, a, rec); err != nil { // volumes.go
			return nil, err
		}
	}
	p, err := st.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return nil, fmt.Errorf("sandbox provider %q of session %s: %w", rec.Provider, sessionID, err)
	}
	if at.rt, err = m.cfg.Runtimes.Runtime(ctx, p); err != nil {
		return nil, err
	}
	at.rec = rec
	if !needsBox(rec.State) {
		return at, nil
	}
	info, err := at.rt.Get(ctx, rec.SandboxID)
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		at.box = boxGone
	case err != nil:
		return nil, fmt.Errorf("looking up sandbox %s: %w", rec.SandboxID, err)
	default:
		at.info, at.box = info, boxOf(info.Status)
	}
	return at, nil
}

// take does transition tr.
func (at *attempt) take(ctx context.Context, tr transition) (*Lease, bool, error) {
	switch tr {
	case tProvision:
		l, err := at.m.provision(ctx, at.sessionID, at.a, 1, nil)
		return l, false, err
	case tWait:
		return nil, true, at.wait(ctx)
	case tRecreate:
		cause := causeGone
		if at.rec.State == store.SandboxStateDeleted {
			cause = causeDeleted
		}
		l, err := at.recreate(ctx, cause)
		return l, false, err
	}
	// The box is there: its egress proxy serves in this process before it is used or
	// started.
	lease := &Lease{Record: at.rec, Runtime: at.rt, m: at.m}
	if err := at.m.ensureNetwork(ctx, lease); err != nil {
		return nil, false, err
	}
	switch tr {
	case tAttach:
		return at.attach(ctx, lease)
	case tSettle:
		return at.settle(ctx, lease)
	case tResume:
		return at.resume(ctx, lease, at.rec.State)
	case tRecover:
		return at.recover(ctx, lease)
	}
	return nil, false, fmt.Errorf("a call cannot take the %s transition", tr)
}

// attach hands the running sandbox out, marked busy.
func (at *attempt) attach(ctx context.Context, lease *Lease) (*Lease, bool, error) {
	ok, err := at.m.cfg.Store.BeginSandboxUse(ctx, at.sessionID, at.m.cfg.Owner, at.m.cfg.Now())
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, true, nil
	}
	lease.Record.State = store.SandboxStateRunning
	return lease, false, nil
}

// settle moves a record that says stopped or archived to running, since its box runs,
// and hands the sandbox out.
func (at *attempt) settle(ctx context.Context, lease *Lease) (*Lease, bool, error) {
	ok, err := at.swap(ctx, at.rec.State, store.SandboxStateRunning)
	if err != nil || !ok {
		return nil, err == nil, err
	}
	return at.attach(ctx, lease)
}

// wait is a call's part while another process moves the sandbox: nothing, unless the
// change is older than StaleChange (loseStaleChange, reap.go), when its reaper died
// midway: the record becomes lost, for the next read to recover.
func (at *attempt) wait(ctx context.Context) error {
	_, err := at.m.loseStaleChange(ctx, at.rec, at.m.cfg.Now())
	return err
}

// resume starts a stopped or archived box with its files; from is the record state the
// compare-and-swap moves from (changing while a recovery holds its claim).
func (at *attempt) resume(ctx context.Context, lease *Lease, from string) (*Lease, bool, error) {
	rec, rt := at.rec, at.rt
	was := at.info.Status
	sctx, span := startOp(ctx, "start", sandboxAttrs(rec.ProviderType, rec.Provider, rec.Environment, rec.SandboxID)...)
	err := rt.Start(sctx, rec.SandboxID)
	endOp(span, err)
	if err != nil {
		if errors.Is(err, sandbox.ErrNotFound) {
			l, err := at.recreate(ctx, causeGoneAtStart)
			return l, false, err
		}
		return nil, false, fmt.Errorf("resuming sandbox %s (%s): %w", rec.SandboxID, was, err)
	}
	info := at.info
	if fresh, err := rt.Get(ctx, rec.SandboxID); err == nil {
		info = fresh
	}
	ok, err := at.swap(ctx, from, store.SandboxStateRunning)
	if err != nil || !ok {
		return nil, err == nil, err
	}
	at.m.cfg.Record(ctx, at.sessionID, events.SandboxResumed{SandboxID: rec.SandboxID, From: was, RecordedState: rec.State,
		SnapshotID: info.SnapshotID, RecordedSnapshotID: rec.SnapshotID})
	note := fmt.Sprintf("The sandbox (%s) was %s and has been resumed with its files, from snapshot %s.", rec.SandboxID, lower(was), info.SnapshotID)
	if info.SnapshotID != rec.SnapshotID {
		note += fmt.Sprintf(" Warning: it reports snapshot %s but was recorded as created from %s.", info.SnapshotID, rec.SnapshotID)
	}
	if rec.State == store.SandboxStateLost {
		note = fmt.Sprintf("The sandbox (%s) died during an earlier call and was recovered with its files.", rec.SandboxID) +
			uncertainNote("were being written when it died", rec.Uncertain)
	}
	lease.Notes = append(lease.Notes, note)
	return at.attach(ctx, lease)
}

// recover hands out a box that failed under an earlier call once it passes a health
// check, with its files; one that fails it is deleted and recreated. The record is
// claimed (lost → changing) for the check: a reaper moves a lost record only from lost,
// so it cannot stop or archive the box while its health is checked (which would fail
// the check and replace the box, files and all). A harness that dies mid-check leaves
// it changing, taken over once stale; one that gives up (an error, a cancel) before the
// record moved on hands it back as lost, for the next call.
func (at *attempt) recover(ctx context.Context, lease *Lease) (*Lease, bool, error) {
	rec, rt := at.rec, at.rt
	ok, err := at.m.cfg.Store.SwapSandboxState(ctx, at.sessionID, []string{store.SandboxStateLost}, store.SandboxStateChanging, at.m.cfg.Now(), time.Time{})
	if err != nil || !ok {
		return nil, err == nil, err
	}
	at.claimed = true
	defer func() {
		if at.claimed {
			// Given up before the record moved on: lost again, for the next call.
			_, _ = at.m.cfg.Store.SwapSandboxState(context.WithoutCancel(ctx), at.sessionID, []string{store.SandboxStateChanging}, store.SandboxStateLost, at.m.cfg.Now(), time.Time{})
		}
	}()
	if at.box != boxRunning {
		_ = rt.Start(ctx, rec.SandboxID)
	}
	res, perr := rt.Exec(ctx, rec.SandboxID, sandbox.ExecRequest{Argv: []string{"true"}, Timeout: 30 * time.Second})
	if perr != nil || res.ExitCode != 0 {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		_ = rt.Delete(ctx, rec.SandboxID)
		cause := causeUnhealthy
		cause.status = at.info.Status
		l, err := at.recreate(ctx, cause)
		return l, false, err
	}
	if fresh, err := rt.Get(ctx, rec.SandboxID); err == nil {
		at.info, at.box = fresh, boxOf(fresh.Status)
	}
	if at.box != boxRunning {
		return at.resume(ctx, lease, store.SandboxStateChanging)
	}
	ok, err = at.swap(ctx, store.SandboxStateChanging, store.SandboxStateRunning)
	if err != nil || !ok {
		return nil, err == nil, err
	}
	at.m.cfg.Record(ctx, at.sessionID, events.SandboxRecovered{SandboxID: rec.SandboxID, Uncertain: rec.Uncertain})
	lease.Notes = append(lease.Notes, fmt.Sprintf("The sandbox (%s) failed during an earlier call and has been recovered with its files.", rec.SandboxID)+
		uncertainNote("were being written when it failed", rec.Uncertain))
	return at.attach(ctx, lease)
}

// swap moves the record from → to. Once it has been asked, a recovery's claim is no
// longer its to hand back: the record moved on, or another process moved it.
func (at *attempt) swap(ctx context.Context, from, to string) (bool, error) {
	ok, err := at.m.cfg.Store.SwapSandboxState(ctx, at.sessionID, []string{from}, to, at.m.cfg.Now(), time.Time{})
	if err == nil {
		at.claimed = false
	}
	return ok, err
}

// uncertainNote tells the model which files a dead call was writing, if any.
func uncertainNote(when string, paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	return fmt.Sprintf(" These files %s and may be incomplete: %v.", when, paths)
}

// recreateCause is why a call recreates the session's sandbox: what the model is told,
// and, for a loss, what the sandbox_lost event says.
type recreateCause struct {
	// note is a format taking the old sandbox's id, then the new one's snapshot id.
	note string
	// lost is the sandbox_lost reason; "" when nothing was lost (deleted on time).
	lost string
	// status is what the backend said of the old box, for the event.
	status string
}

var (
	causeDeleted = recreateCause{
		note: "The previous sandbox (%s) was deleted after being idle; this is a fresh workspace from snapshot %s: files from earlier turns are gone.",
	}
	// Gone underneath us (crash, out-of-band delete): the conversation goes on in a
	// fresh workspace, and the model is told.
	causeGone = recreateCause{
		note: "The previous sandbox (%s) was lost; this is a fresh workspace from snapshot %s: the workspace was reset and files from earlier turns are gone.",
		lost: "the backend no longer has it", status: "gone",
	}
	causeGoneAtStart = recreateCause{
		note: "The previous sandbox (%s) was lost; this is a fresh workspace from snapshot %s: the workspace was reset.",
		lost: "the backend no longer had it when it was started", status: "gone",
	}
	causeUnhealthy = recreateCause{
		note: "The previous sandbox (%s) could not be recovered; this is a fresh workspace from snapshot %s: the workspace was reset and files from earlier turns are gone.",
		lost: "it failed a health check after an earlier failure",
	}
)

// recreate makes the session's next generation of sandbox, the workspace reset, and
// tells the model why. provision writes the new record over the old one (and over a
// recovery's claim).
func (at *attempt) recreate(ctx context.Context, cause recreateCause) (*Lease, error) {
	old := at.rec.SandboxID
	if cause.lost != "" {
		at.m.cfg.Record(ctx, at.sessionID, events.SandboxLost{SandboxID: old, State: at.rec.State, BackendStatus: cause.status, Reason: cause.lost})
	}
	l, err := at.m.provision(ctx, at.sessionID, at.a, at.rec.Generation+1, func(snapshot string) string {
		return fmt.Sprintf(cause.note, old, snapshot)
	})
	if err == nil {
		at.claimed = false // the new record is written over the claim
		l.via = tRecreate
	}
	return l, err
}

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
	a, rollout := a.ForSession(ctx, st, sessionID) // agents/rollout.go
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
	began := time.Now()
	labels := map[string]string{LabelSession: sessionID, LabelAgent: a.Name, LabelOwner: sess.Owner, LabelEnvironment: env.Name}
	made, claimed, err := m.fromPool(ctx, rt, sessionID, a, labels) // pool.go
	if err != nil {
		return nil, err
	}
	if claimed {
		id = made.req.ID
		trace.SpanFromContext(ctx).AddEvent("warm_pool_claim") // the acquire span's, when traced
	} else {
		if made, err = m.newRequest(ctx, sessionID, a, id, labels); err != nil { // pool.go
			return nil, err
		}
		cctx, span := startOp(ctx, "create", sandboxAttrs(a.Provider.Type, a.Provider.Name, env.Name, id)...)
		err := m.create(cctx, rt, made.req)
		endOp(span, err)
		if err != nil {
			return nil, err
		}
	}
	req, network := made.req, made.network
	unenforced := unenforcedLimits(rt, req)
	now := m.cfg.Now()
	rec := store.SessionSandbox{
		SessionID: sessionID, Provider: a.Provider.Name, ProviderType: a.Provider.Type, SandboxID: id,
		Environment: env.Name, SnapshotID: env.SnapshotID, State: store.SandboxStateRunning, Generation: gen,
		CreatedAt: now, LastUsedAt: now, StateAt: now, Volumes: volumeNames(env),
	}
	if err := st.PutSessionSandbox(ctx, rec); err != nil {
		_ = rt.Delete(context.WithoutCancel(ctx), id)
		if req.Egress != nil || made.egress != "" {
			m.cfg.Network.Detach(ctx, id, true)
		}
		return nil, err
	}
	reason := "first call that needs a sandbox"
	if gen > 1 {
		reason = "the previous sandbox was lost or deleted; workspace reset"
	}
	if claimed {
		reason += "; claimed from the environment's warm pool"
	}
	m.cfg.Record(ctx, sessionID, events.SandboxProvisioned{
		SandboxID: id, Provider: a.Provider.Name, ProviderType: a.Provider.Type, Environment: env.Name,
		SnapshotID: env.SnapshotID, Generation: gen, Reason: reason, TookMS: time.Since(began).Milliseconds(),
		Limits: req.Limits, LimitsEnforced: len(unenforced) == 0, UnenforcedLimits: unenforced, Network: network,
		Version: rollout.Version, RolloutPercent: rollout.Percent,
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

// create makes req's sandbox on rt. A sandbox of that id that exists already was made by
// an earlier attempt that died before recording it: taken over, or, when it has an
// egress proxy (another proxy's CA and placeholders), replaced.
func (m *Manager) create(ctx context.Context, rt sandbox.Runtime, req sandbox.CreateRequest) error {
	err := rt.Create(ctx, req)
	if err == nil {
		return nil
	}
	if errors.Is(err, sandbox.ErrExists) && req.Egress != nil {
		if derr := rt.Delete(ctx, req.ID); derr == nil {
			err = rt.Create(ctx, req)
		}
	}
	if err != nil && !errors.Is(err, sandbox.ErrExists) {
		if req.Egress != nil {
			m.cfg.Network.Detach(ctx, req.ID, true)
		}
		return fmt.Errorf("provisioning a sandbox from environment %q (snapshot %s): %w", req.Labels[LabelEnvironment], req.SnapshotID, err)
	}
	return nil
}

// unenforcedLimits are the limits of req that rt cannot enforce on this host (a local
// runtime without a writable cgroup). They are asked for all the same: the runtime
// enforces what it can and the event says what it does not, or, with require_limits,
// Create refuses them.
func unenforcedLimits(rt sandbox.Runtime, req sandbox.CreateRequest) []sandbox.UnenforcedLimit {
	var unenforced []sandbox.UnenforcedLimit
	if r, ok := rt.(sandbox.LimitReporter); ok {
		unenforced = r.UnenforcedLimits(req.Limits)
	}
	if r, ok := rt.(sandbox.VolumeLimitReporter); ok {
		unenforced = append(unenforced, r.UnenforcedVolumes(req.Volumes)...) // a volume's size
	}
	return unenforced
}
