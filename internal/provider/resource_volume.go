package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// defaultVolumeTimeout bounds creating and deleting a volume: Daytona makes a volume
// ready in seconds, but its client retries a busy API for minutes.
const defaultVolumeTimeout = 10 * time.Minute

type volumeResource struct{ namedResource }

type volumeResourceModel struct {
	ID              types.String   `tfsdk:"id"`
	Name            types.String   `tfsdk:"name"`
	SandboxProvider types.String   `tfsdk:"sandbox_provider"`
	RemoteID        types.String   `tfsdk:"remote_id"`
	Size            types.Int64    `tfsdk:"size"`
	SharedWith      types.Set      `tfsdk:"shared_with"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

// sharedWith is the model's shared_with as a list (nil for none).
func (m volumeResourceModel) sharedWith(ctx context.Context, diags *diag.Diagnostics) []string {
	var out []string
	if !m.SharedWith.IsNull() && !m.SharedWith.IsUnknown() {
		diags.Append(m.SharedWith.ElementsAs(ctx, &out, false)...)
	}
	return out
}

// NewVolumeResource is the trueforge_volume resource.
func NewVolumeResource() resource.Resource { return &volumeResource{named("volume")} }

func (r *volumeResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A volume of a sandbox provider: files that outlive sandboxes, mounted read-write by every sandbox of the environments " +
			"that list it in `volumes` (so two sessions' sandboxes share them). On the `local` backend it is a directory under the control plane's " +
			"data directory (`<data dir>/local-backend/volumes/<name>`, or under the shared snapshot directory), owned by the user running Terraform " +
			"and shown to each sandbox as its own user's (what a sandbox writes there is stored as that user, so the `volumes` folder is that " +
			"user's alone, mode 0700: no other user of the host can reach a file a sandbox left there); on `daytona` it is a Daytona volume named `trueforge-<name>` (S3-backed), created ready " +
			"before apply finishes. Only environments of the volume's owner may mount it, unless the owner shares it (`shared_with`): the provider " +
			"refuses others at plan, the harness refuses to provision their sandboxes and, on PostgreSQL, the database refuses to store an environment " +
			"that mounts a volume its owner may not use. Deleting a volume that an environment (any team's) lists is refused, naming the environments; deleting it " +
			"deletes its files. To retire a volume, remove it from the environments' `volumes` and apply, then remove the volume: Terraform " +
			"deletes a resource before it updates those that referenced it, so both in one apply are refused. An environment may list at most " +
			fmt.Sprint(sandbox.MaxVolumes) + " volumes. Import with the name.",
		Attributes: map[string]schema.Attribute{
			"name":             replacingString("Name of the volume, unique in the control plane: "+sandbox.VolumeNameRule+". Changing it replaces the volume (and loses its files).", validName()),
			"sandbox_provider": replacingString("Name of the `trueforge_sandbox_provider` that keeps the volume; only environments of this provider may mount it. Changing it replaces the volume.", validName()),
			"id":               keptString("The volume's name."),
			"remote_id":        keptString("The backend's id of the volume: Daytona's volume id, or the local backend's directory name."),
			"size": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("Size of the volume in GB (%d to %d, default %d): what sandboxes may write into it. On the `local` backend, "+
					"run as root with e2fsprogs, the volume is an ext4 image of that size (sparse: it takes on the host what was written), loop-mounted at "+
					"its directory, so a write past it fails with \"No space left on device\" inside the sandbox and the host filesystem is not filled. "+
					"Unprivileged, or with the volumes on a shared snapshot directory, it cannot be enforced: plan warns, and with the sandbox provider's "+
					"`require_limits` the volume is refused. Daytona volumes have no size (S3-backed; its API takes none): the size is recorded, not sent, "+
					"and plan warns when it is set. Growing it is done in place (on `local`, online while sandboxes mount it where the host lets root resize "+
					"a mounted filesystem, else once they are stopped); shrinking it replaces the volume, and loses its files.",
					store.MinVolumeSizeGB, store.MaxVolumeSizeGB, store.DefaultVolumeSizeGB),
				Optional:      true,
				Computed:      true,
				Default:       int64default.StaticInt64(store.DefaultVolumeSizeGB),
				Validators:    []validator.Int64{int64validator.Between(store.MinVolumeSizeGB, store.MaxVolumeSizeGB)},
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplaceIf(volumeShrinks, shrinkDoc, shrinkDoc)},
			},
			"shared_with": schema.SetAttribute{
				MarkdownDescription: "Owners, besides the volume's own, whose environments may mount it: exact owner names (PostgreSQL role names, or " +
					"SQLite owner names), or `\"*\"` for every owner; at most " + fmt.Sprint(maxSharedWith) + ". Default: none, only the owner's environments. Removing an owner from the list " +
					"is live: from then on the harness refuses to provision a sandbox of that owner's environments that mounts the volume (the " +
					"environment stays, and any change to it is refused, by plan and on PostgreSQL by the database, until it drops the volume), and a " +
					"session's sandbox that already mounts it is not used again (the session's next tool call is refused). A volume still listed by such an environment cannot be deleted until " +
					"that environment drops it.",
				Optional:    true,
				Computed:    true,
				ElementType: types.StringType,
				Default:     setdefault.StaticValue(types.SetValueMust(types.StringType, nil)),
				Validators: []validator.Set{
					setvalidator.SizeAtMost(maxSharedWith),
					setvalidator.ValueStringsAre(stringCheck{"an owner name or \"*\"", checkSharedWithEntry}), // shared_with.go
				},
			},
			"timeouts": timeoutsAttribute(ctx, "How long apply waits for the volume's backend.", map[string]string{
				"create": "How long creating the volume (until it can be mounted) may take. Defaults to 10 minutes.",
				"update": "How long growing the volume may take. Defaults to 10 minutes.",
				"delete": "How long deleting the volume may take. Defaults to 10 minutes.",
			}),
		},
	}
}

