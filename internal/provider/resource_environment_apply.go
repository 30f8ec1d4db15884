package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func (r *environmentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[environmentModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, _ := withTimeout(ctx, plan.Timeouts.Create, defaultBuildTimeout, &resp.Diagnostics)
	defer cancel()

	name := plan.Name.ValueString()
	if msg := checkNotReserved(name); msg != "" {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Reserved Environment Name", msg)
		return
	}
	coord, prov, err := r.cp.coordinator(ctx, plan.SandboxProvider.ValueString())
	if errors.Is(err, store.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("sandbox_provider"), "Sandbox Provider Not Found",
			fmt.Sprintf("No sandbox provider %q is configured in this control plane. Reference a trueforge_sandbox_provider's name attribute so Terraform creates it first.", plan.SandboxProvider.ValueString()))
		return
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Creating Environment", fmt.Sprintf("environment %q, opening its sandbox provider %q", name, plan.SandboxProvider.ValueString()), err)
		return
	}
	if _, err := r.cp.store.GetEnvironment(ctx, name); err == nil {
		resp.Diagnostics.AddError("Environment Already Exists",
			fmt.Sprintf("Environment %q already exists in this control plane. Import it with `terraform import <address> %s`, or choose another name.", name, name))
		return
	}
	spec, _ := plan.spec(ctx)
	if !plan.applyContext(&spec, &resp.Diagnostics) {
		return
	}
	// Checked at plan time too, unless the provider was created in the same apply: what
	// the backend refuses stops here, before anything is built or stored.
	var checked diag.Diagnostics
	r.cp.checkEnvironment(ctx, prov, plan.environmentSpec(ctx), &checked)
	if checked.HasError() {
		resp.Diagnostics.Append(checked.Errors()...)
		return
	}
	if d := r.checkRefs(ctx, &plan, false); d.HasError() { // volumes and registry (environment_volumes.go)
		resp.Diagnostics.Append(d...)
		return
	}
	blockAll, allow := plan.network(ctx)
	env := store.Environment{
		ID: newID("env"), Name: name, Provider: prov.Name, Owner: r.cp.owner,
		Image: spec.Image, BuildScript: spec.BuildScript, CPU: spec.CPU, MemoryGB: spec.MemoryGB, DiskGB: spec.DiskGB,
		Triggers: spec.Triggers, Env: mapFrom(ctx, plan.Env), BlockAll: blockAll, AllowDomains: allow,
		Settings: plan.settings(ctx, spec), SharedWith: setFrom(ctx, plan.SharedWith),
	}
	began := time.Now()
	snap, saveErr, err := coord.Use(ctx, plan.buildRequest(spec, prov.ReleaseSnapshot, blockAll), func(snap store.Snapshot) error {
		env.BuildHash, env.SnapshotID = snap.BuildHash, snap.ID
		return r.cp.store.CreateEnvironment(ctx, env)
	})
	if err != nil {
		resp.Diagnostics.AddError("Error Starting Snapshot Build", fmt.Sprintf("Environment %q: %s", name, err))
		return
	}
	tflog.Debug(ctx, "environment: snapshot", map[string]any{"environment": name, "snapshot_id": snap.ID, "status": snap.Status, "build_hash": snap.BuildHash})
	if saveErr != nil {
		addOperationError(&resp.Diagnostics, "Error Creating Environment", fmt.Sprintf("environment %q, saving it", name), saveErr)
		return
	}
	plan.ID = types.StringValue(name)
	setNameIdentity(ctx, resp.Identity, plan.ID, &resp.Diagnostics)
	plan.Owner = types.StringValue(r.cp.owner)
	plan.Versions = readVersions(ctx, r.cp.store, name, &resp.Diagnostics) // environment_versions.go
	r.finishBuild(ctx, coord, &plan, snap, began, &resp.State, &resp.Diagnostics)
	r.finishVersions(ctx, &plan, &resp.State, &resp.Diagnostics)
}

