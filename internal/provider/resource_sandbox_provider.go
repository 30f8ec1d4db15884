package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// defaultEnvironmentName is the reserved environment every provider creates, the one an
// agent's sandbox is cloned from unless it names another.
const defaultEnvironmentName = agentspec.DefaultEnvironment

// defaultSpec is the reserved environment's blueprint: platform image, 1 CPU, 1 GB, 3 GB.
var defaultSpec = sandbox.SnapshotSpec{Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3}

const defaultBuildTimeout = 30 * time.Minute

// statusDegraded is a provider whose reserved default environment is gone (or, on
// Daytona, whose snapshot was deleted or deactivated there).
const statusDegraded = "Degraded"

type sandboxProviderResource struct{ namedResource }

type sandboxProviderModel struct {
	ID                 types.String   `tfsdk:"id"`
	Name               types.String   `tfsdk:"name"`
	Type               types.String   `tfsdk:"type"`
	APIURL             types.String   `tfsdk:"api_url"`
	APIKey             types.String   `tfsdk:"api_key"`
	APIKeyWO           types.String   `tfsdk:"api_key_wo"`
	APIKeyWOVersion    types.Int64    `tfsdk:"api_key_wo_version"`
	Target             types.String   `tfsdk:"target"`
	Scopes             types.List     `tfsdk:"scopes"`
	ReleaseSnapshot    types.String   `tfsdk:"release_snapshot"`
	DefaultEnvironment types.String   `tfsdk:"default_environment"`
	Status             types.String   `tfsdk:"status"`
	RequireLimits      types.Bool     `tfsdk:"require_limits"`
	Timeouts           timeouts.Value `tfsdk:"timeouts"`
}

// NewSandboxProviderResource is the trueforge_sandbox_provider resource.
func NewSandboxProviderResource() resource.Resource {
	return &sandboxProviderResource{named("sandbox provider")}
}

// apiKeyCredential is the backend's API key: api_key, or api_key_wo with api_key_wo_version.
var apiKeyCredential = credential{
	name: "api_key",
	plainDoc: "API key of the backend (stored sealed with AES-GCM, never in plaintext). Prefer `api_key_wo`, which keeps " +
		"the key out of state. Changing it re-validates the key.",
	woDoc:           "Write-only API key (Terraform 1.11 or later): never stored in state or plan. Increment `api_key_wo_version` to send a new key.",
	versionDoc:      "Version of `api_key_wo`; change it to rotate the key.",
	plainValidators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("api_key_wo"))},
}

func (r *sandboxProviderResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The sandbox backend of this control plane (one per control plane). Creating it validates the " +
			"credentials, builds the **release snapshot** every other snapshot starts from, and creates the reserved " +
			"`default` environment (platform image, 1 CPU, 1 GB memory, 3 GB disk). For `daytona`, the API key must carry " +
			"the `write:sandboxes`, `write:snapshots` and `manage:secrets` scopes, or saving fails and nothing is stored.",
		Attributes: map[string]schema.Attribute{
			"api_url": schema.StringAttribute{
				MarkdownDescription: "API endpoint of the backend. Defaults to the catalog's URL for the type; not used by `local`.",
				Optional:            true,
			},
			"default_environment": keptString("Name of the reserved environment created with the provider: always `default`."),
			"id":                  keptString("The provider's name."),
			"name":                replacingString("Name of the sandbox provider. Changing it replaces the provider.", validName()),
			"release_snapshot":    keptString("The release snapshot built when the provider was configured; every environment snapshot starts from it."),
			"require_limits": schema.BoolAttribute{
				MarkdownDescription: "`local` only: refuse to run a sandbox whose `cpu`, `memory` or `disk` this host cannot enforce, instead of " +
					"running it with the limits that can be (as rootless container engines do: a user without a writable cgroup gets rlimits, " +
					"which cannot limit CPU and limit memory per process and disk per file only). When unset, limits are required when the " +
					"process that checks them runs as root (Terraform at plan time, `trueforge-harness` when it creates a sandbox) and not " +
					"otherwise. Either way, plan warns (or, when required, fails) when the limits cannot be enforced, and each sandbox's " +
					"`sandbox_provisioned` event records the limits it runs without.",
				Optional: true,
			},
			"scopes": schema.ListAttribute{
				MarkdownDescription: "Scopes the credentials grant, as reported by the backend.",
				Computed:            true,
				ElementType:         types.StringType,
			},
			"status": schema.StringAttribute{
				MarkdownDescription: "`Ready` once the release snapshot and the `default` environment are built; `Degraded` when the `default` environment (or, on Daytona, its snapshot) was removed outside Terraform, which the next apply repairs.",
				Computed:            true,
			},
			"target": schema.StringAttribute{
				MarkdownDescription: "Backend target (Daytona region) where sandboxes and snapshots are placed.",
				Optional:            true,
			},
			"type": replacingString("Backend type from the built-in catalog: `local` (embedded, this Linux machine) or `daytona`. Changing it replaces the provider.", stringvalidator.OneOf(backends.Default().Types()...)),
			"timeouts": timeoutsAttribute(ctx, "How long apply waits for this sandbox provider's operations.", map[string]string{
				"create": "How long creating the provider waits for the release snapshot and the `default` environment's build. Defaults to 30 minutes.",
				"update": "How long an update (a new key, or a repair of the `default` environment) may take. Defaults to 30 minutes.",
				"delete": "How long deleting the provider may take, removing its snapshots from the backend included. Defaults to 20 minutes.",
			}),
		},
	}
	apiKeyCredential.addAttributes(resp.Schema.Attributes)
}

