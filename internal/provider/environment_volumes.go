package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// checkRefs checks what an environment's settings name in the store: its volumes and
// its registry (with the image it pulls from it). planning=true is the plan's check,
// where what may be created by the same apply only warns; at apply it refuses. Nothing
// is checked while the provider or those attributes are unknown.
func (r *environmentResource) checkRefs(ctx context.Context, plan *environmentModel, planning bool) diag.Diagnostics {
	if r.cp == nil || plan.SandboxProvider.IsUnknown() || plan.Volumes.IsUnknown() || plan.Registry.IsUnknown() || plan.Image.IsUnknown() {
		return nil
	}
	providerName := plan.SandboxProvider.ValueString()
	diags := r.cp.volumesDiags(ctx, providerName, plan.volumes(ctx), planning)
	diags.Append(r.cp.checkRegistry(ctx, providerName, plan.Registry.ValueString(), plan.Image.ValueString(), planning)...)
	return diags
}

// checkVolumes refuses, at apply, an environment of sandbox provider providerName whose
// volumes name a volume that does not exist, belongs to another sandbox provider, or
// that the applying owner may not use (store.UsableBy: another owner's volume not shared
// with it), naming the attribute (volumes[i].volume).
func (cp *controlPlane) checkVolumes(ctx context.Context, providerName string, vols []store.EnvironmentVolume) diag.Diagnostics {
	return cp.volumesDiags(ctx, providerName, vols, false)
}

// planVolumes is checkVolumes at plan time: a volume of another sandbox provider is
// refused, a missing one only warned about (the same apply may create it first).
func (cp *controlPlane) planVolumes(ctx context.Context, providerName string, vols []store.EnvironmentVolume) diag.Diagnostics {
	return cp.volumesDiags(ctx, providerName, vols, true)
}

func (cp *controlPlane) volumesDiags(ctx context.Context, providerName string, vols []store.EnvironmentVolume, planning bool) diag.Diagnostics {
	var diags diag.Diagnostics
	for i, v := range vols {
		at := path.Root("volumes").AtListIndex(i).AtName("volume")
		got, err := cp.store.GetVolume(ctx, v.Volume)
		switch {
		case errors.Is(err, store.ErrNotFound) && planning:
			diags.AddAttributeWarning(at, "Volume Not Found",
				fmt.Sprintf("No volume %q exists yet. Unless this apply creates it first (reference trueforge_volume.<name>.name so that it does), the apply fails.", v.Volume))
		case errors.Is(err, store.ErrNotFound):
			diags.AddAttributeError(at, "Volume Not Found",
				fmt.Sprintf("No volume %q exists. Create it with a trueforge_volume of sandbox provider %q, and reference its name attribute so that Terraform creates it first.", v.Volume, providerName))
		case err != nil:
			diags.AddAttributeError(at, "Error Reading Volume", fmt.Sprintf("volume %q: %s", v.Volume, err))
		case !got.UsableBy(cp.owner):
			diags.AddAttributeError(at, "Volume Not Shared With This Owner",
				fmt.Sprintf("volumes[%d] names volume %q, which is owned by %q and not shared with %q: an environment mounts only its owner's volumes "+
					"and those shared with its owner. Ask %q to add %q (or \"*\") to the volume's shared_with and apply, or mount a volume of your own.",
					i, v.Volume, got.Owner, cp.owner, got.Owner, cp.owner))
		case got.Provider != providerName:
			diags.AddAttributeError(at, "Volume Of Another Sandbox Provider",
				fmt.Sprintf("Volume %q belongs to sandbox provider %q, but this environment's sandboxes run on %q: a volume is mounted only by sandboxes of its own provider. "+
					"Create a trueforge_volume with sandbox_provider = %q and name that one.", v.Volume, got.Provider, providerName, providerName))
		}
	}
	return diags
}

// checkRegistry refuses an environment of sandbox provider providerName whose registry
// does not exist (at apply; at plan, planning=true, it warns) or belongs to another
// sandbox provider, naming the attribute (registry), and an image that the backend would
// not pull with it (sandbox.RegistryChecker), naming image. "" (a public image) is
// fine.
func (cp *controlPlane) checkRegistry(ctx context.Context, providerName, registry, image string, planning bool) diag.Diagnostics {
	var diags diag.Diagnostics
	if registry == "" {
		return diags
	}
	at := path.Root("registry")
	g, err := cp.store.GetRegistry(ctx, registry)
	switch {
	case errors.Is(err, store.ErrNotFound) && planning:
		diags.AddAttributeWarning(at, "Registry Not Found",
			fmt.Sprintf("No registry %q exists yet. Unless this apply creates it first (reference trueforge_registry.<name>.name so that it does), the apply fails.", registry))
	case errors.Is(err, store.ErrNotFound):
		diags.AddAttributeError(at, "Registry Not Found",
			fmt.Sprintf("No registry %q exists. Create it with a trueforge_registry of sandbox provider %q, and reference its name attribute so that Terraform creates it first.", registry, providerName))
	case err != nil:
		diags.AddAttributeError(at, "Error Reading Registry", fmt.Sprintf("registry %q: %s", registry, err))
	case g.Provider != providerName:
		diags.AddAttributeError(at, "Registry Of Another Sandbox Provider",
			fmt.Sprintf("Registry %q belongs to sandbox provider %q, but this environment builds on %q. Create a trueforge_registry with sandbox_provider = %q and name that one.",
				registry, g.Provider, providerName, providerName))
	case image != "":
		// Which images the backend pulls with the registry is the backend's rule.
		if p, err := cp.store.GetSandboxProvider(ctx, providerName); err == nil {
			if b, err := cp.backend(p); err == nil {
				addProblems(&diags, registryRules(b).CheckRegistryImage(registry, g.URL, image))
			}
		}
	}
	return diags
}