// finishBuild saves the state with the snapshot id before waiting (a failed or timed-out
// build then taints or marks the resource instead of losing it), waits when asked, and
// reports a failed build with its reason and log tail. It logs the build's duration
// since began (logBuild).
func (r *environmentResource) finishBuild(ctx context.Context, coord *builds.Coordinator, plan *environmentModel, snap store.Snapshot, began time.Time, state *tfsdk.State, diags *diag.Diagnostics) {
	plan.SnapshotID = types.StringValue(snap.ID)
	plan.BuildHash = types.StringValue(snap.BuildHash)
	plan.Status = types.StringValue(snap.Status)
	diags.Append(state.Set(ctx, plan)...)
	if !plan.WaitForReady.ValueBool() || snap.Status == sandbox.StatusReady {
		logBuild(ctx, plan.Name.ValueString(), snap, began)
		return
	}
	tflog.Debug(ctx, "environment: waiting for the snapshot", map[string]any{"environment": plan.Name.ValueString(), "snapshot_id": snap.ID})
	snap, err := coord.Wait(ctx, snap.ID)
	logBuild(ctx, plan.Name.ValueString(), snap, began)
	plan.Status = types.StringValue(snap.Status)
	diags.Append(state.Set(ctx, plan)...)
	if err != nil {
		diags.AddError("Timed Out Waiting For Snapshot",
			fmt.Sprintf("Environment %q: %s. Raise timeouts, or set wait_for_ready = false to return while it builds.", plan.Name.ValueString(), err))
		return
	}
	if snap.Status == sandbox.StatusFailed {
		diags.AddError("Snapshot Build Failed",
			fmt.Sprintf("The snapshot of environment %q (%s) failed to build: %s.\n\nFix build_script and apply again; the failed build is retried.\n\nBuild log (tail):\n%s",
				plan.Name.ValueString(), snap.ID, snap.Reason, snap.LogTail))
	}
}

