package daytona

import (
	"context"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// SandboxDestroying is the state of a sandbox being deleted (Daytona renames it at once,
// freeing its name, and lists it for a while).
const SandboxDestroying = "destroying"

// failedCleanupWait bounds the cleanup of a failed create when the caller's context has
// already ended (a timeout): the lookup, the delete and the wait for the name to be free.
const failedCleanupWait = time.Minute

// failedGoneWait bounds the wait for a deleted failed sandbox's name to be free.
const failedGoneWait = 2 * time.Minute

// lostState reports the Daytona states in which a sandbox will never run again: it failed
// (error, build_failed) or is being or was deleted (destroying, destroyed). Stop and start
// refuse an errored sandbox ("Sandbox is in an errored state"), so these read as lost,
// never as stopped.
func lostState(state string) bool {
	switch state {
	case SandboxError, SandboxBuildFailed, SandboxDestroying, SandboxDestroyed:
		return true
	}
	return false
}

// clearFailed looks name up after a create that failed or met a taken name, and deletes
// the sandbox under it if that one is in error or build_failed, waiting until the name is
// free. It reports whether it removed one. A sandbox in any other state is left alone:
// it may be a healthy one the caller adopts.
//
// Daytona's POST /sandbox answers 400 "Sandbox failed to start: ..." with no sandbox when
// the sandbox fails within the server's wait, and the errored sandbox keeps the name, so
// without this a retry meets 409 and the caller would adopt a sandbox that never runs.
func (r *Runtime) clearFailed(ctx context.Context, name string) (bool, error) {
	sb, err := r.C.GetSandbox(ctx, name)
	switch {
	case IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up sandbox %s after the failed create: %w", name, err)
	case sb.State != SandboxError && sb.State != SandboxBuildFailed:
		return false, nil
	}
	r.forget(name)
	if err := r.C.DeleteSandbox(ctx, sb.ID); err != nil && !IsNotFound(err) {
		return false, fmt.Errorf("deleting sandbox %s, left %s (%s) by a failed create: %w", name, sb.State, sb.ErrorReason, err)
	}
	wctx, cancel := context.WithTimeout(ctx, failedGoneWait)
	defer cancel()
	for {
		got, err := r.C.GetSandbox(wctx, name)
		switch {
		case IsNotFound(err):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("waiting for the failed sandbox %s to be deleted: %w", name, err)
		case got.ID != sb.ID || got.State == SandboxDestroying || got.State == SandboxDestroyed:
			return true, nil
		}
		if err := sleep(wctx, r.C.poll); err != nil {
			return false, fmt.Errorf("the failed sandbox %s is still %s after %s: %w", name, got.State, failedGoneWait, err)
		}
	}
}

// cleanupAfterFailedCreate runs clearFailed for a create that failed with err, even when
// ctx has ended (a timeout is a failure too), and adds a cleanup failure to err.
func (r *Runtime) cleanupAfterFailedCreate(ctx context.Context, name string, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failedCleanupWait)
	defer cancel()
	if _, cerr := r.clearFailed(cctx, name); cerr != nil {
		return fmt.Errorf("%w (and %w)", err, cerr)
	}
	return err
}

// lostErr turns a failed lifecycle call on a sandbox Daytona holds in error, build_failed
// or being deleted into sandbox.ErrLost (start refuses an errored sandbox with 400 "Sandbox
// is in an errored state"); other errors are returned as they are.
func (r *Runtime) lostErr(ctx context.Context, id string, err error) error {
	sb, gerr := r.C.GetSandbox(ctx, id)
	if gerr == nil && lostState(sb.State) {
		return fmt.Errorf("%w (Daytona reports %s: %s): %w", sandbox.ErrLost, sb.State, sb.ErrorReason, err)
	}
	return err
}
