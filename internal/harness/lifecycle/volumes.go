package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// ErrVolumeNotShared is wrapped when an environment mounts a volume that its owner may
// not use (store.UsableBy).
var ErrVolumeNotShared = errors.New("volume not shared with the environment's owner")

// volumes puts the environment's volumes (its settings' volumes, by trueforge_volume
// name) into req, each resolved to its backend's id through the store, so that the
// sandbox mounts them. A volume gone since the environment was applied, or of another
// sandbox provider, refuses the sandbox with the reason: mounting nothing there would
// lose what the agent writes. So does a volume the environment's owner may not use
// (another owner's, not shared with it: a row written past the provider, or a volume
// unshared since): a row grants nothing by itself. The agent's owner must be allowed
// too: an environment without secrets may serve another owner's agents, but its
// volumes serve only the owners their owner shares them with. Every volume is checked
// before any is put into req, so a refused sandbox mounts nothing.
func (m *Manager) volumes(ctx context.Context, env store.Environment, a *agents.Agent, req *sandbox.CreateRequest) error {
	var mounts []sandbox.VolumeMount
	for _, v := range env.Settings.Volumes {
		vol, err := m.cfg.Store.GetVolume(ctx, v.Volume)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("environment %q mounts volume %q, which does not exist (apply a trueforge_volume of that name): %w", env.Name, v.Volume, err)
		}
		if err != nil {
			return fmt.Errorf("environment %q, volume %q: %w", env.Name, v.Volume, err)
		}
		if vol.Provider != env.Provider {
			return fmt.Errorf("environment %q runs on sandbox provider %q but mounts volume %q of provider %q", env.Name, env.Provider, v.Volume, vol.Provider)
		}
		if !vol.UsableBy(env.Owner) {
			return fmt.Errorf("environment %q (owner %q) mounts volume %q, which is owned by %q and not shared with %q; "+
				"the volume's owner must add %q to its shared_with, or the environment must drop it: %w",
				env.Name, env.Owner, v.Volume, vol.Owner, env.Owner, env.Owner, ErrVolumeNotShared)
		}
		if !vol.UsableBy(a.Owner) {
			return fmt.Errorf("agent %q (owner %q) runs on environment %q, which mounts volume %q, owned by %q and not shared with %q; "+
				"the volume's owner must add %q to its shared_with, or the agent must use another environment: %w",
				a.Name, a.Owner, env.Name, v.Volume, vol.Owner, a.Owner, a.Owner, ErrVolumeNotShared)
		}
		mounts = append(mounts, sandbox.VolumeMount{Volume: vol.RemoteID, MountPath: v.MountPath, Subpath: v.Subpath})
	}
	req.Volumes = append(req.Volumes, mounts...)
	return nil
}

// volumeNames are the trueforge_volume names env's sandboxes mount, as the session's
// sandbox record keeps them (checkVolumesOf).
func volumeNames(env store.Environment) []string {
	var out []string
	for _, v := range env.Settings.Volumes {
		if !slices.Contains(out, v.Volume) {
			out = append(out, v.Volume)
		}
	}
	return out
}

// checkVolumesOf refuses the reuse of a session's existing sandbox that mounts a volume
// its environment's owner may no longer use (the volume's owner unshared it since): the
// mount was made when it was allowed, and the sandbox is not used again; its files stay
// until the reaper deletes it. Both the environment's owner (read now; an environment
// deleted since has none) and the agent's must still be allowed.
func (m *Manager) checkVolumesOf(ctx context.Context, a *agents.Agent, rec store.SessionSandbox) error {
	if len(rec.Volumes) == 0 {
		return nil
	}
	owners := []string{a.Owner}
	env, err := m.cfg.Store.GetEnvironment(ctx, rec.Environment)
	switch {
	case err == nil:
		owners = append(owners, env.Owner)
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("environment %q of the session's sandbox: %w", rec.Environment, err)
	}
	for _, name := range rec.Volumes {
		vol, err := m.cfg.Store.GetVolume(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since, with its files: nothing of it is left to reach
		}
		if err != nil {
			return fmt.Errorf("volume %q of the session's sandbox: %w", name, err)
		}
		for _, owner := range owners {
			if !vol.UsableBy(owner) {
				return fmt.Errorf("the session's sandbox mounts volume %q, owned by %q, which no longer shares it with %q; "+
					"the sandbox is not used: %w", name, vol.Owner, owner, ErrVolumeNotShared)
			}
		}
	}
	return nil
}