func (r *environmentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[environmentModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	env, ok := readNamed(ctx, "Environment", state.ID, r.cp.store.GetEnvironment, resp)
	if !ok {
		return
	}
	status := sandbox.StatusFailed
	coord, prov, err := r.cp.coordinator(ctx, env.Provider)
	switch {
	case err == nil:
		snap, err := coord.Refresh(ctx, env.SnapshotID)
		switch {
		case err == nil:
			status = snap.Status
		case r.cp.remoteSnapshots(prov):
			// A remote API that did not answer (after retries) says nothing about the
			// snapshot: fail the refresh rather than plan a rebuild on a network blip.
			resp.Diagnostics.AddError("Error Reading Environment Snapshot", snapshotReadError(env.Name, env.SnapshotID, err))
			return
		}
	case !errors.Is(err, store.ErrNotFound):
		// The backend cannot be opened here (a CI runner where the local backend cannot
		// run, say): that says nothing about the snapshot either, so fail the refresh
		// with the reason rather than plan a rebuild that is not needed.
		resp.Diagnostics.AddError("Error Reading Environment Snapshot", fmt.Sprintf(
			"Environment %q: its sandbox provider %q could not be opened on this machine, so the plan cannot tell whether snapshot %s needs a rebuild. "+
				"Plan where that backend can run (for the local backend as root: with the subordinate ids of scripts/setup-subids.sh, or as an ordinary user).\n\nOriginal Error: %s",
			env.Name, env.Provider, env.SnapshotID, err))
		return
	}
	before := state
	resp.Diagnostics.Append(state.fromStore(ctx, env, status)...)
	state.Versions = readVersions(ctx, r.cp.store, env.Name, &resp.Diagnostics) // environment_versions.go
	if reflect.DeepEqual(before, state) {
		// resp.State already holds the prior state; encoding it again is the costliest
		// step of a refresh and changes nothing.
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// fromStore sets every attribute the control plane owns, so out-of-band changes show as
// drift. Empty maps and lists keep the representation the configuration used (null or
// empty), which are the same to the product.
func (m *environmentModel) fromStore(ctx context.Context, env store.Environment, status string) diag.Diagnostics {
	m.ID = types.StringValue(env.Name)
	m.Name = types.StringValue(env.Name)
	m.SandboxProvider = types.StringValue(env.Provider)
	m.Image = types.StringValue(env.Image)
	m.BuildScript = types.StringValue(env.BuildScript)
	m.CPU = types.Int64Value(env.CPU)
	m.Memory = types.Int64Value(env.MemoryGB)
	m.Disk = types.Int64Value(env.DiskGB)
	m.Triggers = keepEmptyMap(m.Triggers, env.Triggers)
	m.Env = keepEmptyMap(m.Env, env.Env)
	m.SnapshotID = types.StringValue(env.SnapshotID)
	m.BuildHash = types.StringValue(env.BuildHash)
	m.Status = types.StringValue(status)
	m.Owner = types.StringValue(env.Owner)
	m.SharedWith = stringSet(env.SharedWith)
	m.KeepVersions = types.Int64Value(env.Settings.Keep())
	if m.WaitForReady.IsNull() {
		m.WaitForReady = types.BoolValue(true)
	}
	m.settingsFromStore(env.Settings)
	var diags diag.Diagnostics
	st := env.Settings
	if m.Network.IsNull() && !env.BlockAll && len(env.AllowDomains) == 0 && len(st.AllowCIDRs) == 0 && len(st.PackageIndexes) == 0 {
		return diags
	}
	var prior networkModel
	if !m.Network.IsNull() && !m.Network.IsUnknown() {
		diags.Append(m.Network.As(ctx, &prior, struct{ UnhandledNullAsEmpty, UnhandledUnknownAsEmpty bool }{true, true})...)
	}
	allow := types.ListNull(types.StringType)
	switch {
	case len(env.AllowDomains) > 0:
		allow = stringList(env.AllowDomains)
	case !prior.AllowDomains.IsNull() && !prior.AllowDomains.IsUnknown():
		allow = stringList(nil) // the configuration said [] rather than leaving it out
	}
	obj, d := types.ObjectValue(networkAttrTypes, map[string]attr.Value{
		"block_all":          types.BoolValue(env.BlockAll),
		"allow_domains":      allow,
		"allow_cidrs":        keepEmptyList(prior.AllowCIDRs, st.AllowCIDRs),
		"package_indexes":    keepEmptyList(prior.PackageIndexes, st.PackageIndexes),
		"package_indexes_in": packageIndexesIn(prior.PackageIndexesIn, st.PackageIndexesIn),
	})
	diags.Append(d...)
	m.Network = obj
	return diags
}

func keepEmptyMap(prior types.Map, m map[string]string) types.Map {
	if len(m) == 0 && !prior.IsNull() && !prior.IsUnknown() && len(prior.Elements()) == 0 {
		return prior
	}
	return stringMap(m)
}

func (r *environmentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan, state, ok := decodeChange[environmentModel](ctx, r.cp, req.Plan.Get, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, _ := withTimeout(ctx, plan.Timeouts.Update, defaultBuildTimeout, &resp.Diagnostics)
	defer cancel()

	name := state.ID.ValueString()
	env, err := r.cp.store.GetEnvironment(ctx, name)
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Environment", fmt.Sprintf("environment %q", name), err)
		return
	}
	if env.Owner != r.cp.owner {
		r.cp.addOwnerError(&resp.Diagnostics, "Environment", name, env.Owner, "changed")
		return
	}
	coord, prov, err := r.cp.coordinator(ctx, env.Provider)
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Environment", fmt.Sprintf("environment %q, opening its sandbox provider %q", name, env.Provider), err)
		return
	}
	if d := r.checkRefs(ctx, &plan, false); d.HasError() { // volumes and registry (environment_volumes.go)
		resp.Diagnostics.Append(d...)
		return
	}
	spec, _ := plan.spec(ctx)
	spec.Rebuild = env.Settings.Rebuild // the forced builds so far stay in the hash (action_environment_rebuild.go)
	blockAll, allow := plan.network(ctx)
	env.Env, env.BlockAll, env.AllowDomains = mapFrom(ctx, plan.Env), blockAll, allow
	env.SharedWith = setFrom(ctx, plan.SharedWith)
	settings := plan.settings(ctx, spec)
	plan.ID, plan.Owner = state.ID, state.Owner
	setNameIdentity(ctx, resp.Identity, plan.ID, &resp.Diagnostics)

	if !plan.SnapshotID.IsUnknown() && plan.SnapshotID.Equal(state.SnapshotID) {
		// Only live attributes changed: the snapshot stays, nothing is built, and the
		// build inputs stay those of that snapshot. (A known snapshot that differs is a
		// kept version reverted to: below, Use finds it Ready and builds nothing.)
		settings.ContextHash = env.Settings.ContextHash
		env.Settings = settings
		if err := r.cp.store.UpdateEnvironment(ctx, env); err != nil {
			addOperationError(&resp.Diagnostics, "Error Updating Environment", fmt.Sprintf("environment %q, saving its live settings", name), err)
			return
		}
		keepChanged := plan.Versions.IsUnknown() // which versions are kept changed
		if keepChanged {
			plan.Versions = readVersions(ctx, r.cp.store, name, &resp.Diagnostics)
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		if keepChanged {
			r.collect(ctx, coord, &resp.Diagnostics) // the versions no longer kept
		}
		return
	}
	if !plan.applyContext(&spec, &resp.Diagnostics) {
		return
	}
	settings.ContextHash = spec.ContextHash
	env.Settings = settings
	env.Image, env.BuildScript, env.CPU, env.MemoryGB, env.DiskGB, env.Triggers = spec.Image, spec.BuildScript, spec.CPU, spec.MemoryGB, spec.DiskGB, spec.Triggers
	began := time.Now()
	snap, saveErr, err := coord.Use(ctx, plan.buildRequest(spec, prov.ReleaseSnapshot, blockAll), func(snap store.Snapshot) error {
		env.BuildHash, env.SnapshotID = snap.BuildHash, snap.ID
		return r.cp.store.UpdateEnvironment(ctx, env)
	})
	if err != nil {
		resp.Diagnostics.AddError("Error Starting Snapshot Build", fmt.Sprintf("Environment %q: %s", name, err))
		return
	}
	if saveErr != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Environment", fmt.Sprintf("environment %q, saving its new snapshot %s", name, snap.ID), saveErr)
		return
	}
	plan.Versions = readVersions(ctx, r.cp.store, name, &resp.Diagnostics) // environment_versions.go
	r.finishBuild(ctx, coord, &plan, snap, began, &resp.State, &resp.Diagnostics)
	r.collect(ctx, coord, &resp.Diagnostics)
	r.finishVersions(ctx, &plan, &resp.State, &resp.Diagnostics)
}

// collect removes snapshots nothing refers to any more; failing to is worth a warning,
// not a failed apply.
func (r *environmentResource) collect(ctx context.Context, coord *builds.Coordinator, diags *diag.Diagnostics) {
	if _, err := coord.Collect(ctx); err != nil {
		diags.AddWarning("Old Snapshots Not Collected", "Unreferenced snapshots could not all be removed; a later apply retries.\n\n"+err.Error())
	}
}

func (r *environmentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[environmentModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, timeout := withTimeout(ctx, state.Timeouts.Delete, defaultDeleteTimeout, &resp.Diagnostics)
	defer cancel()

	name := state.ID.ValueString()
	env, err := r.cp.store.GetEnvironment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if timedOut(ctx, err) {
		addTimeoutError(&resp.Diagnostics, "Timed Out Deleting Environment", "delete", timeout,
			fmt.Sprintf("Deleting environment %q", name), "Nothing was deleted. Raise timeouts.delete and run the command again.", err)
		return
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Deleting Environment", fmt.Sprintf("environment %q", name), err)
		return
	}
	if env.Reserved {
		resp.Diagnostics.AddError("Reserved Environment", checkNotReserved(name))
		return
	}
	if env.Owner != r.cp.owner {
		r.cp.addOwnerError(&resp.Diagnostics, "Environment", name, env.Owner, "deleted")
		return
	}
	err = r.cp.store.DeleteEnvironment(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return
	case errors.Is(err, store.ErrInUse):
		resp.Diagnostics.AddError("Environment In Use",
			fmt.Sprintf("%s. An environment referenced by a saved agent cannot be deleted: point those agents at another environment (or delete them) first.", err))
		return
	case timedOut(ctx, err):
		addTimeoutError(&resp.Diagnostics, "Timed Out Deleting Environment", "delete", timeout,
			fmt.Sprintf("Deleting environment %q", name), "Nothing was deleted. Raise timeouts.delete and run the command again.", err)
		return
	case err != nil:
		addOperationError(&resp.Diagnostics, "Error Deleting Environment", fmt.Sprintf("environment %q", name), err)
		return
	}
	tflog.Info(ctx, "environment: deleted", map[string]any{"environment": name, "sandbox_provider": env.Provider})
	coord, _, err := r.cp.coordinator(ctx, env.Provider)
	if err != nil {
		return
	}
	// The snapshot cleanup is what can take long (on Daytona a busy snapshot's delete is
	// retried for minutes). Running out of timeouts.delete there fails the delete, since
	// the user bounded it, but says that the environment itself is gone: the next refresh
	// drops it from state, and a later update or delete collects what was left.
	removed, err := coord.Collect(ctx)
	tflog.Debug(ctx, "environment: unreferenced snapshots collected", map[string]any{"environment": name, "removed": removed, "error": errString(err)})
	switch {
	case err == nil:
	case timedOut(ctx, err):
		addTimeoutError(&resp.Diagnostics, "Timed Out Deleting Environment", "delete", timeout,
			fmt.Sprintf("Environment %q was removed from the control plane, but removing its unreferenced snapshots from sandbox provider %q", name, env.Provider),
			fmt.Sprintf("The snapshots left behind are collected by the next apply that updates or deletes an environment of %q. "+
				"If the backend is slow to release snapshots, raise timeouts.delete (for example \"45m\"); running the command again finishes the destroy.", env.Provider), err)
	default:
		resp.Diagnostics.AddWarning("Old Snapshots Not Collected", "Unreferenced snapshots could not all be removed; a later apply retries.\n\n"+err.Error())
	}
}

// errString is err's message, or "" for nil: a log field.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (r *environmentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if importedName(ctx, req, &resp.Diagnostics) == defaultEnvironmentName {
		resp.Diagnostics.AddError("Reserved Environment",
			"The default environment belongs to the sandbox provider and cannot be managed as a trueforge_environment. Read it with the trueforge_environment data source.")
		return
	}
	importByName(ctx, req, resp)
}
