package agents

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// pinVersion makes the agent's sandboxes come from the version of its environment that
// sandbox.environment_version pins (issue 28), instead of the current one: its snapshot
// replaces the environment's, everything else of the environment (env, network,
// secrets, volumes) stays as it is now, since those are live settings. The pinned
// version must still be kept and its snapshot Ready; plan refuses a pin that is not,
// and this says so again for a row written past it.
func (a *Agent) pinVersion(ctx context.Context, st *store.Store) error {
	ref := a.Spec.Sandbox.EnvironmentVersion
	if ref == "" {
		return nil
	}
	env := a.Environment.Name
	v, err := st.FindVersion(ctx, env, ref)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("agent %q pins version %q of environment %q, which is not one of its versions; set sandbox.environment_version to a build hash or snapshot id of its versions, or remove it, and apply: %w",
			a.Name, ref, env, ErrNotReady)
	}
	if err != nil {
		return err
	}
	if !v.Kept {
		return fmt.Errorf("agent %q pins version %s of environment %q, which is past its keep_versions and was collected; pin a kept version, or raise keep_versions and rebuild it, and apply: %w",
			a.Name, v.SnapshotID, env, ErrNotReady)
	}
	if err := a.useVersion(ctx, st, v); err != nil {
		return fmt.Errorf("agent %q pins version %s of environment %q, whose snapshot is not Ready (%v); apply the environment again: %w",
			a.Name, v.SnapshotID, env, err, ErrNotReady)
	}
	return nil
}

// pinned: the agent's sandboxes on its environment come from the version it pins
// (pinVersion), whatever the environment's current version or rollout.
func (a *Agent) pinned() bool {
	return a.Spec.Sandbox.EnvironmentVersion != "" && a.Environment.Name == a.Spec.Sandbox.Environment
}

// useVersion makes the agent's sandboxes come from version v of its environment, whose
// snapshot must be Ready (pinVersion and rollout, rollout.go); the agent is unchanged
// otherwise.
func (a *Agent) useVersion(ctx context.Context, st *store.Store, v store.EnvironmentVersion) error {
	snap, err := st.GetSnapshot(ctx, v.SnapshotID)
	if err == nil && snap.Status != sandbox.StatusReady {
		err = fmt.Errorf("snapshot %s is %s", snap.ID, snap.Status)
	}
	if err != nil {
		return err
	}
	a.Environment.SnapshotID, a.Environment.BuildHash, a.Snapshot = snap.ID, snap.BuildHash, snap
	return nil
}