// ModifyPlan refuses at plan what apply would: another owner's volume, and warns when a
// volume planned for deletion is still listed by environments (unless this apply
// removes it from them first, the delete fails).
func (r *volumeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.cp == nil || req.Plan.Raw.Equal(req.State.Raw) {
		return
	}
	if req.Plan.Raw.IsNull() {
		volumeKind.planDelete(ctx, r.cp, req.State, &resp.Diagnostics)
		return
	}
	var plan volumeResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.Name.IsUnknown() {
		return
	}
	var prior *volumeResourceModel
	if !req.State.Raw.IsNull() {
		prior = new(volumeResourceModel)
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
		if volumeKind.refuseOthers(ctx, r.cp, prior.ID.ValueString(), "changed", &resp.Diagnostics) {
			return
		}
	}
	r.checkSize(ctx, req, plan, prior, &resp.Diagnostics)
	plan.ID = types.StringValue(plan.Name.ValueString())
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// volumeKind is what the volume's plan and Delete share with the registry's.
var volumeKind = backedKind{kind: "Volume", owner: ownerBy((*store.Store).GetVolume, volumeOwner),
	deleteRow: (*store.Store).DeleteVolume, users: (*store.Store).EnvironmentsUsingVolume,
	usedAs:    "listed in the volumes of",
	stillUsed: "Volume Still Mounted By Environments",
	planNext:  "Unless this apply removes it from them first, deleting it will fail. Remove the volume from those environments' volumes, then delete it.",
	fix:       "Remove it from those environments' volumes",
	again:     "Apply again once its sandboxes are gone.",
}

func volumeOwner(v store.Volume) string { return v.Owner }

const shrinkDoc = "Shrinking a volume replaces it, and its files are lost; growing it is in place."

// volumeShrinks: a smaller size replaces the volume (no backend shrinks a filesystem
// that holds files safely); a larger one is grown in place (Update).
func volumeShrinks(_ context.Context, req planmodifier.Int64Request, resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = !req.StateValue.IsNull() && !req.PlanValue.IsUnknown() && req.PlanValue.ValueInt64() < req.StateValue.ValueInt64()
}

// checkSize adds the backend's findings about the planned size (sandbox.VolumeChecker)
// when the volume is created or its size changes: on local, whether this host can keep
// the volume to it; on Daytona, that it has no size (only when size is set).
func (r *volumeResource) checkSize(ctx context.Context, req resource.ModifyPlanRequest, plan volumeResourceModel, prior *volumeResourceModel, diags *diag.Diagnostics) {
	if plan.Size.IsUnknown() || plan.SandboxProvider.IsUnknown() || (prior != nil && prior.Size.Equal(plan.Size)) {
		return
	}
	p, err := r.cp.store.GetSandboxProvider(ctx, plan.SandboxProvider.ValueString())
	if err != nil {
		return // the provider is created by this apply, or its absence is reported at apply
	}
	b, err := r.cp.backend(p)
	if err != nil {
		return
	}
	vc, ok := b.(sandbox.VolumeChecker)
	if !ok {
		return
	}
	if !b.Info().Capabilities.HostLimits {
		// A backend that keeps no volume on a host of ours (Daytona) has only a
		// warning to give, and only for a size the configuration asked for.
		var configured types.Int64
		diags.Append(req.Config.GetAttribute(ctx, path.Root("size"), &configured)...)
		if configured.IsNull() {
			return
		}
	}
	settings, err := r.cp.settings(ctx, p)
	if err != nil {
		addOperationError(diags, "Control Plane Unavailable", fmt.Sprintf("volume %q", plan.Name.ValueString()), err)
		return
	}
	addProblems(diags, vc.CheckVolume(ctx, settings, plan.Name.ValueString(), plan.Size.ValueInt64()))
}

// volumes opens the volume store of the named sandbox provider.
func (r *volumeResource) volumes(ctx context.Context, providerName string, diags *diag.Diagnostics) (sandbox.VolumeStore, string) {
	b, cfg, ok := r.cp.openProvider(ctx, providerName, diags)
	if !ok {
		return nil, ""
	}
	vs, err := b.Volumes(ctx, cfg)
	if err != nil {
		diags.AddAttributeError(path.Root("sandbox_provider"), "Volumes Not Available",
			fmt.Sprintf("Sandbox provider %q (%s) cannot keep volumes: %s", providerName, b.Info().Title, err))
		return nil, ""
	}
	return vs, b.Info().Title
}

func (r *volumeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[volumeResourceModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, timeout := withTimeout(ctx, plan.Timeouts.Create, defaultVolumeTimeout, &resp.Diagnostics)
	defer cancel()

	name, providerName := plan.Name.ValueString(), plan.SandboxProvider.ValueString()
	// A volume kept in the store whose backend volume is gone (deleted outside
	// Terraform; Read dropped it from state) is made again under the same row.
	existing, err := r.cp.store.GetVolume(ctx, name)
	switch {
	case err == nil && (existing.Owner != r.cp.owner || existing.Provider != providerName):
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Volume Already Exists",
			fmt.Sprintf("A volume %q of sandbox provider %q, owned by %q, already exists. Choose another name, or import it with `terraform import <address> %s`.",
				name, existing.Provider, existing.Owner, name))
		return
	case err != nil && !errors.Is(err, store.ErrNotFound):
		addOperationError(&resp.Diagnostics, "Error Reading Volume", fmt.Sprintf("volume %q", name), err)
		return
	}
	vs, title := r.volumes(ctx, providerName, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if err == nil && existing.RemoteID != "" {
		if v, gerr := vs.Get(ctx, existing.RemoteID); gerr == nil && v != nil {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Volume Already Exists",
				fmt.Sprintf("Volume %q already exists. Import it with `terraform import <address> %s`.", name, name))
			return
		}
	}
	size := plan.Size.ValueInt64()
	shared := plan.sharedWith(ctx, &resp.Diagnostics)
	v, cerr := vs.Create(ctx, sandbox.VolumeSpec{Name: name, SizeMB: size * 1024})
	if timedOut(ctx, cerr) {
		addTimeoutError(&resp.Diagnostics, "Timed Out Creating Volume", "create", timeout,
			fmt.Sprintf("Creating volume %q in %s", name, title), "Nothing was stored in trueforge. Raise timeouts.create and apply again.", cerr)
		return
	}
	if cerr != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Error Creating %s Volume", title),
			fmt.Sprintf("Volume %q could not be created in %s; nothing was stored. Apply again.\n\nOriginal Error: %s", name, title, cerr))
		return
	}
	tflog.Debug(ctx, "volume: created in the backend", map[string]any{"volume": name, "backend": title, "remote_id": v.ID})
	if err == nil {
		if err = r.cp.store.SetVolumeRemoteID(ctx, name, v.ID); err == nil {
			err = r.cp.store.UpdateVolume(ctx, name, size, shared)
		}
	} else {
		err = r.cp.store.CreateVolume(ctx, store.Volume{Name: name, Provider: providerName, Owner: r.cp.owner, RemoteID: v.ID, SizeGB: size, SharedWith: shared})
	}
	if err != nil {
		_ = vs.Delete(context.WithoutCancel(ctx), v.ID)
		if errors.Is(err, store.ErrAlreadyExists) {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Volume Already Exists",
				fmt.Sprintf("Volume %q already exists. Import it with `terraform import <address> %s`.", name, name))
			return
		}
		addOperationError(&resp.Diagnostics, "Error Creating Volume", fmt.Sprintf("volume %q, saving it", name), err)
		return
	}
	plan.ID, plan.RemoteID = types.StringValue(name), types.StringValue(v.ID)
	setNamed(ctx, &resp.State, resp.Identity, plan.ID, &plan, &resp.Diagnostics)
}

