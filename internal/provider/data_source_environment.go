package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type environmentDataSourceModel struct {
	BuildHash       types.String `tfsdk:"build_hash"`
	BuildScript     types.String `tfsdk:"build_script"`
	CPU             types.Int64  `tfsdk:"cpu"`
	Disk            types.Int64  `tfsdk:"disk"`
	Env             types.Map    `tfsdk:"env"`
	Image           types.String `tfsdk:"image"`
	Memory          types.Int64  `tfsdk:"memory"`
	Name            types.String `tfsdk:"name"`
	Network         types.Object `tfsdk:"network"`
	Labels          types.Map    `tfsdk:"labels"`
	Owner           types.String `tfsdk:"owner"`
	SharedWith      types.Set    `tfsdk:"shared_with"`
	HasSecrets      types.Bool   `tfsdk:"has_secrets"`
	SandboxProvider types.String `tfsdk:"sandbox_provider"`
	SnapshotID      types.String `tfsdk:"snapshot_id"`
	Status          types.String `tfsdk:"status"`
	Triggers        types.Map    `tfsdk:"triggers"`
	// Versions (environment_versions.go).
	KeepVersions types.Int64  `tfsdk:"keep_versions"`
	Versions     types.List   `tfsdk:"versions"`
	WarmPool     types.Object `tfsdk:"warm_pool"` // environment_warm_pool.go
	Rollout      types.Object `tfsdk:"rollout"`   // environment_rollout.go
}

// NewEnvironmentDataSource is the trueforge_environment data source.
func NewEnvironmentDataSource() datasource.DataSource {
	return &dataSource[environmentDataSourceModel]{
		typeName: "_environment",
		schema:   environmentDataSourceSchema(),
		read: byName("Environment", func(m *environmentDataSourceModel) types.String { return m.Name }, (*store.Store).GetEnvironment,
			"No environment %q exists in this control plane. Check the name; an environment created in the same configuration "+
				"should be read from its trueforge_environment resource, or referenced by that resource's name so Terraform creates it first.", readEnvironment),
	}
}

func environmentDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Reads an environment by name, including the reserved `default` environment the sandbox provider creates. " +
			"`status` is refreshed from the sandbox backend.",
		Attributes: withSharingAttributes(map[string]schema.Attribute{
			"build_hash":   computedString("SHA-256 over the build inputs: the snapshot's content address."),
			"build_script": computedString("Shell script run on top of the image when the snapshot was baked."),
			"cpu":          computedInt64("CPUs for each sandbox."),
			"disk":         computedInt64("Disk in GB for each sandbox."),
			"env":          computedStringMap("Environment variables of every sandbox process (empty when none)."),
			"image":        computedString("Base image; `platform` is the release snapshot."),
			"memory":       computedInt64("Memory in GB for each sandbox."),
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the environment; `default` reads the sandbox provider's reserved environment.",
				Required:            true,
				Validators:          []validator.String{validName()},
			},
			"network": schema.SingleNestedAttribute{
				MarkdownDescription: "Outbound network policy.",
				Computed:            true,
				Attributes:          dataNetworkAttributes(),
			},
			"labels":           computedStringMap("Labels set on every sandbox of the environment (empty when none)."),
			"owner":            computedString("Who created the environment."),
			"sandbox_provider": computedString("Name of the sandbox provider the environment belongs to."),
			"snapshot_id":      computedString("The snapshot new sandboxes are cloned from."),
			"status":           computedString("`Building`, `Ready` or `Failed`. Only Ready environments can be selected on an agent."),
			"triggers":         computedStringMap("Values whose change forces a new snapshot (empty when none)."),
			"keep_versions":    computedInt64("How many previous versions keep their snapshot from collection."),
			"versions":         versionsDataAttribute(), // environment_versions.go
			"warm_pool":        warmPoolDataAttribute(), // environment_warm_pool.go
			"rollout":          rolloutDataAttribute(),  // environment_rollout.go
		}),
	}
}

