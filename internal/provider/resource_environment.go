package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Size ceilings for an environment; they catch typos (memory = 4096 meant as MB) at plan
// time rather than after a long build.
const (
	maxCPU      = 64
	maxMemoryGB = 512
	maxDiskGB   = 2048
)

type environmentResource struct{ namedResource }

type environmentModel struct {
	ID              types.String   `tfsdk:"id"`
	Name            types.String   `tfsdk:"name"`
	SandboxProvider types.String   `tfsdk:"sandbox_provider"`
	Image           types.String   `tfsdk:"image"`
	BuildScript     types.String   `tfsdk:"build_script"`
	CPU             types.Int64    `tfsdk:"cpu"`
	Memory          types.Int64    `tfsdk:"memory"`
	Disk            types.Int64    `tfsdk:"disk"`
	Triggers        types.Map      `tfsdk:"triggers"`
	Env             types.Map      `tfsdk:"env"`
	Network         types.Object   `tfsdk:"network"`
	WaitForReady    types.Bool     `tfsdk:"wait_for_ready"`
	SnapshotID      types.String   `tfsdk:"snapshot_id"`
	BuildHash       types.String   `tfsdk:"build_hash"`
	Status          types.String   `tfsdk:"status"`
	Owner           types.String   `tfsdk:"owner"`
	SharedWith      types.Set      `tfsdk:"shared_with"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
	// The settings document (environment_settings.go).
	GPU               types.Int64  `tfsdk:"gpu"`
	GPUType           types.String `tfsdk:"gpu_type"`
	Dockerfile        types.String `tfsdk:"dockerfile"`
	BuildContext      types.String `tfsdk:"build_context"`
	Entrypoint        types.List   `tfsdk:"entrypoint"`
	Region            types.String `tfsdk:"region"`
	Registry          types.String `tfsdk:"registry"`
	Labels            types.Map    `tfsdk:"labels"`
	Volumes           types.List   `tfsdk:"volumes"`
	PackageIndexHosts types.List   `tfsdk:"package_index_hosts"`
	// Versions (environment_versions.go).
	KeepVersions types.Int64  `tfsdk:"keep_versions"`
	Versions     types.List   `tfsdk:"versions"`
	WarmPool     types.Object `tfsdk:"warm_pool"` // environment_warm_pool.go
	Rollout      types.Object `tfsdk:"rollout"`   // environment_rollout.go
}

type networkModel struct {
	BlockAll         types.Bool   `tfsdk:"block_all"`
	AllowDomains     types.List   `tfsdk:"allow_domains"`
	AllowCIDRs       types.List   `tfsdk:"allow_cidrs"`
	PackageIndexes   types.List   `tfsdk:"package_indexes"`
	PackageIndexesIn types.String `tfsdk:"package_indexes_in"`
}

// networkAttrTypes is the network object's, the resource's and the data sources' alike.
var networkAttrTypes = objectAttrTypes(dataNetworkAttributes())

// NewEnvironmentResource is the trueforge_environment resource.
func NewEnvironmentResource() resource.Resource { return &environmentResource{named("environment")} }

func (r *environmentResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	bakes := " Changing it **bakes a new snapshot** (an in-place update; existing sandboxes keep their snapshot)."
	live := " Changing it is applied live: no rebuild, and it reaches sandboxes created afterwards."
	networkAttrs := map[string]schema.Attribute{
		"allow_domains": schema.ListAttribute{
			MarkdownDescription: "Hosts the sandbox may reach: exact names or `*.suffix` (subdomains only). Empty means every host. Ignored while `block_all` is on. " +
				"When not empty, snapshot builds on the `local` backend are held to it too, plus the hosts of `package_indexes` (Daytona builds use Daytona's network). " +
				"Daytona takes at most 10 entries, each a dotted name ending in a top-level domain of ASCII letters (no `localhost`, IP addresses or non-ASCII names), and refuses others at plan time.",
			Optional:    true,
			ElementType: types.StringType,
			Validators:  []validator.List{listvalidator.ValueStringsAre(validDomain()), listvalidator.UniqueValues()},
		},
		"block_all": schema.BoolAttribute{
			MarkdownDescription: "No outbound access at all. While on, `allow_domains` and secrets are inert, and no secret can be added. Defaults to false.",
			Optional:            true,
			Computed:            true,
			Default:             booldefault.StaticBool(false),
		},
	}
	for k, v := range networkSettingsAttributes() {
		networkAttrs[k] = v
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A reusable blueprint for the sandboxes agents create. `image`, `build_script`, `cpu`, `memory`, `disk` and " +
			"`triggers` are build inputs: they bake a content-addressed snapshot, so identical inputs in any two environments build once. " +
			"`env` and `network` are applied without a rebuild. Environments are owned by their creator; one referenced by an agent cannot " +
			"be deleted. The name `default` is reserved for the environment the sandbox provider creates. " +
			"An environment without secrets is a blueprint every owner's agents may use; one with a `trueforge_secret` serves only its owner's agents " +
			"and the owners `shared_with` names, so that no other team's agent makes the egress proxy send its secrets.",
		Attributes: map[string]schema.Attribute{
			"build_hash": schema.StringAttribute{
				MarkdownDescription: "SHA-256 over the build inputs: the snapshot's content address.",
				Computed:            true,
			},
			"build_script": schema.StringAttribute{
				MarkdownDescription: "Shell script run as root with `sh -e` on top of the image (on Daytona with an `image` other than `platform`, as that image's default user); sandboxes still run as the image's user (`daytona` for the platform image). Its changes under `/usr`, `/etc`, `/opt`, `/var`, `/srv`, `/home` and `/root` become the snapshot." + bakes,
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(""),
				Validators:          []validator.String{noNUL("sh reads the script as text, so the text after the NUL would not run as written")},
			},
			"cpu": defaultedInt64(fmt.Sprintf("CPUs for each sandbox (1 to %d). Defaults to 1.", maxCPU)+bakes,
				1, int64validator.Between(1, maxCPU)),
			"disk": defaultedInt64(fmt.Sprintf("Disk in GB for each sandbox (1 to %d); the build fails when the snapshot layer is larger. Defaults to 3.", maxDiskGB)+bakes,
				3, int64validator.Between(1, maxDiskGB)),
			"env": schema.MapAttribute{
				MarkdownDescription: "Environment variables of every sandbox process. Not for credentials: use `trueforge_secret`." + live,
				Optional:            true,
				ElementType:         types.StringType,
				Validators: []validator.Map{mapKeysCheck{"environment variable names", checkEnvVarName},
					noNUL("a process environment cannot hold one, so every sandbox of this environment would fail to start")},
			},
			"id": keptString("The environment's name."),
			"image": schema.StringAttribute{
				MarkdownDescription: "Base image. `platform` (the default) is the release snapshot: on the `local` backend, the host's system directories read-only." + bakes,
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(sandbox.PlatformImage),
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1), noNUL("no image reference has one")},
			},
			"memory": defaultedInt64(fmt.Sprintf("Memory in GB for each sandbox (1 to %d). Defaults to 1.", maxMemoryGB)+bakes,
				1, int64validator.Between(1, maxMemoryGB)),
			"name": replacingString("Name agents reference. `default` is reserved. Changing it replaces the environment.", validName(), stringCheck{"not `default`", checkNotReserved}),
			"network": schema.SingleNestedAttribute{
				MarkdownDescription: "Outbound network policy. Omitted means unrestricted egress." + live + " A running session keeps its policy until its sandbox is replaced.",
				Optional:            true,
				Attributes:          networkAttrs,
			},
			"owner":            keptString("Who created the environment (the provider's `owner`); only they may change or delete it."),
			"sandbox_provider": replacingString("Name of the `trueforge_sandbox_provider`. Changing it replaces the environment."),
			"shared_with":      sharedWithAttribute("environment's secrets"),
			"snapshot_id": schema.StringAttribute{
				MarkdownDescription: "The snapshot new sandboxes are cloned from. Unknown in a plan only when a build input changed.",
				Computed:            true,
			},
			"status": schema.StringAttribute{
				MarkdownDescription: "`Building`, `Ready` or `Failed`. Only Ready environments can be selected on an agent.",
				Computed:            true,
			},
			"timeouts": timeoutsAttribute(ctx, "How long apply waits for this environment's operations.", map[string]string{
				"create": "How long creating the environment waits for its snapshot build. Defaults to 30 minutes.",
				"update": "How long an update waits for a new snapshot build. Defaults to 30 minutes.",
				"delete": "How long deleting the environment may take, removing its unreferenced snapshots from the backend " +
					"included (on Daytona each may be retried for minutes while the snapshot is busy). Defaults to 20 minutes.",
			}),
			"triggers": schema.MapAttribute{
				MarkdownDescription: "Arbitrary values whose change forces a new snapshot, for inputs outside the configuration (a package index date, a commit)." + bakes,
				Optional:            true,
				ElementType:         types.StringType,
			},
			"wait_for_ready": schema.BoolAttribute{
				MarkdownDescription: "Wait for the snapshot build to finish (within `timeouts`) and fail the apply when it fails. With false, apply returns while the status is Building. Defaults to true.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(true),
			},
		},
	}
	for k, v := range environmentSettingsAttributes(bakes, live) {
		resp.Schema.Attributes[k] = v
	}
	resp.Schema.Attributes["keep_versions"] = keepVersionsAttribute() // environment_versions.go
	resp.Schema.Attributes["versions"] = versionsAttribute()
	resp.Schema.Attributes["warm_pool"] = warmPoolAttribute() // environment_warm_pool.go
	resp.Schema.Attributes["rollout"] = rolloutAttribute()    // environment_rollout.go
}

func checkNotReserved(s string) string {
	if s == defaultEnvironmentName {
		return `"default" is reserved for the environment the sandbox provider creates; it cannot be created, renamed to or deleted. Choose another name, or reference the default environment with the trueforge_environment data source`
	}
	return ""
}

// spec returns the build inputs of m, and false when any of them is still unknown.
func (m *environmentModel) spec(ctx context.Context) (sandbox.SnapshotSpec, bool) {
	if m.Image.IsUnknown() || m.BuildScript.IsUnknown() || m.CPU.IsUnknown() || m.Memory.IsUnknown() || m.Disk.IsUnknown() || m.Triggers.IsUnknown() ||
		!m.settingsKnown() {
		return sandbox.SnapshotSpec{}, false
	}
	for _, v := range m.Triggers.Elements() {
		if v.IsUnknown() {
			return sandbox.SnapshotSpec{}, false
		}
	}
	spec := sandbox.SnapshotSpec{
		Image: m.Image.ValueString(), BuildScript: m.BuildScript.ValueString(),
		CPU: m.CPU.ValueInt64(), MemoryGB: m.Memory.ValueInt64(), DiskGB: m.Disk.ValueInt64(),
		Triggers: mapFrom(ctx, m.Triggers),
	}
	m.addSettingsSpec(ctx, &spec)
	return spec, true
}

func (m *environmentModel) network(ctx context.Context) (blockAll bool, allow []string) {
	if m.Network.IsNull() || m.Network.IsUnknown() {
		return false, nil
	}
	var n networkModel
	m.Network.As(ctx, &n, struct{ UnhandledNullAsEmpty, UnhandledUnknownAsEmpty bool }{true, true})
	return n.BlockAll.ValueBool(), listFrom(ctx, n.AllowDomains)
}

func (r *environmentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.cp == nil {
		return
	}
	if req.Plan.Raw.IsNull() {
		// Destroy: refuse early when someone else owns it, so the plan tells the truth.
		var state environmentModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !state.Owner.IsNull() && state.Owner.ValueString() != r.cp.owner {
			r.cp.addOwnerError(&resp.Diagnostics, "Environment", state.Name.ValueString(), state.Owner.ValueString(), "deleted")
		}
		return
	}
	if r.unchanged(ctx, req) {
		return
	}
	var plan environmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var state *environmentModel
	if !req.State.Raw.IsNull() {
		state = &environmentModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	spec, known := plan.spec(ctx)
	if known {
		plan.readContext(&spec, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		if state != nil && plan.Name.Equal(state.Name) && plan.SandboxProvider.Equal(state.SandboxProvider) {
			spec.Rebuild = r.cp.storedRebuild(ctx, state.ID.ValueString()) // action_environment_rebuild.go
		}
		plan.BuildHash = types.StringValue(spec.BuildHash())
	} else {
		plan.BuildHash = types.StringUnknown()
	}
	if !plan.Name.IsUnknown() {
		plan.ID = plan.Name
	}
	plan.PackageIndexHosts = plan.packageIndexHosts(ctx)
	checkVolumeMounts(plan.volumes(ctx), &resp.Diagnostics)
	resp.Diagnostics.Append(r.checkRefs(ctx, &plan, true)...) // volumes and registry (environment_volumes.go)
	r.checkBackend(ctx, &plan, state, resp)

	if state == nil {
		plan.Owner = types.StringValue(r.cp.owner)
		plan.SnapshotID, plan.Status = types.StringUnknown(), types.StringUnknown()
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	plan.Owner = state.Owner
	if state.Owner.ValueString() != r.cp.owner {
		r.cp.addOwnerError(&resp.Diagnostics, "Environment", state.Name.ValueString(), state.Owner.ValueString(), "changed")
		return
	}
	if !plan.SharedWith.IsUnknown() && !plan.SharedWith.Equal(state.SharedWith) {
		r.warnUnshared(ctx, state.Name.ValueString(), setFrom(ctx, plan.SharedWith), &resp.Diagnostics) // environment_sharing.go
	}
	rebuild := !known || plan.BuildHash.ValueString() != state.BuildHash.ValueString() ||
		state.Status.ValueString() == sandbox.StatusFailed || state.SnapshotID.ValueString() == ""
	// Inputs back to a kept version's reuse its snapshot: no build (environment_versions.go).
	if r.planVersions(ctx, &plan, state, rebuild, &resp.Diagnostics) {
		plan.SnapshotID, plan.Status = types.StringUnknown(), types.StringUnknown()
		why := "a build input (image, build_script, cpu, memory, disk, triggers, gpu, gpu_type, dockerfile, a file of build_context, entrypoint, region or registry) changed"
		if known && plan.BuildHash.ValueString() == state.BuildHash.ValueString() {
			why = "its current snapshot is " + strings.ToLower(state.Status.ValueString()) + " or missing"
		}
		resp.Diagnostics.AddWarning("New Snapshot Will Be Baked",
			fmt.Sprintf("Environment %q will bake a new snapshot because %s. Sandboxes that already exist keep their snapshot until they are replaced; env and network changes never rebuild.",
				state.Name.ValueString(), why))
	} else if !rebuild {
		plan.SnapshotID, plan.Status = state.SnapshotID, state.Status
	}
	blockAll, allow := plan.network(ctx)
	wasBlocked, _ := state.network(ctx)
	if blockAll && !wasBlocked {
		secrets, _ := r.cp.store.ListSecrets(ctx, state.Name.ValueString())
		if len(allow) > 0 || len(secrets) > 0 {
			resp.Diagnostics.AddAttributeWarning(path.Root("network").AtName("block_all"), "Allow List And Secrets Become Inert",
				fmt.Sprintf("Turning block_all on for environment %q gives its sandboxes no network at all: the allow list (%d entries) and its %d secret(s) are kept but ignored until block_all is turned off.",
					state.Name.ValueString(), len(allow), len(secrets)))
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// unchanged reports whether the plan keeps the environment exactly as it is in state with
// nothing for ModifyPlan to add: same configuration and a snapshot that is not Failed or
// missing. It reads two attributes instead of decoding the whole model twice,
// which is most of a no-op plan's cost over hundreds of environments.
func (r *environmentResource) unchanged(ctx context.Context, req resource.ModifyPlanRequest) bool {
	if req.State.Raw.IsNull() || !req.Plan.Raw.Equal(req.State.Raw) {
		return false
	}
	var status, snapshot, buildContext types.String
	if req.State.GetAttribute(ctx, path.Root("status"), &status).HasError() ||
		req.State.GetAttribute(ctx, path.Root("snapshot_id"), &snapshot).HasError() ||
		req.State.GetAttribute(ctx, path.Root("build_context"), &buildContext).HasError() {
		return false
	}
	if !buildContext.IsNull() {
		// Its files may have changed with the configuration unchanged: hash them.
		return false
	}
	// Whoever owns it: planning an environment one does not own is fine as long as
	// nothing changes (the owner rule is about changes and deletes, and a shared
	// configuration plans every team's resources).
	return status.ValueString() != sandbox.StatusFailed && snapshot.ValueString() != ""
}

// checkBackend adds, when an environment is created or its image, sizes or network
// change, what its sandbox provider's backend would refuse or not honour about it
// (sandbox.Backend.CheckEnvironment: the local backend's platform-only image and whether
// limits are enforced on this host, Daytona's domain and size caps). A provider created
// in the same apply is not known yet: Create checks again, and the provider's own plan
// says it for its default environment.
func (r *environmentResource) checkBackend(ctx context.Context, plan, state *environmentModel, resp *resource.ModifyPlanResponse) {
	if plan.SandboxProvider.IsUnknown() || plan.Image.IsUnknown() || plan.CPU.IsUnknown() || plan.Memory.IsUnknown() ||
		plan.Disk.IsUnknown() || plan.Network.IsUnknown() || !plan.settingsKnown() || plan.Labels.IsUnknown() || plan.Volumes.IsUnknown() {
		return
	}
	if state != nil && plan.Image.Equal(state.Image) && plan.CPU.Equal(state.CPU) && plan.Memory.Equal(state.Memory) &&
		plan.Disk.Equal(state.Disk) && plan.Network.Equal(state.Network) && plan.GPU.Equal(state.GPU) && plan.GPUType.Equal(state.GPUType) &&
		plan.Dockerfile.Equal(state.Dockerfile) && plan.Entrypoint.Equal(state.Entrypoint) && plan.Region.Equal(state.Region) &&
		plan.Registry.Equal(state.Registry) && plan.Labels.Equal(state.Labels) && plan.Volumes.Equal(state.Volumes) {
		return
	}
	p, err := r.cp.store.GetSandboxProvider(ctx, plan.SandboxProvider.ValueString())
	if err != nil {
		return
	}
	r.cp.checkEnvironment(ctx, p, plan.environmentSpec(ctx), &resp.Diagnostics)
}

// environmentSpec is what a backend checks of the environment (CheckEnvironment).
func (m *environmentModel) environmentSpec(ctx context.Context) sandbox.EnvironmentSpec {
	spec, _ := m.spec(ctx)
	blockAll, allow := m.network(ctx)
	env := sandbox.EnvironmentSpec{
		Name: m.Name.ValueString(), Spec: spec, BlockAll: blockAll, AllowDomains: m.sandboxAllowDomains(ctx, allow),
		AllowCIDRs: m.networkSettings(ctx).allowCIDRs, Labels: mapFrom(ctx, m.Labels),
	}
	for _, v := range m.volumes(ctx) {
		env.Volumes = append(env.Volumes, sandbox.VolumeMount{Volume: v.Volume, MountPath: v.MountPath, Subpath: v.Subpath})
	}
	return env
}