// Read refreshes the volume from the store and its backend (one read). A volume deleted
// in the backend outside Terraform leaves the state, with a warning, so that the plan
// creates it again (empty).
func (r *volumeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[volumeResourceModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	name := state.ID.ValueString()
	v, ok := readNamed(ctx, "Volume", state.ID, r.cp.store.GetVolume, resp)
	if !ok {
		return
	}
	vs, title := r.volumes(ctx, v.Provider, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	remote, ok := readRemote(ctx, "Volume", title, name, v.RemoteID, vs.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	if remote == nil {
		resp.Diagnostics.AddWarning(fmt.Sprintf("%s Volume Deleted Outside Terraform", title),
			fmt.Sprintf("The %s volume of %q (id %q) no longer exists, and its files with it. The plan creates it again, empty.", title, name, v.RemoteID))
		resp.State.RemoveResource(ctx)
		return
	}
	state.ID, state.Name = types.StringValue(v.Name), types.StringValue(v.Name)
	state.SandboxProvider, state.RemoteID = types.StringValue(v.Provider), types.StringValue(v.RemoteID)
	state.Size = types.Int64Value(v.SizeGB)
	state.SharedWith = stringSet(v.SharedWith)
	setNamed(ctx, &resp.State, resp.Identity, state.ID, &state, &resp.Diagnostics)
}

// Update grows the volume (a smaller size replaces it) and changes whom it is shared
// with. The backend grows first, then the store records it, so the recorded size never
// exceeds what the backend gives; unsharing takes effect in the store at once (the
// harness reads it when it provisions a sandbox).
func (r *volumeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan, ok := decode[volumeResourceModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	var state volumeResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	ctx, cancel, _ := withTimeout(ctx, plan.Timeouts.Update, defaultVolumeTimeout, &resp.Diagnostics)
	defer cancel()
	if resp.Diagnostics.HasError() {
		return
	}

	name := state.ID.ValueString()
	v, ok := ownedNamed(ctx, r.cp, "Volume", name, "changed", r.cp.store.GetVolume, volumeOwner, &resp.Diagnostics)
	if !ok {
		return
	}
	size := plan.Size.ValueInt64()
	if size > v.SizeGB {
		vs, title := r.volumes(ctx, v.Provider, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		if g, ok := vs.(sandbox.VolumeResizer); ok {
			if err := g.Grow(ctx, v.RemoteID, size*1024); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("size"), fmt.Sprintf("Error Growing %s Volume", title),
					fmt.Sprintf("Volume %q could not grow from %d to %d GB; it keeps %d GB and nothing was changed.\n\nOriginal Error: %s", name, v.SizeGB, size, v.SizeGB, err))
				return
			}
		}
	}
	if err := r.cp.store.UpdateVolume(ctx, name, size, plan.sharedWith(ctx, &resp.Diagnostics)); err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Volume", fmt.Sprintf("volume %q", name), err)
		return
	}
	plan.ID, plan.RemoteID = state.ID, state.RemoteID
	setNamed(ctx, &resp.State, resp.Identity, plan.ID, &plan, &resp.Diagnostics)
}

// Delete removes the volume from the store first, in the transaction that checks no
// environment lists it, then from its backend; when the backend refuses (a sandbox
// still mounts it), the row is put back.
func (r *volumeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[volumeResourceModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, timeout := withTimeout(ctx, state.Timeouts.Delete, defaultVolumeTimeout, &resp.Diagnostics)
	defer cancel()

	name := state.ID.ValueString()
	v, ok := ownedNamed(ctx, r.cp, "Volume", name, "deleted", r.cp.store.GetVolume, volumeOwner, &resp.Diagnostics)
	if !ok {
		return
	}
	vs, title := r.volumes(ctx, v.Provider, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if volumeKind.delete(ctx, r.cp, name, title, timeout, func(ctx context.Context) error { return vs.Delete(ctx, v.RemoteID) },
		func(ctx context.Context) error { return r.cp.store.CreateVolume(ctx, v) }, &resp.Diagnostics) {
		tflog.Debug(ctx, "volume: deleted", map[string]any{"volume": name, "backend": title})
	}
}