// readEnvironment fills the data source in from env, its status refreshed from the
// sandbox backend.
func readEnvironment(ctx context.Context, cp *controlPlane, m *environmentDataSourceModel, env store.Environment, diags *diag.Diagnostics) {
	st := environmentStatus{cp: cp, coords: map[string]*builds.Coordinator{}}
	status := st.of(ctx, env, diags)
	m.BuildHash = types.StringValue(env.BuildHash)
	m.BuildScript = types.StringValue(env.BuildScript)
	m.CPU = types.Int64Value(env.CPU)
	m.Disk = types.Int64Value(env.DiskGB)
	m.Env = knownStringMap(env.Env)
	m.Image = types.StringValue(env.Image)
	m.Memory = types.Int64Value(env.MemoryGB)
	m.Name = types.StringValue(env.Name)
	m.Owner = types.StringValue(env.Owner)
	m.SharedWith, m.HasSecrets = stringSet(env.SharedWith), types.BoolValue(env.HasSecrets)
	m.SandboxProvider = types.StringValue(env.Provider)
	m.SnapshotID = types.StringValue(env.SnapshotID)
	m.Status = types.StringValue(status)
	m.Triggers = knownStringMap(env.Triggers)
	m.Labels = knownStringMap(env.Settings.Labels)
	m.KeepVersions = types.Int64Value(env.Settings.Keep())
	m.Versions = readVersions(ctx, cp.store, env.Name, diags) // environment_versions.go
	m.WarmPool = warmPoolData(env)                            // environment_warm_pool.go
	m.Rollout = rolloutData(env)                              // environment_rollout.go
	var d diag.Diagnostics
	m.Network, d = networkObject(env)
	diags.Append(d...)
}

// networkObject is env's network policy as the data sources read it: the allow list as
// stored (empty, not null, when there is none).
func networkObject(env store.Environment) (types.Object, diag.Diagnostics) {
	in := env.Settings.PackageIndexesIn
	if in == "" {
		in = packageindex.DefaultIn
	}
	return types.ObjectValue(networkAttrTypes, map[string]attr.Value{
		"allow_domains":      stringList(env.AllowDomains),
		"block_all":          types.BoolValue(env.BlockAll),
		"allow_cidrs":        stringList(env.Settings.AllowCIDRs),
		"package_indexes":    stringList(env.Settings.PackageIndexes),
		"package_indexes_in": types.StringValue(in),
	})
}

// withSharingAttributes adds to attrs, an environment data source's attributes, who may
// use the environment's secrets, as both environment data sources show it.
func withSharingAttributes(attrs map[string]schema.Attribute) map[string]schema.Attribute {
	attrs["shared_with"] = schema.SetAttribute{
		MarkdownDescription: "Owners, besides `owner`, whose agents may use the environment's secrets (`\"*\"`: every owner); empty when only the owner's may.",
		Computed:            true,
		ElementType:         types.StringType,
	}
	attrs["has_secrets"] = schema.BoolAttribute{
		MarkdownDescription: "Whether the environment has secrets. One without secrets may be used by every owner's agents; one with secrets only by its owner's and those of the owners `shared_with` names.",
		Computed:            true,
	}
	return attrs
}

// dataNetworkAttributes is the network object of the environment data sources.
func dataNetworkAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"allow_domains":      computedStringList("Hosts the sandbox may reach; empty means every host. Ignored while `block_all` is on."),
		"allow_cidrs":        computedStringList("Address ranges the sandbox may reach besides `allow_domains` (empty when none)."),
		"block_all":          computedBool("No outbound access at all."),
		"package_indexes":    computedStringList("Named package indexes that may be reached (empty when none)."),
		"package_indexes_in": computedString("Where the package indexes may be reached: `build` or `build_and_sandbox`."),
	}
}

// knownStringMap is stringMap for data sources: an empty map rather than null, so
// expressions over it need no null checks.
func knownStringMap(m map[string]string) types.Map {
	vals := make(map[string]attr.Value, len(m))
	for k, v := range m {
		vals[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, vals)
}
