package provider

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Limits of an environment's settings added after the first release, chosen to catch
// mistakes at plan time; each is named in the attribute's description.
const (
	maxGPU          = 8
	maxLabels       = 32
	maxLabelValue   = 255
	maxAllowCIDRs   = 32
	maxEntrypoint   = 64
	maxDockerfileKB = 256
)

var labelKeyRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)

// environmentSettingsAttributes are the attributes of trueforge_environment kept in its
// settings document (store.EnvironmentSettings): build inputs after image..triggers,
// and live settings besides env and network.
func environmentSettingsAttributes(bakes, live string) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"build_context": schema.StringAttribute{
			MarkdownDescription: fmt.Sprintf("Folder whose files the `dockerfile` may `COPY`/`ADD` (usually `\"${path.module}/context\"`). Its files are hashed at every plan, "+
				"so changing one bakes a new snapshot although the configuration did not change. Regular files only (no symbolic links), at most %d files and %d MiB. "+
				"Requires `dockerfile`.", sandbox.MaxContextFiles, sandbox.MaxContextBytes>>20) + bakes,
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(1), stringvalidator.AlsoRequires(path.MatchRoot("dockerfile"))},
		},
		"dockerfile": schema.StringAttribute{
			MarkdownDescription: fmt.Sprintf("Dockerfile content (for example `file(\"${path.module}/Dockerfile\")`), built as the snapshot instead of `image` + `build_script`: "+
				"leave those unset. It must start from an image (`FROM`, after any `ARG`); at most %d KiB. The `local` backend accepts only `FROM platform` with `RUN` lines.", maxDockerfileKB) + bakes,
			Optional: true,
			Validators: []validator.String{
				stringvalidator.LengthAtMost(maxDockerfileKB << 10),
				stringCheck{"a Dockerfile that starts from an image", checkDockerfile},
				noNUL("a Dockerfile is text: its RUN lines reach a shell, which stops reading at the NUL"),
				stringvalidator.ConflictsWith(path.MatchRoot("build_script"), path.MatchRoot("image")),
			},
		},
		"entrypoint": schema.ListAttribute{
			MarkdownDescription: fmt.Sprintf("The sandbox's main process (argv), as Daytona's snapshot `entrypoint`; at most %d elements. Unset, Daytona runs the last `ENTRYPOINT` written in `dockerfile`, else `sleep infinity`: "+
				"an `ENTRYPOINT` that the base image sets (and the Dockerfile text does not) never runs on Daytona. "+
				"The `local` backend has no main process and refuses it.", maxEntrypoint) + bakes,
			Optional:    true,
			ElementType: types.StringType,
			Validators: []validator.List{listvalidator.SizeBetween(1, maxEntrypoint),
				listvalidator.ValueStringsAre(noNUL("an argument of a process cannot hold one"))},
		},
		"gpu": schema.Int64Attribute{
			MarkdownDescription: fmt.Sprintf("GPUs for each sandbox (1 to %d). Unset means none. Daytona allows at most 1 GPU per sandbox and refuses more at plan time; "+
				"the `local` backend has no GPUs and refuses it.", maxGPU) + bakes,
			Optional:   true,
			Validators: []validator.Int64{int64validator.Between(1, maxGPU)},
		},
		"gpu_type": schema.StringAttribute{
			MarkdownDescription: "GPU model (for example `H100`), as the sandbox provider names it. Requires `gpu`." + bakes,
			Optional:            true,
			Validators:          []validator.String{stringvalidator.LengthBetween(1, 64), stringvalidator.AlsoRequires(path.MatchRoot("gpu"))},
		},
		"labels": schema.MapAttribute{
			MarkdownDescription: fmt.Sprintf("Labels set on every sandbox of the environment (and its snapshots where the backend labels them), for cost allocation. "+
				"At most %d; keys of letters, digits, `.`, `_`, `/` and `-` (at most 63 characters), values of at most %d characters. "+
				"Keys starting with `%s` are the harness's own and cannot be set.", maxLabels, maxLabelValue, sandbox.ReservedLabelPrefix) + live,
			Optional:    true,
			ElementType: types.StringType,
			Validators: []validator.Map{
				mapvalidator.SizeAtMost(maxLabels),
				mapKeysCheck{"label keys", checkLabelKey},
				mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(maxLabelValue)),
				noNUL("labels reach the sandbox's backend and the control-plane database as text, which cannot hold one"),
			},
		},
		"package_index_hosts": schema.ListAttribute{
			MarkdownDescription: "The hosts `network.package_indexes` expands to, sorted: what builds (and, with `package_indexes_in = \"build_and_sandbox\"`, sandboxes) may reach for packages.",
			Computed:            true,
			ElementType:         types.StringType,
		},
		"region": schema.StringAttribute{
			MarkdownDescription: "Region the snapshot is built in and its sandboxes run in, as a Daytona region id or name. Unset means the sandbox provider's `target` " +
				"(else the organization's default region). The `local` backend refuses it." + bakes,
			Optional:   true,
			Validators: []validator.String{stringvalidator.LengthBetween(1, 64)},
		},
		"registry": schema.StringAttribute{
			MarkdownDescription: "Name of the `trueforge_registry` that `image` or the `dockerfile`'s base is pulled from. Unset means a public image." + bakes,
			Optional:            true,
			Validators:          []validator.String{validName()},
		},
		"volumes": schema.ListNestedAttribute{
			MarkdownDescription: fmt.Sprintf("Volumes (`trueforge_volume`) mounted read-write in every sandbox of the environment; at most %d, each at its own path. "+
				"Files written there outlive sandboxes and are shared by every sandbox that mounts the volume.", sandbox.MaxVolumes) + live,
			Optional:   true,
			Validators: []validator.List{listvalidator.SizeAtMost(sandbox.MaxVolumes)},
			NestedObject: schema.NestedAttributeObject{
				Attributes: map[string]schema.Attribute{
					"volume": schema.StringAttribute{
						MarkdownDescription: "Name of the `trueforge_volume`, of the same sandbox provider.",
						Required:            true,
						Validators:          []validator.String{validName()},
					},
					"mount_path": schema.StringAttribute{
						MarkdownDescription: "Absolute path inside the sandbox, outside the system folders (for example `/data` or `/workspace/shared`).",
						Required:            true,
						Validators:          []validator.String{stringCheck{"an absolute path outside the system folders", checkMountPath}},
					},
					"subpath": schema.StringAttribute{
						MarkdownDescription: "A folder of the volume to mount instead of all of it: a relative path without `..`. Created when missing.",
						Optional:            true,
						Validators:          []validator.String{stringCheck{"a relative path inside the volume", checkSubpath}},
					},
				},
			},
		},
	}
}

