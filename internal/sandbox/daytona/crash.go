package daytona

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// A sandbox whose container dies underneath the runtime (the kernel's OOM killer, a
// crash of the daemon, which is the container's entrypoint, or a restart of the runner's
// Docker daemon) is not started again by Daytona: the runner's state sync reports the
// exited container, and the API then reads it stopped, with desiredState stopped, as
// after a stop (v0.190 apps/runner/pkg/docker/state.go:58-62,
// apps/runner/pkg/services/sandbox_sync.go:106-135, apps/api/src/sandbox/services/
// sandbox.service.ts updateState :3136-3196; emulated by daytonatest KillContainer).
// Its processes are gone, its files are kept.
//
// Nothing Daytona reports tells that from a stop, so the runtime remembers which
// sandboxes it made or started and has not stopped since (Runtime.started). An Exec
// that finds one of them stopped, before its command ran, starts it again, files intact,
// and runs the command: the sandbox is recovered, as the local backend recovers one
// whose keeper died. A sandbox this runtime stopped, or one it knows nothing of (made
// by another runtime, or before a restart of the harness), still gives ErrStopped. So
// does one Daytona stopped for being idle (auto-stop) while this runtime had it
// started: it too is started again by the next Exec, which is what the caller wanted.

// markStarted records that sandbox id (Daytona id daytonaID) is started by this runtime.
func (r *Runtime) markStarted(id, daytonaID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started = map[string]string{}
	}
	r.started[id] = daytonaID
}

// markStopped records that this runtime stops sandbox id.
func (r *Runtime) markStopped(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.started, id)
}

// stoppedUnderneath reports whether err says that sandbox id (sb) is stopped although
// this runtime started it and has not stopped it. err must come from before the
// command ran: a command the stop ended returns no error (sessionErr).
func (r *Runtime) stoppedUnderneath(id string, sb *Sandbox, err error) bool {
	if !errors.Is(err, sandbox.ErrStopped) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started[id] == sb.ID
}

// restartStopped starts sandbox id again after it stopped underneath (cause, the
// ErrStopped of the Exec). The sessions of the pool went with the daemon. A sandbox that
// cannot be started again is lost.
func (r *Runtime) restartStopped(ctx context.Context, id string, cause error) error {
	r.pool.reset(id)
	if err := r.Start(ctx, id); err != nil {
		if errors.Is(err, sandbox.ErrLost) {
			return err
		}
		return fmt.Errorf("%w: it stopped underneath the runtime (%v), and starting it again failed: %w", sandbox.ErrLost, cause, err)
	}
	return nil
}
