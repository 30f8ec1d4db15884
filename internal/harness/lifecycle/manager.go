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
// process is cleared, since its owner is checked for life. The transitions, what each
// starts from, leaves and records, are one table (transitions.go); a call's Acquire
// takes one of them per read of the record (acquire.go, provision included), the reaper takes the idle
// steps (reap.go), and Reclaim restarts what a dead harness left (reclaim.go).
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
	"strings"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
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
	// Telemetry traces what the reaper does outside any turn: each stop, archive and
	// delete of an idle sandbox is a trace of its own (trace.go). Nil traces nothing.
	Telemetry *telemetry.Provider
}

// Network is the harness side of local sandboxes' egress (sandboxnet.Proxies).
type Network interface {
	// Attach starts the proxy of a new sandbox and returns the variables its
	// environment needs and the runtime's egress hook.
	Attach(ctx context.Context, sessionID, sandboxID string, env store.Environment) (map[string]string, *sandbox.Egress, error)
	// Prepare readies the egress of a warm pool member (no session yet, nothing served)
	// and returns, besides what Attach does, its sealed state for Adopt.
	Prepare(ctx context.Context, sandboxID string, env store.Environment) (map[string]string, *sandbox.Egress, string, error)
	// Adopt makes a claimed member's prepared egress its session's, and serves it.
	Adopt(ctx context.Context, sessionID, sandboxID, prepared string) error
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
	// orphans are the boxes labelled as pool members that nothing points at, by when a
	// keeper's pass first saw them (pool_orphans.go).
	orphans poolOrphans
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
	// via is the transition that handed it out (transitions.go).
	via transition

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
func (m *Manager) Acquire(ctx context.Context, sessionID string, a *agents.Agent) (lease *Lease, err error) {
	if !a.Spec.Sandbox.Enabled {
		return nil, fmt.Errorf("agent %q has no sandbox (sandbox.enabled is false)", a.Name)
	}
	ctx, span := startOp(ctx, "acquire") // trace.go
	defer func() { endAcquire(span, lease, err) }()
	unlock := m.lock(sessionID)
	defer unlock()
	deadline := time.Now().Add(m.cfg.ChangeWait)
	for {
		var retry bool
		lease, retry, err = m.attemptOnce(ctx, sessionID, a) // acquire.go
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

func sandboxID(sessionID string, gen int64) string {
	return fmt.Sprintf("%s%s-%d", SandboxIDPrefix, strings.TrimPrefix(sessionID, "s-"), gen)
}

// SandboxIDPrefix starts the id of every sandbox the harness creates for a session (a
// claimed warm pool member keeps its PoolIDPrefix id, pool.go):
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