// networkSettingsAttributes are the network object's attributes added after the first
// release.
func networkSettingsAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"allow_cidrs": schema.ListAttribute{
			MarkdownDescription: fmt.Sprintf("Address ranges (CIDR, IPv4 or IPv6) the sandbox may reach besides `allow_domains`, matched against the address actually connected to; at most %d. "+
				"Public ranges only: a range inside the ranges no sandbox may reach (private, loopback, link-local and metadata, CGNAT, documentation, multicast, reserved) is refused at plan, on every backend. "+
				"On Daytona this is the sandbox's `networkAllowList`. Ignored while `block_all` is on.", maxAllowCIDRs),
			Optional:    true,
			ElementType: types.StringType,
			Validators: []validator.List{
				listvalidator.SizeAtMost(maxAllowCIDRs), listvalidator.UniqueValues(),
				listvalidator.ValueStringsAre(stringCheck{"a CIDR of public addresses such as 192.30.252.0/22", checkCIDR}),
			},
		},
		"package_indexes": schema.ListAttribute{
			MarkdownDescription: "Public package indexes that may be reached, by name: " + quotedNames(packageindex.Names()) + ". " +
				"Each expands to its hosts (shown in `package_index_hosts`), enforced like `allow_domains`. " +
				"An empty `allow_domains` still admits every public host. Under `block_all`, sandboxes stay blocked and builds reach these indexes alone.",
			Optional:    true,
			ElementType: types.StringType,
			Validators: []validator.List{
				listvalidator.UniqueValues(),
				listvalidator.ValueStringsAre(stringvalidator.OneOf(packageindex.Names()...)),
			},
		},
		"package_indexes_in": schema.StringAttribute{
			MarkdownDescription: "Where `package_indexes` may be reached: `build` (snapshot builds only: packages are installed and pinned at build time, " +
				"and a sandbox cannot fetch more) or `build_and_sandbox`. Defaults to `build`.",
			Optional:   true,
			Validators: []validator.String{stringvalidator.OneOf(packageindex.InBuild, packageindex.InBuildAndSandbox)},
		},
	}
}

func quotedNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}

func checkLabelKey(k string) string {
	if sandbox.ReservedLabel(k) {
		return fmt.Sprintf("keys starting with %q are set by the harness itself; choose another prefix (for example \"team\" or \"cost-center\")", sandbox.ReservedLabelPrefix)
	}
	if !labelKeyRe.MatchString(k) {
		return "use letters, digits, '.', '_', '/' and '-', starting and ending with a letter or digit, at most 63 characters"
	}
	return ""
}

func checkCIDR(s string) string {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "not a CIDR (an address, '/', a prefix length): " + err.Error()
	}
	if p.Masked() != p {
		return fmt.Sprintf("has host bits set; write it as %s", p.Masked())
	}
	// The egress proxy's own list (egress.AlwaysForbidden), so that plan refuses exactly
	// the ranges no sandbox may ever reach.
	if r, always := egress.AlwaysForbidden(p); always {
		return fmt.Sprintf("%s lies in %s, a range no sandbox may reach whatever its policy (%s), so this entry could never admit a connection. "+
			"List public ranges only (for example 192.30.252.0/22); for a service on a private network, publish it under a public address or host name, or run the agent's tools outside the sandbox", s, r, egress.ForbiddenRangeText())
	}
	return ""
}

// checkMountPath and checkSubpath are the runtimes' own rules (sandbox.CheckMountPath,
// sandbox.CheckSubpath), asked at plan time so that a plan never passes what a sandbox
// would refuse.
func checkMountPath(s string) string { return errString(sandbox.CheckMountPath(s)) }

func checkSubpath(s string) string { return errString(sandbox.CheckSubpath(s)) }

// checkDockerfile is sandbox.CheckDockerfile as a plan-time check.
func checkDockerfile(s string) string { return errString(sandbox.CheckDockerfile(s)) }

// volumeModel is one element of an environment's volumes.
type volumeModel struct {
	Volume    types.String `tfsdk:"volume"`
	MountPath types.String `tfsdk:"mount_path"`
	Subpath   types.String `tfsdk:"subpath"`
}

var volumeAttrTypes = map[string]attr.Type{"volume": types.StringType, "mount_path": types.StringType, "subpath": types.StringType}

// settingsKnown reports whether every build input of the settings document is known.
func (m *environmentModel) settingsKnown() bool {
	return !m.GPU.IsUnknown() && !m.GPUType.IsUnknown() && !m.Dockerfile.IsUnknown() && !m.BuildContext.IsUnknown() &&
		!m.Entrypoint.IsUnknown() && !m.Region.IsUnknown() && !m.Registry.IsUnknown() && allKnown(m.Entrypoint.Elements())
}

func allKnown(vals []attr.Value) bool {
	for _, v := range vals {
		if v.IsUnknown() {
			return false
		}
	}
	return true
}

// addSettingsSpec sets the build inputs of the settings document on spec; ContextHash
// comes from readContext.
func (m *environmentModel) addSettingsSpec(ctx context.Context, spec *sandbox.SnapshotSpec) {
	spec.GPU = m.GPU.ValueInt64()
	spec.GPUType = m.GPUType.ValueString()
	spec.Dockerfile = m.Dockerfile.ValueString()
	spec.Entrypoint = listFrom(ctx, m.Entrypoint)
	spec.Region = m.Region.ValueString()
	spec.Registry = m.Registry.ValueString()
}

