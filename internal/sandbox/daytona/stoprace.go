package daytona

import (
	"context"
	"fmt"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Stopping and archiving race Daytona's own transitions (auto-stop, auto-archive, another
// caller, an ephemeral sandbox deleted as it stops). Daytona v0.190's stop() in
// apps/api/src/sandbox/services/sandbox.service.ts answers 409 "state change in progress"
// while a transition runs (retried by the client, RetryPolicy.StateChangeWait) and 400
// "Sandbox is not in a stoppable state" once the sandbox is stopped; with
// autoDeleteInterval 0 it soft-deletes the sandbox, which then reads as destroyed or 404.
// So every refusal is followed by a fresh read, and stopped, archived and gone all count
// as done. archive() answers 400 "Sandbox is not stopped" for any other state (a sandbox
// started again since our stop) and 409 while a transition runs (sandbox.service.ts:
// 355-374); the re-read then stops it again before archiving.

// Transitional states that end stopped and archived.
const (
	sandboxStopping  = "stopping"
	sandboxArchiving = "archiving"
)

// stop brings the sandbox to stopped (or archived, or gone) and waits for it, bounded by
// ctx. A sandbox in error is ErrLost.
func (r *Runtime) stop(ctx context.Context, id string) error {
	for attempt := 0; ; attempt++ {
		sb, err := r.C.GetSandbox(ctx, id)
		if IsNotFound(err) {
			r.forget(id)
			return nil // deleted as it stopped (autoDeleteInterval 0) or before: nothing runs
		}
		if err != nil {
			return err
		}
		switch {
		case sb.State == SandboxStopped || sb.State == SandboxArchived || sb.State == sandboxArchiving:
			return nil
		case sb.State == SandboxDestroying || sb.State == SandboxDestroyed:
			r.forget(id)
			return nil
		case lostState(sb.State):
			return fmt.Errorf("%w: Daytona reports %s: %s", sandbox.ErrLost, sb.State, sb.ErrorReason)
		case sb.State == sandboxStopping:
			return r.waitStopped(ctx, sb.ID)
		case attempt >= 3:
			// Stop was refused three times with the sandbox still not stopping: give up
			// rather than loop; the caller retries later.
			return fmt.Errorf("sandbox is %s and Daytona refused to stop it", sb.State)
		}
		if _, err := r.C.StopSandbox(ctx, sb.ID, false); err != nil {
			if IsNotFound(err) || refusedForState(err) {
				continue // the state moved under us: read it again
			}
			return err
		}
		return r.waitStopped(ctx, sb.ID)
	}
}

// waitStopped polls the sandbox with Daytona id sbID until it is stopped, archived or
// gone (by id: an ephemeral sandbox loses its name as it stops).
func (r *Runtime) waitStopped(ctx context.Context, sbID string) error {
	for {
		sb, err := r.C.GetSandbox(ctx, sbID)
		switch {
		case IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		switch {
		case sb.State == SandboxStopped || sb.State == SandboxArchived || sb.State == sandboxArchiving:
			return nil
		case sb.State == SandboxDestroying || sb.State == SandboxDestroyed:
			return nil
		case lostState(sb.State):
			return fmt.Errorf("%w: Daytona reports %s: %s", sandbox.ErrLost, sb.State, sb.ErrorReason)
		}
		if err := sleep(ctx, r.C.poll); err != nil {
			return fmt.Errorf("sandbox still %s, want stopped: %w", sb.State, err)
		}
	}
}

// archive archives a stopped sandbox and waits for `archived`; one already archived (by
// Daytona's auto-archive, racing this call) is fine, and one started again since it was
// stopped (by another caller) is stopped again first.
func (r *Runtime) archive(ctx context.Context, id string) error {
	for attempt := 0; ; attempt++ {
		sb, err := r.C.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case sb.State == SandboxArchived:
			return nil
		case lostState(sb.State):
			return fmt.Errorf("%w: Daytona reports %s: %s", sandbox.ErrLost, sb.State, sb.ErrorReason)
		case sb.State == sandboxArchiving:
			_, err := r.C.WaitSandbox(ctx, id, SandboxArchived)
			return err
		case attempt >= 3:
			return fmt.Errorf("sandbox is %s and Daytona refused to archive it", sb.State)
		case sb.State != SandboxStopped:
			// Started (or starting) again since the caller's stop: Daytona archives only a
			// stopped sandbox ("Sandbox is not stopped").
			if err := r.stop(ctx, sb.ID); err != nil {
				return err
			}
			continue
		}
		if _, err := r.C.ArchiveSandbox(ctx, sb.ID); err != nil {
			if refusedForState(err) {
				continue
			}
			return err
		}
		_, err = r.C.WaitSandbox(ctx, id, SandboxArchived)
		return err
	}
}

// refusedForState reports Daytona's refusals of a lifecycle call because of the
// sandbox's current state: 409 "state change in progress" (left after the client's
// retries), and the 400s of v0.190's sandbox.service.ts: stop's "Sandbox is not in a
// stoppable state" (2161), start's "Sandbox is not in valid state" (2079) and archive's
// "Sandbox is not stopped" (365). Archive's "Ephemeral sandboxes cannot be archived"
// (373) is not one: no state makes it pass.
func refusedForState(err error) bool {
	e, ok := asAPI(err)
	if !ok {
		return false
	}
	msg := strings.ToLower(e.Message)
	return isStateChange(e) || (e.Status == 400 && (strings.Contains(msg, "stoppable state") ||
		strings.Contains(msg, "valid state") || strings.Contains(msg, "is not stopped")))
}
