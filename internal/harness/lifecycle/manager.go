// Package lifecycle is the sandbox lifecycle manager: one sandbox per session, created
// lazily by the first call that needs it, reused across turns, stopped when idle,
// archived, deleted, resumed with its files by the next call, and recreated when it died.
//
// The store's session_sandboxes row is the lifecycle's clock and the pointer to
// reattach; the backend (a sandbox.Runtime) is the truth about the box. Every
// transition is a compare-and-swap on that row, so a harness running a session and a
// reaper (`trueforge-harness serve`) in another process never fight: a call marks the
// sandbox busy (active_execs, with its process as exec_owner) before it touches it, and
// the reaper only moves sandboxes that are idle and not busy. A busy mark left by a dead
// process is cleared, since its owner is checked for life.
//
// Timings come from the agent: idle_stop_minutes after the last call ends (a running
// command is activity: a busy sandbox is never stopped), archive_after_minutes and
// delete_after_minutes of idleness. When a backend cannot archive
// (errors.ErrUnsupported) the sandbox stays stopped and is deleted on time. The clock
// is injected (Config.Now) so tests step through minutes without sleeping.
//
// Network (network.go) is read from the environment when a sandbox is created and kept
// until it is replaced. A backend that enforces it itself (sandbox.Capabilities
// NetworkByBackend: Daytona) gets the policy and the environment's secrets by their
// names in its secret store. Any other sandbox that is not block_all goes through a
// per-sandbox egress proxy (Config.Network, package sandboxnet) that lives while the
// sandbox runs in this process: closed on stop, archive and delete, recreated on
// resume, and, when this process did not create it (a harness restart), recreated at the
// same socket path, which the Running sandbox reaches as it is (its socket directory is
// bound, not the socket). Without a Network such a sandbox gets no network at all, never
// the host's.
//
// Limits: a sandbox is created with its environment's cpu, memory and disk. A runtime
// that cannot enforce some of them on this host (sandbox.LimitReporter: the local
// runtime without a writable cgroup) runs the sandbox with the others, and the
// sandbox_provisioned event (events.SandboxProvisioned) lists the ones it runs without,
// and why; with the sandbox provider's require_limits the runtime refuses it instead,
// and the call fails with that error. Daytona gives a sandbox exactly its snapshot's
// resources.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// RuntimeSource opens sandbox providers' backends (backend.Runtimes).
type RuntimeSource interface {
	// Runtime returns the runtime of a sandbox provider.
	Runtime(ctx context.Context, p store.SandboxProvider) (sandbox.Runtime, error)
	// Info describes the backend of a provider type (what it enforces itself).
	Info(providerType string) (sandbox.Info, error)
	// Secrets returns a provider's backend secret store (nil when it keeps none).
	Secrets(ctx context.Context, p store.SandboxProvider) (sandbox.SecretStore, error)
}

// Config configures a Manager.
type Config struct {
	Store    *store.Store
	Runtimes RuntimeSource
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Owner identifies this process in busy marks; "" means this process (ProcessOwner).
	Owner string
	// Record receives lifecycle events; nil records straight into the store.
	Record events.Recorder
	Logger *slog.Logger
	// ChangeWait bounds how long a call waits for a reaper's transition; 0 means 2 min.
	ChangeWait time.Duration
	// Network runs the egress proxies of local sandboxes (sandboxnet.Proxies). Nil gives
	// a local sandbox no network at all, whatever its environment says: a local sandbox
	// never gets the host's network.
	Network Network
	// LeaseTTL is how long the reaper's lease on a sandbox lasts unless renewed
	// (replicas.go); 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
}

