package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type snapshotManifestModel struct {
	SnapshotID   types.String `tfsdk:"snapshot_id"`
	Environment  types.String `tfsdk:"environment"`
	Digest       types.String `tfsdk:"digest"`
	Packages     types.List   `tfsdk:"packages"`
	PackageCount types.Int64  `tfsdk:"package_count"`
	Counts       types.Map    `tfsdk:"counts"`
	Omitted      types.Int64  `tfsdk:"omitted"`
	Bytes        types.Int64  `tfsdk:"bytes"`
	Distro       types.String `tfsdk:"distro"`
	CycloneDX    types.String `tfsdk:"cyclonedx"`
}

// manifestPackageAttrTypes is one element of `packages`.
var manifestPackageAttrTypes = nestedAttrTypes(snapshotManifestSchema(), "packages")

// NewSnapshotManifestDataSource is the trueforge_snapshot_manifest data source.
func NewSnapshotManifestDataSource() datasource.DataSource {
	return &dataSource[snapshotManifestModel]{typeName: "_snapshot_manifest", schema: snapshotManifestSchema(), read: readSnapshotManifest}
}

func snapshotManifestSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Reads what a snapshot contains: the packages its package databases list (Debian's dpkg, Alpine's apk), " +
			"the Python distributions and the Node packages installed in it, recorded when its build turned Ready, and the same as a " +
			"CycloneDX 1.5 SBOM. Set exactly one of `snapshot_id` and `environment`. The manifest is capped at 4 MiB " +
			"(`omitted` counts the packages left out); see the supply chain guide for what is read and where.",
		Attributes: map[string]schema.Attribute{
			"snapshot_id": schema.StringAttribute{
				MarkdownDescription: "The snapshot to read (an environment's `snapshot_id`). Conflicts with `environment`; computed from it when that is set.",
				Optional:            true,
				Computed:            true,
				Validators: []validator.String{stringvalidator.ExactlyOneOf(path.MatchRoot("snapshot_id"), path.MatchRoot("environment")),
					stringvalidator.LengthAtLeast(1)},
			},
			"environment": schema.StringAttribute{
				MarkdownDescription: "Name of an environment whose current snapshot to read. Conflicts with `snapshot_id`.",
				Optional:            true,
				Validators:          []validator.String{validName()},
			},
			"digest": computedString("`sha256:` and the hex SHA-256 of the manifest's canonical JSON: what artifacts record as their `manifest_digest`."),
			"packages": schema.ListNestedAttribute{
				MarkdownDescription: "The packages, sorted by ecosystem, name and version.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"ecosystem": schema.StringAttribute{MarkdownDescription: "`deb`, `apk`, `pypi` or `npm`.", Computed: true},
					"name":      schema.StringAttribute{MarkdownDescription: "Package name (PyPI names normalized: lower case, runs of `-_.` as `-`).", Computed: true},
					"version":   schema.StringAttribute{MarkdownDescription: "Installed version, as the package database spells it.", Computed: true},
					"arch":      schema.StringAttribute{MarkdownDescription: "Architecture (`deb`, `apk`); empty for the others.", Computed: true},
					"purl":      schema.StringAttribute{MarkdownDescription: "Package URL, for example `pkg:pypi/requests@2.31.0`.", Computed: true},
				}},
			},
			"package_count": computedInt64("How many packages the manifest lists."),
			"counts": schema.MapAttribute{
				MarkdownDescription: "Packages per ecosystem (only ecosystems with at least one).",
				Computed:            true,
				ElementType:         types.Int64Type,
			},
			"omitted":   computedInt64("Packages left out to keep the manifest within 4 MiB (0 when none)."),
			"bytes":     computedInt64("Size of the manifest's canonical JSON."),
			"distro":    computedString("`ID` and `VERSION_ID` of the snapshot's os-release (for example `debian 12`); empty when it has none."),
			"cyclonedx": computedString("The manifest as a CycloneDX 1.5 JSON SBOM (one `library` component per package, with its purl)."),
		},
	}
}

// readSnapshotManifest reads the manifest of the snapshot named, or of the environment's.
func readSnapshotManifest(ctx context.Context, cp *controlPlane, m *snapshotManifestModel, diags *diag.Diagnostics) {
	id, attrPath := m.SnapshotID.ValueString(), path.Root("snapshot_id")
	if name := m.Environment.ValueString(); name != "" {
		attrPath = path.Root("environment")
		env, ok := lookupNamed(ctx, "Environment", attrPath, name, cp.store.GetEnvironment,
			fmt.Sprintf("No environment %q exists in this control plane. Check the name, or reference the trueforge_environment resource so Terraform creates it first.", name), diags)
		if !ok {
			return
		}
		id = env.SnapshotID
	}
	snap, ok := lookupNamed(ctx, "Snapshot", attrPath, id, cp.store.GetSnapshot,
		fmt.Sprintf("No snapshot %q exists in this control plane. Use an environment's snapshot_id, or set environment instead.", id), diags)
	if !ok {
		return
	}
	coord, _, err := cp.coordinator(ctx, snap.Provider)
	if err != nil {
		diags.AddError("Error Opening Sandbox Provider", fmt.Sprintf("The backend of sandbox provider %q could not be opened to read snapshot %s.\n\nOriginal Error: %s", snap.Provider, id, err))
		return
	}
	sm, err := coord.Manifest(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		diags.AddAttributeError(attrPath, "Snapshot Manifest Not Available",
			fmt.Sprintf("Snapshot %s (status %s) has no package manifest. A manifest is recorded when a build turns Ready; a Building snapshot "+
				"has one after its build. A failed extraction is retried when this data source is read again (run with TF_LOG_PROVIDER=WARN to see why it failed).", id, snap.Status))
		return
	}
	if err != nil {
		diags.AddError("Error Reading Snapshot Manifest", fmt.Sprintf("The manifest of snapshot %s could not be read.\n\nOriginal Error: %s", id, err))
		return
	}
	man := sm.Manifest
	list := objectList(manifestPackageAttrTypes, man.Packages, func(p manifest.Package) map[string]attr.Value {
		return map[string]attr.Value{
			"ecosystem": types.StringValue(p.Ecosystem), "name": types.StringValue(p.Name), "version": types.StringValue(p.Version),
			"arch": types.StringValue(p.Arch), "purl": types.StringValue(manifest.PURL(man, p)),
		}
	}, diags)
	counts := map[string]attr.Value{}
	for eco, n := range man.Counts() {
		counts[eco] = types.Int64Value(int64(n))
	}
	countMap, d := types.MapValue(types.Int64Type, counts)
	diags.Append(d...)
	bom, err := manifest.CycloneDX(man, id)
	if err != nil {
		diags.AddError("Error Rendering SBOM", fmt.Sprintf("The CycloneDX document of snapshot %s could not be rendered.\n\nOriginal Error: %s", id, err))
		return
	}
	distro := man.Distro
	if man.DistroVersion != "" {
		distro += " " + man.DistroVersion
	}
	m.SnapshotID = types.StringValue(id)
	m.Digest = types.StringValue(sm.Digest)
	m.Packages = list
	m.PackageCount = types.Int64Value(int64(len(man.Packages)))
	m.Counts = countMap
	m.Omitted = types.Int64Value(int64(man.Omitted))
	m.Bytes = types.Int64Value(sm.Bytes)
	m.Distro = types.StringValue(distro)
	m.CycloneDX = types.StringValue(string(bom))
}
