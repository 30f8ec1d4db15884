package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// volumes puts the environment's volumes (its settings' volumes, by trueforge_volume
// name) into req, each resolved to its backend's id through the store, so that the
// sandbox mounts them. A volume gone since the environment was applied, or of another
// sandbox provider, refuses the sandbox with the reason: mounting nothing there would
// lose what the agent writes.
func (m *Manager) volumes(ctx context.Context, env store.Environment, req *sandbox.CreateRequest) error {
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
		req.Volumes = append(req.Volumes, sandbox.VolumeMount{Volume: vol.RemoteID, MountPath: v.MountPath, Subpath: v.Subpath})
	}
	return nil
}