// Network is the harness side of local sandboxes' egress (sandboxnet.Proxies).
type Network interface {
	// Attach starts the proxy of a new sandbox and returns the variables its
	// environment needs and the runtime's egress hook.
	Attach(ctx context.Context, sessionID, sandboxID string, env store.Environment) (map[string]string, *sandbox.Egress, error)
	// Ensure makes an existing sandbox's proxy serve in this process; true means it was
	// recreated (at the same socket path, which a Running sandbox reaches as it is).
	Ensure(ctx context.Context, sessionID, sandboxID string) (bool, error)
	// Detach closes a sandbox's proxy; forget drops its recorded state for good.
	Detach(ctx context.Context, sandboxID string, forget bool)
}

// Manager runs the lifecycle of session sandboxes.
type Manager struct {
	cfg Config

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Owner == "" {
		cfg.Owner = ProcessOwner()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ChangeWait == 0 {
		cfg.ChangeWait = 2 * time.Minute
	}
	m := &Manager{cfg: cfg, locks: map[string]*sync.Mutex{}}
	if m.cfg.Record == nil {
		m.cfg.Record = m.storeRecord
	}
	return m
}

func (m *Manager) storeRecord(ctx context.Context, sessionID string, p events.Payload) {
	if _, err := events.Append(ctx, m.cfg.Store, sessionID, "", p); err != nil {
		m.cfg.Logger.Warn("recording a sandbox event failed", "session", sessionID, "kind", p.Kind(), "err", err)
	}
}

func (m *Manager) lock(sessionID string) func() {
	m.mu.Lock()
	l, ok := m.locks[sessionID]
	if !ok {
		l = &sync.Mutex{}
		m.locks[sessionID] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Lease is a sandbox held for one call: Release must follow.
type Lease struct {
	Record  store.SessionSandbox
	Runtime sandbox.Runtime
	// Notes tell the model what happened to the workspace on the way (provisioned,
	// resumed, recreated after a loss: files gone).
	Notes []string
	// Provisioned: this call created the sandbox.
	Provisioned bool

	m *Manager
}

// Release ends the call; its end counts as activity.
func (l *Lease) Release(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if err := l.m.cfg.Store.EndSandboxUse(ctx, l.Record.SessionID, l.m.cfg.Now()); err != nil {
		l.m.cfg.Logger.Warn("ending sandbox use", "session", l.Record.SessionID, "err", err)
	}
}

// Acquire returns the session's sandbox, Running and marked busy, provisioning,
// resuming or recreating it as needed. The agent's environment decides what a new
// sandbox is made from; an existing one keeps its snapshot.
func (m *Manager) Acquire(ctx context.Context, sessionID string, a *agents.Agent) (*Lease, error) {
	if !a.Spec.Sandbox.Enabled {
		return nil, fmt.Errorf("agent %q has no sandbox (sandbox.enabled is false)", a.Name)
	}
	unlock := m.lock(sessionID)
	defer unlock()
	deadline := time.Now().Add(m.cfg.ChangeWait)
	for {
		lease, retry, err := m.acquireOnce(ctx, sessionID, a)
		if err != nil || !retry {
			return lease, err
		}
		// A reaper is moving the sandbox; wait for it to land.
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the sandbox of session %s is still changing state after %s; try again", sessionID, m.cfg.ChangeWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (m *Manager) acquireOnce(ctx context.Context, sessionID string, a *agents.Agent) (*Lease, bool, error) {
	st := m.cfg.Store
	rec, err := st.GetSessionSandbox(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		l, err := m.provision(ctx, sessionID, a, 1, "")
		return l, false, err
	}
	if err != nil {
		return nil, false, err
	}
	if rec.ActiveExecs > 0 && rec.ExecOwner != m.cfg.Owner && !OwnerAlive(rec.ExecOwner) {
		// A harness died mid-call: its busy mark would keep the sandbox busy forever.
		_ = st.ClearStaleSandboxUse(ctx, sessionID, rec.ExecOwner)
	}
	if rec.State != store.SandboxStateDeleted {
		if err := m.checkSharingOf(ctx, a, rec.Environment); err != nil { // sharing.go
			return nil, false, err
		}
		if err := m.checkVolumesOf(ctx, a, rec); err != nil { // volumes.go
			return nil, false, err
		}
	}
	p, err := st.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return nil, false, fmt.Errorf("sandbox provider %q of session %s: %w", rec.Provider, sessionID, err)
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, p)
	if err != nil {
		return nil, false, err
	}
	lease := &Lease{Record: rec, Runtime: rt, m: m}
	switch rec.State {
	case store.SandboxStateChanging:
		if m.cfg.Now().Sub(rec.StateAt) > StaleChange {
			// A reaper died mid-transition: what the box is now is unknown, so treat it
			// like a loss (recovered after a health check, else recreated).
			if _, err := st.SwapSandboxState(ctx, sessionID, []string{store.SandboxStateChanging}, store.SandboxStateLost, m.cfg.Now(), time.Time{}); err != nil {
				return nil, false, err
			}
		}
		return nil, true, nil
	case store.SandboxStateDeleted:
		l, err := m.provision(ctx, sessionID, a, rec.Generation+1,
			fmt.Sprintf("The previous sandbox (%s) was deleted after being idle; this is a fresh workspace from snapshot %s: files from earlier turns are gone.", rec.SandboxID, "%s"))
		return l, false, err
	case store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived, store.SandboxStateLost:
	default:
		return nil, false, fmt.Errorf("the sandbox of session %s is in unknown state %q", sessionID, rec.State)
	}

	info, err := rt.Get(ctx, rec.SandboxID)
	if errors.Is(err, sandbox.ErrNotFound) {
		// Gone underneath us (crash, out-of-band delete): the conversation goes on in a
		// fresh workspace, and the model is told.
		m.cfg.Record(ctx, sessionID, events.SandboxLost{SandboxID: rec.SandboxID, State: rec.State, BackendStatus: "gone",
			Reason: "the backend no longer has it"})
		l, err := m.provision(ctx, sessionID, a, rec.Generation+1,
			fmt.Sprintf("The previous sandbox (%s) was lost; this is a fresh workspace from snapshot %s: the workspace was reset and files from earlier turns are gone.", rec.SandboxID, "%s"))
		return l, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("looking up sandbox %s: %w", rec.SandboxID, err)
	}
	if err := m.ensureNetwork(ctx, lease); err != nil {
		return nil, false, err
	}
	// from is the state the record leaves when the sandbox is handed out; lost says the
	// box failed under an earlier call.
	from, lost := rec.State, rec.State == store.SandboxStateLost
	// settled: the claimed record moved on (to running, or replaced by provision), or is
	// no longer ours to hand back.
	settled := false
	if lost {
		// Claim the record for the health check: a reaper (in this or another process)
		// moves a lost record only from lost, so it cannot stop or archive the box while
		// its health is checked (which would fail the check and replace the box, files
		// and all). A harness that dies mid-check leaves it changing, taken over once
		// stale.
		ok, err := st.SwapSandboxState(ctx, sessionID, []string{store.SandboxStateLost}, store.SandboxStateChanging, m.cfg.Now(), time.Time{})
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, true, nil
		}
		from = store.SandboxStateChanging
		defer func() {
			if !settled {
				// Given up (an error or a cancel) before the record moved on: lost again,
				// for the next call.
				_, _ = st.SwapSandboxState(context.WithoutCancel(ctx), sessionID, []string{store.SandboxStateChanging}, store.SandboxStateLost, m.cfg.Now(), time.Time{})
			}
		}()
		// Recovering a box that failed under a call: make sure it works before handing
		// it out again; if it does not, replace it.
		if info.Status != sandbox.SandboxRunning {
			_ = rt.Start(ctx, rec.SandboxID)
		}
		res, perr := rt.Exec(ctx, rec.SandboxID, sandbox.ExecRequest{Argv: []string{"true"}, Timeout: 30 * time.Second})
		if perr != nil || res.ExitCode != 0 {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			_ = rt.Delete(ctx, rec.SandboxID)
			m.cfg.Record(ctx, sessionID, events.SandboxLost{SandboxID: rec.SandboxID, State: rec.State, BackendStatus: info.Status,
				Reason: "it failed a health check after an earlier failure"})
			l, err := m.provision(ctx, sessionID, a, rec.Generation+1,
				fmt.Sprintf("The previous sandbox (%s) could not be recovered; this is a fresh workspace from snapshot %s: the workspace was reset and files from earlier turns are gone.", rec.SandboxID, "%s"))
			// provision records the new sandbox over the claim; if it fails, the claim is
			// handed back.
			settled = err == nil
			return l, false, err
		}
		if info2, err := rt.Get(ctx, rec.SandboxID); err == nil {
			info = info2
		}
	}
	if info.Status != sandbox.SandboxRunning {
		// Stopped or Archived (by us, by the backend's own idle policy, or by a loss
		// that left the box): start it with its files.
		if err := rt.Start(ctx, rec.SandboxID); err != nil {
			if errors.Is(err, sandbox.ErrNotFound) {
				l, err := m.provision(ctx, sessionID, a, rec.Generation+1,
					fmt.Sprintf("The previous sandbox (%s) was lost; this is a fresh workspace from snapshot %s: the workspace was reset.", rec.SandboxID, "%s"))
				// provision records the new sandbox over the claim; if it fails, the claim is
				// handed back.
				settled = err == nil
				return l, false, err
			}
			return nil, false, fmt.Errorf("resuming sandbox %s (%s): %w", rec.SandboxID, info.Status, err)
		}
		if info2, err := rt.Get(ctx, rec.SandboxID); err == nil {
			info = info2
		}
		now := m.cfg.Now()
		ok, err := st.SwapSandboxState(ctx, sessionID, []string{from}, store.SandboxStateRunning, now, time.Time{})
		if err != nil {
			return nil, false, err
		}
		settled = true
		if !ok {
			return nil, true, nil
		}
		m.cfg.Record(ctx, sessionID, events.SandboxResumed{SandboxID: rec.SandboxID, From: info.Status, RecordedState: rec.State,
			SnapshotID: info.SnapshotID, RecordedSnapshotID: rec.SnapshotID})
		note := fmt.Sprintf("The sandbox (%s) was %s and has been resumed with its files, from snapshot %s.", rec.SandboxID, lower(info.Status), info.SnapshotID)
		if info.SnapshotID != rec.SnapshotID {
			note += fmt.Sprintf(" Warning: it reports snapshot %s but was recorded as created from %s.", info.SnapshotID, rec.SnapshotID)
		}
		if lost {
			note = fmt.Sprintf("The sandbox (%s) died during an earlier call and was recovered with its files.", rec.SandboxID)
			if len(rec.Uncertain) > 0 {
				note += fmt.Sprintf(" These files were being written when it died and may be incomplete: %v.", rec.Uncertain)
			}
		}
		lease.Notes = append(lease.Notes, note)
		rec.State = store.SandboxStateRunning
	} else if from != store.SandboxStateRunning {
		// The box runs but the record says otherwise (a loss that did not kill it).
		ok, err := st.SwapSandboxState(ctx, sessionID, []string{from}, store.SandboxStateRunning, m.cfg.Now(), time.Time{})
		if err != nil {
			return nil, false, err
		}
		settled = true
		if !ok {
			return nil, true, nil
		}
		if lost {
			m.cfg.Record(ctx, sessionID, events.SandboxRecovered{SandboxID: rec.SandboxID, Uncertain: rec.Uncertain})
			note := fmt.Sprintf("The sandbox (%s) failed during an earlier call and has been recovered with its files.", rec.SandboxID)
			if len(rec.Uncertain) > 0 {
				note += fmt.Sprintf(" These files were being written when it failed and may be incomplete: %v.", rec.Uncertain)
			}
			lease.Notes = append(lease.Notes, note)
		}
	}
	ok, err := st.BeginSandboxUse(ctx, sessionID, m.cfg.Owner, m.cfg.Now())
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, true, nil
	}
	lease.Record.State = store.SandboxStateRunning
	return lease, false, nil
}

// provision creates the session's sandbox (generation gen) from the agent's environment.
// resetNote, when set, is a format with one %s for the snapshot id, told to the model.
func (m *Manager) provision(ctx context.Context, sessionID string, a *agents.Agent, gen int64, resetNote string) (*Lease, error) {
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
	if resetNote != "" {
		lease.Notes = append(lease.Notes, fmt.Sprintf(resetNote, env.SnapshotID))
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

func sandboxID(sessionID string, gen int64) string {
	return fmt.Sprintf("%s%s-%d", SandboxIDPrefix, strings.TrimPrefix(sessionID, "s-"), gen)
}

// SandboxIDPrefix starts the id of every sandbox the harness creates:
// "tf-s-<session>-<generation>".
const SandboxIDPrefix = "tf-s-"

// StaleChange is how long a reaper's transition may take before a call takes over.
const StaleChange = 10 * time.Minute

// Labels set on every sandbox the harness creates.
const (
	LabelSession     = "trueforge.session"
	LabelAgent       = "trueforge.agent"
	LabelOwner       = "trueforge.owner"
	LabelEnvironment = "trueforge.environment"
)

// CheckLost decides, after a call failed or its command died without being cancelled,
// whether the sandbox itself is gone or broken. If so it records the loss (state lost,
// the paths being written as uncertain) and returns true: the next Acquire recovers or
// recreates it.
func (m *Manager) CheckLost(ctx context.Context, l *Lease, uncertain []string, cause string) bool {
	ctx = context.WithoutCancel(ctx)
	info, err := l.Runtime.Get(ctx, l.Record.SandboxID)
	if err == nil && info.Status == sandbox.SandboxRunning {
		return false
	}
	status := "gone"
	if err == nil {
		status = info.Status
	}
	now := m.cfg.Now()
	ok, serr := m.cfg.Store.SwapSandboxState(ctx, l.Record.SessionID, []string{store.SandboxStateRunning}, store.SandboxStateLost, now, time.Time{})
	if serr != nil || !ok {
		return true
	}
	if len(uncertain) > 0 {
		_ = m.cfg.Store.SetSandboxUncertain(ctx, l.Record.SessionID, uncertain)
	}
	m.cfg.Record(ctx, l.Record.SessionID, events.SandboxLost{SandboxID: l.Record.SandboxID, State: store.SandboxStateRunning,
		BackendStatus: status, Reason: cause, Uncertain: uncertain})
	m.cfg.Logger.Warn("sandbox lost", "session", l.Record.SessionID, "sandbox", l.Record.SandboxID, "status", status)
	return true
}

// Delete removes a session's sandbox (backend and record state); a session without
// one is fine.
func (m *Manager) Delete(ctx context.Context, sessionID string) error {
	unlock := m.lock(sessionID)
	defer unlock()
	rec, err := m.cfg.Store.GetSessionSandbox(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	p, err := m.cfg.Store.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return fmt.Errorf("sandbox provider %q of session %s: %w", rec.Provider, sessionID, err)
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, p)
	if err != nil {
		return err
	}
	if err := rt.Delete(ctx, rec.SandboxID); err != nil {
		return fmt.Errorf("deleting sandbox %s: %w", rec.SandboxID, err)
	}
	if m.cfg.Network != nil {
		m.cfg.Network.Detach(ctx, rec.SandboxID, true)
	}
	_, err = m.cfg.Store.SwapSandboxState(ctx, sessionID, []string{rec.State}, store.SandboxStateDeleted, m.cfg.Now(), time.Time{})
	return err
}

func lower(s string) string {
	b := []byte(s)
	if len(b) > 0 && b[0] >= 'A' && b[0] <= 'Z' {
		b[0] += 'a' - 'A'
	}
	return string(b)
}

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