func (r *sandboxProviderResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m sandboxProviderModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Type.IsUnknown() || m.Type.IsNull() {
		return
	}
	registry := backends.Default() // validation may come before Configure
	if r.cp != nil {
		registry = r.cp.backends
	}
	b, err := registry.Get(m.Type.ValueString())
	if err != nil {
		return // the OneOf validator reports it
	}
	info := b.Info()
	if !m.RequireLimits.IsNull() && !info.Capabilities.HostLimits {
		var local []string
		for _, t := range registry.Types() {
			if b, _ := registry.Get(t); b.Info().Capabilities.HostLimits {
				local = append(local, t)
			}
		}
		resp.Diagnostics.AddAttributeError(path.Root("require_limits"), "Attribute Not Supported By Type",
			fmt.Sprintf("require_limits configures the backends that enforce sandbox limits on this host (%s); type %q gives every "+
				"sandbox exactly its snapshot's resources. Remove require_limits.", strings.Join(local, ", "), info.Type))
	}
	if info.NeedsAPIKey && m.APIKey.IsNull() && m.APIKeyWO.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("api_key"), "Missing API Key",
			fmt.Sprintf("Type %q needs an API key. Set api_key_wo (with api_key_wo_version) or api_key.", info.Type))
	}
}

// ModifyPlan plans a repair when refresh found the provider degraded (its reserved
// default environment was removed outside Terraform); Update recreates what is missing.
// For a provider being created, or whose require_limits changes, it says what its
// backend would refuse or not honour about the default environment (CheckEnvironment:
// on the local backend, whether sandboxes get their limits on this host).
func (r *sandboxProviderResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.refuseOthers(ctx, req, &resp.Diagnostics) || req.Plan.Raw.IsNull() {
		return
	}
	r.checkDefaultEnvironment(ctx, req, resp)
	if req.State.Raw.IsNull() {
		return
	}
	var status types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("status"), &status)...)
	if status.IsNull() || status.ValueString() == sandbox.StatusReady {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("status"), types.StringUnknown())...)
	resp.Diagnostics.AddWarning("Sandbox Provider Will Be Repaired",
		fmt.Sprintf("Sandbox provider status is %q: its reserved default environment is missing. Apply recreates it.", status.ValueString()))
}

// refuseOthers refuses to plan a change or deletion of another role's sandbox provider
// where the database enforces ownership (controlPlane.refuseOthers). The provider's
// owner is not an attribute: it is read from the store, only there.
func (r *sandboxProviderResource) refuseOthers(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics) bool {
	if r.cp == nil || !r.cp.store.Shared() || req.State.Raw.IsNull() || req.Plan.Raw.Equal(req.State.Raw) {
		return false
	}
	var name types.String
	diags.Append(req.State.GetAttribute(ctx, path.Root("name"), &name)...)
	p, err := r.cp.store.GetSandboxProvider(ctx, name.ValueString())
	if err != nil {
		return false // gone: Read plans it away; anything else surfaces where it is used
	}
	return r.cp.refuseOthers(req, "Sandbox Provider", p.Name, p.Owner, diags)
}