// contextDir is the build_context folder as an absolute path ("" when unset). A relative
// path is relative to the directory Terraform runs in, as path.module's are.
func (m *environmentModel) contextDir() string {
	dir := m.BuildContext.ValueString()
	if dir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// readContext reads and hashes the build context into spec, with a diagnostic on
// build_context when it cannot be used.
func (m *environmentModel) readContext(spec *sandbox.SnapshotSpec, diags *diag.Diagnostics) {
	dir := m.contextDir()
	if dir == "" {
		return
	}
	bc, err := sandbox.ReadBuildContext(dir)
	if err != nil {
		diags.AddAttributeError(path.Root("build_context"), "Invalid Build Context", err.Error())
		return
	}
	spec.ContextHash = bc.Hash
}

// settings is the environment's settings document as configured; spec holds its build
// inputs with the context's hash.
func (m *environmentModel) settings(ctx context.Context, spec sandbox.SnapshotSpec) store.EnvironmentSettings {
	n := m.networkSettings(ctx)
	st := store.EnvironmentSettings{
		GPU: spec.GPU, GPUType: spec.GPUType, Dockerfile: spec.Dockerfile, Entrypoint: spec.Entrypoint, Region: spec.Region,
		Registry: spec.Registry, BuildContext: m.BuildContext.ValueString(), ContextHash: spec.ContextHash, Rebuild: spec.Rebuild,
		AllowCIDRs: n.allowCIDRs, PackageIndexes: n.packageIndexes, PackageIndexesIn: n.packageIndexesIn,
	}
	if labels := mapFrom(ctx, m.Labels); len(labels) > 0 {
		st.Labels = labels
	}
	st.Volumes = m.volumes(ctx)
	st.KeepVersions = m.keepVersions() // environment_versions.go
	st.WarmPool = m.warmPool(ctx)      // environment_warm_pool.go
	st.Rollout = m.rollout(ctx)        // environment_rollout.go
	return st
}

func (m *environmentModel) volumes(ctx context.Context) []store.EnvironmentVolume {
	if m.Volumes.IsNull() || m.Volumes.IsUnknown() {
		return nil
	}
	var vols []volumeModel
	m.Volumes.ElementsAs(ctx, &vols, false)
	out := make([]store.EnvironmentVolume, 0, len(vols))
	for _, v := range vols {
		out = append(out, store.EnvironmentVolume{Volume: v.Volume.ValueString(), MountPath: v.MountPath.ValueString(), Subpath: v.Subpath.ValueString()})
	}
	return out
}

// checkVolumeMounts refuses two volumes at one path or one inside another: the second
// mount would hide the first.
func checkVolumeMounts(vols []store.EnvironmentVolume, diags *diag.Diagnostics) {
	for i, a := range vols {
		for j, b := range vols {
			if i < j && sandbox.MountsOverlap(a.MountPath, b.MountPath) {
				diags.AddAttributeError(path.Root("volumes").AtListIndex(j).AtName("mount_path"), "Overlapping Volume Mounts",
					fmt.Sprintf("volumes[%d] at %s and volumes[%d] at %s overlap: one would hide the other's files. Mount each volume at its own folder, side by side (for example /data/a and /data/b).",
						i, a.MountPath, j, b.MountPath))
			}
		}
	}
}

type networkSettings struct {
	allowCIDRs       []string
	packageIndexes   []string
	packageIndexesIn string
}

func (m *environmentModel) networkSettings(ctx context.Context) networkSettings {
	if m.Network.IsNull() || m.Network.IsUnknown() {
		return networkSettings{}
	}
	var n networkModel
	m.Network.As(ctx, &n, struct{ UnhandledNullAsEmpty, UnhandledUnknownAsEmpty bool }{true, true})
	out := networkSettings{allowCIDRs: listFrom(ctx, n.AllowCIDRs), packageIndexes: listFrom(ctx, n.PackageIndexes)}
	if len(out.packageIndexes) > 0 {
		out.packageIndexesIn = n.PackageIndexesIn.ValueString()
		if out.packageIndexesIn == "" {
			out.packageIndexesIn = packageindex.DefaultIn
		}
	}
	return out
}

// packageIndexHosts is package_index_hosts for the configured network (null when no
// index is named, unknown while the names are).
func (m *environmentModel) packageIndexHosts(ctx context.Context) types.List {
	if m.Network.IsUnknown() {
		return types.ListUnknown(types.StringType)
	}
	if !m.Network.IsNull() {
		if v, ok := m.Network.Attributes()["package_indexes"]; ok && v.IsUnknown() {
			return types.ListUnknown(types.StringType)
		}
	}
	names := m.networkSettings(ctx).packageIndexes
	if len(names) == 0 {
		return types.ListNull(types.StringType)
	}
	hosts, err := packageindex.Hosts(names)
	if err != nil {
		return types.ListNull(types.StringType) // the attribute's validator says why
	}
	return stringList(hosts)
}

// settingsFromStore sets the attributes of the settings document from the control
// plane, keeping the configuration's representation of what is unset (null or empty).
func (m *environmentModel) settingsFromStore(st store.EnvironmentSettings) {
	m.GPU = optionalInt(st.GPU)
	m.GPUType = optionalString(st.GPUType)
	m.Dockerfile = optionalString(st.Dockerfile)
	m.BuildContext = optionalString(st.BuildContext)
	m.Region = optionalString(st.Region)
	m.Registry = optionalString(st.Registry)
	if len(st.Entrypoint) > 0 || !m.Entrypoint.IsNull() {
		m.Entrypoint = stringList(st.Entrypoint)
	}
	m.Labels = keepEmptyMap(m.Labels, st.Labels)
	m.WarmPool = warmPoolValue(m.WarmPool, st.WarmPool)
	m.Rollout = rolloutValue(st.Rollout) // environment_rollout.go
	// Unset stays unset and [] stays []; anything else reads back what is stored.
	if len(st.Volumes) > 0 || m.Volumes.IsUnknown() || (!m.Volumes.IsNull() && len(m.Volumes.Elements()) > 0) {
		vals := make([]attr.Value, 0, len(st.Volumes))
		for _, v := range st.Volumes {
			vals = append(vals, types.ObjectValueMust(volumeAttrTypes, map[string]attr.Value{
				"volume": types.StringValue(v.Volume), "mount_path": types.StringValue(v.MountPath), "subpath": optionalString(v.Subpath),
			}))
		}
		m.Volumes = types.ListValueMust(types.ObjectType{AttrTypes: volumeAttrTypes}, vals)
	}
	m.PackageIndexHosts = types.ListNull(types.StringType)
	if hosts, err := packageindex.Hosts(st.PackageIndexes); err == nil && len(hosts) > 0 {
		m.PackageIndexHosts = stringList(hosts)
	}
}

func optionalInt(v int64) types.Int64 {
	if v == 0 {
		return types.Int64Null()
	}
	return types.Int64Value(v)
}

// applyContext reads the build context again at apply into spec and refuses it when it
// no longer hashes as it did at plan (a file changed in between): building other
// content than the plan showed would be a lie.
func (m *environmentModel) applyContext(spec *sandbox.SnapshotSpec, diags *diag.Diagnostics) bool {
	m.readContext(spec, diags)
	if diags.HasError() {
		return false
	}
	if planned := m.BuildHash.ValueString(); !m.BuildHash.IsUnknown() && planned != "" && spec.BuildHash() != planned {
		diags.AddAttributeError(path.Root("build_context"), "Build Context Changed Since Plan",
			fmt.Sprintf("The files of build_context %q changed between plan and apply, so the snapshot would not be the one the plan showed. Run plan again, then apply that plan.", m.BuildContext.ValueString()))
		return false
	}
	return true
}

// buildRequest is the build of spec, with the context folder when a Dockerfile uses one.
func (m *environmentModel) buildRequest(spec sandbox.SnapshotSpec, base string, blockNetwork bool) sandbox.BuildRequest {
	req := sandbox.BuildRequest{Spec: spec, Base: base, BlockNetwork: blockNetwork}
	m.buildNetwork(context.Background(), &req) // package_indexes.go: blocked, through an egress proxy, or open
	if spec.Dockerfile != "" {
		req.ContextDir = m.contextDir()
	}
	return req
}

func keepEmptyList(prior types.List, items []string) types.List {
	if len(items) == 0 {
		if !prior.IsNull() && !prior.IsUnknown() && len(prior.Elements()) == 0 {
			return prior
		}
		return types.ListNull(types.StringType)
	}
	return stringList(items)
}

// packageIndexesIn keeps package_indexes_in unset when the configuration left it to its
// default.
func packageIndexesIn(prior types.String, stored string) types.String {
	if stored == "" || (prior.IsNull() && stored == packageindex.DefaultIn) {
		return types.StringNull()
	}
	return types.StringValue(stored)
}
