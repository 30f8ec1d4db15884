package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// trueforge_environment_rebuild builds an environment's snapshot again from the same
// inputs, for what the inputs do not name: a base image tag that moved, a package the
// build script installs at its latest version.
//
// Snapshots are content addressed (sandbox.SnapshotSpec.BuildHash), so the same inputs
// name the same snapshot, and a build of them is a no-op. A forced build therefore needs
// an input that differs: the rebuild counter, sandbox.SnapshotSpec.Rebuild, which the
// action increments. It is part of the hash only when it is not 0, so no existing hash
// changes. It is stored with the other build inputs beyond the first release, in the
// environment's settings document (store.EnvironmentSettings.Rebuild), not in a column
// of a new migration: that document is already where such inputs live, it needs no
// schema change, and on PostgreSQL it is written under the environments table's
// row-level security, by the environment's owner only. The resource reads the counter
// from the store at plan (storedRebuild) and at apply, so that its next plan computes
// the hash the action built and shows no change; an input changed later keeps the
// counter, which is then part of that new hash too.
//
// The build goes through the resource's own path: the environment read from the store
// as a refresh reads it (fromStore), its spec and build request as an apply makes them,
// and builds.Coordinator.Use saving the environment with the new snapshot, which records
// it as the current version (the one before it becomes a previous, kept version).

var _ action.ActionWithConfigure = (*environmentRebuildAction)(nil)

// NewEnvironmentRebuildAction is trueforge_environment_rebuild.
func NewEnvironmentRebuildAction() action.Action { return &environmentRebuildAction{} }

type environmentRebuildAction struct{ actionBase }

type environmentRebuildModel struct {
	Environment types.String `tfsdk:"environment"`
}

func (a *environmentRebuildAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_environment_rebuild"
}

func (a *environmentRebuildAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Builds an environment's snapshot again from the same build inputs, and switches the environment to it: for " +
			"what the inputs do not pin, such as a base image tag that moved or a package the build script installs at its latest " +
			"version. You must own the environment (on PostgreSQL, your role), as for any change to it. The new snapshot becomes the " +
			"current version and the one before it a previous version, kept as `keep_versions` says, as after an apply that builds; " +
			"sandboxes that already exist keep their snapshot until they are replaced. The environment's next plan shows no change: " +
			"the number of forced builds is a build input stored with the environment (0 leaves every build hash as it was). The " +
			"action waits for the build; progress messages report the new snapshot and its result, and a failed build fails the " +
			"action with its log tail. Needs Terraform 1.14 or later.",
		Attributes: map[string]schema.Attribute{
			"environment": schema.StringAttribute{
				MarkdownDescription: "Rebuild this environment (by name).",
				Required:            true,
			},
		},
	}
}

func (a *environmentRebuildAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var cfg environmentRebuildModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || !a.configured(resp) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, defaultBuildTimeout)
	defer cancel()
	cp, name := a.cp, cfg.Environment.ValueString()
	env, err := cp.store.GetEnvironment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("environment"), "Environment Not Found", fmt.Sprintf("No environment %q is in the control plane; name one that exists.", name))
		return
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Rebuilding Environment", fmt.Sprintf("environment %q", name), err)
		return
	}
	if env.Owner != cp.owner {
		cp.addOwnerError(&resp.Diagnostics, "Environment", name, env.Owner, "rebuilt")
		return
	}
	coord, prov, err := cp.coordinator(ctx, env.Provider)
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Rebuilding Environment", fmt.Sprintf("environment %q, opening its sandbox provider %q", name, env.Provider), err)
		return
	}
	var m environmentModel
	resp.Diagnostics.Append(m.fromStore(ctx, env, "")...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, _ := m.spec(ctx)
	m.readContext(&spec, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if spec.ContextHash != env.Settings.ContextHash {
		resp.Diagnostics.AddError("Build Context Changed Since Apply",
			fmt.Sprintf("The files of build_context %q of environment %q changed since it was applied, so a rebuild would not build the inputs it was applied with. Apply the configuration instead: that builds the new files.",
				env.Settings.BuildContext, name))
		return
	}
	spec.Rebuild = env.Settings.Rebuild + 1
	env.Settings.Rebuild = spec.Rebuild
	previous := env.SnapshotID
	progress(resp, "environment %q: building the same inputs again (forced build %d; current snapshot %s)", name, spec.Rebuild, previous)
	began := time.Now()
	snap, saveErr, err := coord.Use(ctx, m.buildRequest(spec, prov.ReleaseSnapshot, env.BlockAll), func(snap store.Snapshot) error {
		env.BuildHash, env.SnapshotID = snap.BuildHash, snap.ID
		return cp.store.UpdateEnvironment(ctx, env)
	})
	if err != nil {
		resp.Diagnostics.AddError("Error Starting Snapshot Build", fmt.Sprintf("Environment %q: %s", name, err))
		return
	}
	if saveErr != nil {
		addOperationError(&resp.Diagnostics, "Error Rebuilding Environment", fmt.Sprintf("environment %q, saving its new snapshot %s", name, snap.ID), saveErr)
		return
	}
	progress(resp, "environment %q: now on snapshot %s (%s); %s is a previous version", name, snap.ID, snap.Status, previous)
	if snap.Status != sandbox.StatusReady {
		snap, err = coord.Wait(ctx, snap.ID)
		logBuild(ctx, name, snap, began)
		if err != nil {
			resp.Diagnostics.AddError("Timed Out Waiting For Snapshot", fmt.Sprintf("Environment %q: %s. The build goes on; the environment's status shows its result.", name, err))
			return
		}
	} else {
		logBuild(ctx, name, snap, began)
	}
	if snap.Status == sandbox.StatusFailed {
		resp.Diagnostics.AddError("Snapshot Build Failed",
			fmt.Sprintf("The rebuilt snapshot of environment %q (%s) failed to build: %s.\n\nThe environment now shows it as Failed; apply it (which builds again) or run the action again once the cause is fixed.\n\nBuild log (tail):\n%s",
				name, snap.ID, snap.Reason, snap.LogTail))
		return
	}
	if _, err := coord.Collect(ctx); err != nil {
		resp.Diagnostics.AddWarning("Old Snapshots Not Collected", "Unreferenced snapshots could not all be removed; a later apply retries.\n\n"+err.Error())
	}
	progress(resp, "environment %q: snapshot %s is %s", name, snap.ID, snap.Status)
}

// storedRebuild is how many forced builds the environment named has had (0 when it is
// not in the store): the resource's plan adds it to the spec, so that the hash it
// computes from the configuration is the one the last rebuild built.
func (cp *controlPlane) storedRebuild(ctx context.Context, name string) int64 {
	env, err := cp.store.GetEnvironment(ctx, name)
	if err != nil {
		return 0
	}
	return env.Settings.Rebuild
}