// checkDefaultEnvironment adds the backend's findings about the default environment
// when the provider is created or its require_limits changes.
func (r *sandboxProviderResource) checkDefaultEnvironment(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.cp == nil {
		return
	}
	var typ, name types.String
	var require types.Bool
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("type"), &typ)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("require_limits"), &require)...)
	if resp.Diagnostics.HasError() || typ.IsUnknown() || name.IsUnknown() || require.IsUnknown() {
		return
	}
	if !req.State.Raw.IsNull() {
		var prior types.Bool
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("require_limits"), &prior)...)
		if prior.Equal(require) {
			return
		}
	}
	p := store.SandboxProvider{Name: name.ValueString(), Type: typ.ValueString(), RequireLimits: boolPointer(require)}
	r.cp.checkEnvironment(ctx, p, sandbox.EnvironmentSpec{Name: defaultEnvironmentName, Spec: defaultSpec}, &resp.Diagnostics)
}

func (r *sandboxProviderResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[sandboxProviderModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, _ := withTimeout(ctx, plan.Timeouts.Create, defaultBuildTimeout, &resp.Diagnostics)
	defer cancel()

	name := plan.Name.ValueString()
	if existing, err := r.cp.store.OnlySandboxProvider(ctx); err == nil {
		resp.Diagnostics.AddError("Sandbox Provider Already Configured",
			fmt.Sprintf("This control plane already has sandbox provider %q (type %s), and a control plane has exactly one. "+
				"Import it with `terraform import <address> %s`, or point database_url at another control plane.", existing.Name, existing.Type, existing.Name))
		return
	}
	p := store.SandboxProvider{
		Name: name, Type: plan.Type.ValueString(), APIURL: plan.APIURL.ValueString(), Target: plan.Target.ValueString(),
		Owner: r.cp.owner, Status: sandbox.StatusBuilding, RequireLimits: boolPointer(plan.RequireLimits),
	}
	// Credentials are checked before anything is stored, so a key lacking a scope leaves
	// nothing behind.
	scopes, keyEnc, ok := r.validateCredentials(ctx, &p, req.Config, &plan, &resp.Diagnostics)
	if !ok {
		return
	}
	p.Scopes, p.APIKeyEnc = scopes, keyEnc
	tflog.Debug(ctx, "sandbox provider: credentials checked", map[string]any{"name": name, "type": p.Type, "scopes": scopes})
	builder, err := r.cp.builder(ctx, p)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("type"), "Sandbox Provider Type Not Available", err.Error())
		return
	}
	release, err := builder.PrepareRelease(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Error Building Release Snapshot",
			fmt.Sprintf("While configuring sandbox provider %q, the release snapshot could not be built; nothing was stored.\n\nOriginal Error: %s", name, err))
		return
	}
	p.ReleaseSnapshot = release
	tflog.Debug(ctx, "sandbox provider: release snapshot ready", map[string]any{"name": name, "release_snapshot": release})
	if err := r.cp.store.CreateSandboxProvider(ctx, p); err != nil {
		resp.Diagnostics.AddError("Error Saving Sandbox Provider", fmt.Sprintf("Sandbox provider %q could not be stored.\n\nOriginal Error: %s", name, err))
		return
	}
	if err := r.cp.store.RegisterReleaseSnapshot(ctx, name, release); err != nil {
		resp.Diagnostics.AddError("Error Saving Sandbox Provider", fmt.Sprintf("The release snapshot of %q could not be recorded.\n\nOriginal Error: %s", name, err))
		return
	}
	// The provider exists from here on: save it to state before the default environment's
	// build, so a failed or timed-out build taints the resource instead of orphaning it.
	plan.ID = types.StringValue(name)
	setNameIdentity(ctx, resp.Identity, plan.ID, &resp.Diagnostics)
	plan.ReleaseSnapshot = types.StringValue(release)
	plan.DefaultEnvironment = types.StringValue(defaultEnvironmentName)
	plan.Status = types.StringValue(sandbox.StatusBuilding)
	plan.Scopes = stringList(scopes)
	plan.APIKeyWO = types.StringNull()
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)

	if err := r.ensureDefaultEnvironment(ctx, p, true); err != nil {
		addOperationError(&resp.Diagnostics, "Error Building Default Environment", fmt.Sprintf("sandbox provider %q, building its %q environment", p.Name, defaultEnvironmentName), err)
		return
	}
	p.Status = sandbox.StatusReady
	if err := r.cp.store.UpdateSandboxProvider(ctx, p); err != nil {
		addOperationError(&resp.Diagnostics, "Error Saving Sandbox Provider", fmt.Sprintf("sandbox provider %q", p.Name), err)
		return
	}
	plan.Status = types.StringValue(sandbox.StatusReady)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *sandboxProviderResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[sandboxProviderModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	p, ok := readNamed(ctx, "Sandbox Provider", state.ID, r.cp.store.GetSandboxProvider, resp)
	if !ok {
		return
	}
	state.Name = types.StringValue(p.Name)
	state.Type = types.StringValue(p.Type)
	state.APIURL = optionalString(p.APIURL)
	state.Target = optionalString(p.Target)
	state.Scopes = stringList(p.Scopes)
	state.ReleaseSnapshot = types.StringValue(p.ReleaseSnapshot)
	state.DefaultEnvironment = types.StringValue(defaultEnvironmentName)
	state.Status = types.StringValue(p.Status)
	state.RequireLimits = optionalBool(p.RequireLimits)
	if def, err := r.cp.store.GetEnvironment(ctx, defaultEnvironmentName); errors.Is(err, store.ErrNotFound) {
		// The default environment is part of a configured provider; without it the
		// provider needs repair, which an update performs.
		state.Status = types.StringValue(statusDegraded)
	} else if err == nil && r.cp.remoteSnapshots(p) && r.defaultSnapshotFailed(ctx, p, def, &resp.Diagnostics) {
		// Its snapshot was deleted or deactivated in the backend: repaired the same way.
		state.Status = types.StringValue(statusDegraded)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *sandboxProviderResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan, state, ok := decodeChange[sandboxProviderModel](ctx, r.cp, req.Plan.Get, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, _ := withTimeout(ctx, plan.Timeouts.Update, defaultBuildTimeout, &resp.Diagnostics)
	defer cancel()

	p, err := r.cp.store.GetSandboxProvider(ctx, state.ID.ValueString())
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Reading Sandbox Provider", fmt.Sprintf("sandbox provider %q", state.ID.ValueString()), err)
		return
	}
	p.APIURL, p.Target = plan.APIURL.ValueString(), plan.Target.ValueString()
	p.RequireLimits = boolPointer(plan.RequireLimits)
	keyChanged := credentialChanged(plan.APIKey, state.APIKey, plan.APIKeyWOVersion, state.APIKeyWOVersion) || !plan.APIURL.Equal(state.APIURL)
	if keyChanged {
		scopes, keyEnc, ok := r.validateCredentials(ctx, &p, req.Config, &plan, &resp.Diagnostics)
		if !ok {
			return
		}
		p.Scopes, p.APIKeyEnc = scopes, keyEnc
	}
	if def, err := r.cp.store.GetEnvironment(ctx, defaultEnvironmentName); errors.Is(err, store.ErrNotFound) {
		if err := r.ensureDefaultEnvironment(ctx, p, true); err != nil {
			addOperationError(&resp.Diagnostics, "Error Repairing Default Environment", fmt.Sprintf("sandbox provider %q, recreating its %q environment", p.Name, defaultEnvironmentName), err)
			return
		}
	} else if err == nil && r.cp.remoteSnapshots(p) && r.defaultSnapshotFailed(ctx, p, def, &resp.Diagnostics) {
		if err := r.ensureDefaultEnvironment(ctx, p, false); err != nil {
			addOperationError(&resp.Diagnostics, "Error Repairing Default Environment", fmt.Sprintf("sandbox provider %q, rebuilding the snapshot of its %q environment", p.Name, defaultEnvironmentName), err)
			return
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	p.Status = sandbox.StatusReady
	if err := r.cp.store.UpdateSandboxProvider(ctx, p); err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Sandbox Provider", fmt.Sprintf("sandbox provider %q", p.Name), err)
		return
	}
	plan.ID = state.ID
	setNameIdentity(ctx, resp.Identity, plan.ID, &resp.Diagnostics)
	plan.Scopes = stringList(p.Scopes)
	plan.ReleaseSnapshot = types.StringValue(p.ReleaseSnapshot)
	plan.DefaultEnvironment = types.StringValue(defaultEnvironmentName)
	plan.Status = types.StringValue(p.Status)
	plan.APIKeyWO = types.StringNull()
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *sandboxProviderResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[sandboxProviderModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, timeout := withTimeout(ctx, state.Timeouts.Delete, defaultDeleteTimeout, &resp.Diagnostics)
	defer cancel()

	name := state.ID.ValueString()
	coord, _, cerr := r.cp.coordinator(ctx, name)
	snapshots, _ := r.cp.store.ListSnapshotIDs(ctx, name)
	err := r.cp.store.DeleteSandboxProvider(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return
	case errors.Is(err, store.ErrInUse):
		resp.Diagnostics.AddError("Sandbox Provider In Use",
			fmt.Sprintf("Sandbox provider %q cannot be deleted: %s. Delete those first (Terraform orders this for you when they reference the provider's attributes).", name, err))
		return
	case timedOut(ctx, err):
		addTimeoutError(&resp.Diagnostics, "Timed Out Deleting Sandbox Provider", "delete", timeout,
			fmt.Sprintf("Deleting sandbox provider %q", name), "Nothing was deleted. Raise timeouts.delete and run the command again.", err)
		return
	case err != nil:
		addOperationError(&resp.Diagnostics, "Error Deleting Sandbox Provider", fmt.Sprintf("sandbox provider %q", name), err)
		return
	}
	tflog.Info(ctx, "sandbox provider: deleted", map[string]any{"name": name, "snapshots": len(snapshots)})
	if cerr != nil {
		return
	}
	// The rows are gone, so every snapshot of the provider is unreferenced now, and no
	// later apply will collect what is left: a timeout here names the snapshots.
	err = coord.RemoveFiles(ctx, snapshots)
	switch {
	case err == nil:
	case timedOut(ctx, err):
		addTimeoutError(&resp.Diagnostics, "Timed Out Deleting Sandbox Provider", "delete", timeout,
			fmt.Sprintf("Sandbox provider %q was removed from the control plane, but removing its %d snapshot(s) from the backend", name, len(snapshots)),
			fmt.Sprintf("Nothing in trueforge refers to them any more: delete the snapshots left behind (%s) in the backend's console, "+
				"and raise timeouts.delete (for example \"45m\") for the next time. Running the command again finishes the destroy.", strings.Join(snapshots, ", ")), err)
	default:
		resp.Diagnostics.AddWarning("Snapshots Left Behind",
			fmt.Sprintf("Sandbox provider %q was deleted, but some snapshot files could not be removed: %s", name, err))
	}
}

// validateCredentials checks the key against the backend and returns the scopes it grants
// and the sealed key to store. Nothing is written when it fails.
func (r *sandboxProviderResource) validateCredentials(ctx context.Context, p *store.SandboxProvider, cfg tfsdk.Config, plan *sandboxProviderModel, diags *diag.Diagnostics) ([]string, []byte, bool) {
	key := apiKeyCredential.value(ctx, plan.APIKey, cfg, diags)
	b, err := r.cp.backend(*p)
	if err != nil {
		diags.AddAttributeError(path.Root("type"), "Sandbox Provider Type Not Available", err.Error())
		return nil, nil, false
	}
	if b.Info().NeedsAPIKey && key == "" {
		diags.AddAttributeError(path.Root("api_key"), "Missing API Key",
			fmt.Sprintf("Type %q needs an API key. Set api_key_wo (with api_key_wo_version) or api_key.", p.Type))
		return nil, nil, false
	}
	settings, err := r.cp.settings(ctx, *p)
	if err != nil {
		addOperationError(diags, "Control Plane Unavailable", fmt.Sprintf("sandbox provider %q", p.Name), err)
		return nil, nil, false
	}
	settings.APIKey = key
	scopes, problems := b.CheckCredentials(ctx, settings)
	var checked diag.Diagnostics
	addProblems(&checked, problems)
	diags.Append(checked...)
	if checked.HasError() {
		return nil, nil, false
	}
	if key == "" {
		return scopes, nil, true
	}
	sealed, ok := r.cp.seal(ctx, key, controlplane.ProviderKeyLabel(p.Name), fmt.Sprintf("sandbox provider %q, sealing its API key", p.Name), diags)
	if !ok {
		return nil, nil, false
	}
	return scopes, sealed, true
}
