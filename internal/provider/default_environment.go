package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The reserved default environment of a backend whose snapshots live remotely
// (sandbox.Capabilities.RemoteSnapshots) can lose its snapshot outside Terraform: the
// provider's refresh reads it, and the next apply repairs it.

// defaultSnapshotFailed refreshes the default environment's snapshot (one read) of a
// backend with remote snapshots and reports whether it is Failed: deleted, deactivated
// or broken there. It adds an error diagnostic, as an environment's refresh does, when
// the backend did not answer.
func (r *sandboxProviderResource) defaultSnapshotFailed(ctx context.Context, p store.SandboxProvider, def store.Environment, diags *diag.Diagnostics) bool {
	coord, _, err := r.cp.coordinator(ctx, p.Name)
	if err != nil {
		addOperationError(diags, "Error Reading Sandbox Provider", fmt.Sprintf("sandbox provider %q, opening its backend", p.Name), err)
		return false
	}
	snap, err := coord.Refresh(ctx, def.SnapshotID)
	if err != nil {
		diags.AddError("Error Reading Environment Snapshot", snapshotReadError(def.Name, def.SnapshotID, err))
		return false
	}
	return snap.Status == sandbox.StatusFailed
}

// ensureDefaultEnvironment brings the reserved `default` environment's snapshot to Ready
// (building, re-activating or rebuilding it) and waits for it; with create it first
// stores the environment, pointing at that snapshot.
func (r *sandboxProviderResource) ensureDefaultEnvironment(ctx context.Context, p store.SandboxProvider, create bool) error {
	coord, _, err := r.cp.coordinator(ctx, p.Name)
	if err != nil {
		return err
	}
	began := time.Now()
	snap, err := coord.Ensure(ctx, sandbox.BuildRequest{Spec: defaultSpec, Base: p.ReleaseSnapshot})
	if err != nil {
		return err
	}
	tflog.Debug(ctx, "sandbox provider: default environment's snapshot", map[string]any{"snapshot_id": snap.ID, "status": snap.Status})
	if create {
		env := store.Environment{
			ID: newID("env"), Name: defaultEnvironmentName, Provider: p.Name, Owner: p.Owner, Reserved: true,
			Image: defaultSpec.Image, CPU: defaultSpec.CPU, MemoryGB: defaultSpec.MemoryGB, DiskGB: defaultSpec.DiskGB,
			BuildHash: snap.BuildHash, SnapshotID: snap.ID,
		}
		if err := r.cp.store.CreateEnvironment(ctx, env); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
			return err
		}
	}
	snap, err = coord.Wait(ctx, snap.ID)
	logBuild(ctx, defaultEnvironmentName, snap, began)
	if err != nil {
		return err
	}
	if snap.Status != sandbox.StatusReady {
		return fmt.Errorf("the snapshot of the default environment failed: %s\n\nBuild log (tail):\n%s", snap.Reason, snap.LogTail)
	}
	return nil
}

// snapshotReadError is the detail of a refresh that could not reach a backend with remote
// snapshots.
func snapshotReadError(env, snapshot string, err error) string {
	return fmt.Sprintf("Environment %q: the state of snapshot %s could not be read from its backend, so the plan cannot tell whether it needs a rebuild. "+
		"Check the backend's status and the network, then plan again.\n\nOriginal Error: %s", env, snapshot, err)
}
