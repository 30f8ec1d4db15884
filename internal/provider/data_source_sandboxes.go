package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type sandboxesDataSourceModel struct {
	Agent       types.String `tfsdk:"agent"`
	Environment types.String `tfsdk:"environment"`
	Owner       types.String `tfsdk:"owner"`
	Sandboxes   types.List   `tfsdk:"sandboxes"`
	State       types.String `tfsdk:"state"`
}

var sandboxItemAttrTypes = nestedAttrTypes(sandboxesDataSourceSchema(), "sandboxes")

// sandboxStates are the states the harness records for a session's sandbox.
var sandboxStates = []string{store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived,
	store.SandboxStateDeleted, store.SandboxStateLost, store.SandboxStateChanging}

// NewSandboxesDataSource is the trueforge_sandboxes data source.
func NewSandboxesDataSource() datasource.DataSource {
	return &dataSource[sandboxesDataSourceModel]{typeName: "_sandboxes", schema: sandboxesDataSourceSchema(), read: listSandboxes}
}

func sandboxesDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Lists the sandboxes the harness made for sessions (at most one per session), as it records them, oldest " +
			"first, optionally filtered by state, agent, session owner and environment: for example every sandbox still `running` " +
			"for an agent. A filter that matches nothing gives an empty list. `idle_since` is when a call last used the sandbox, the " +
			"clock of its agent's idle stop, archive and delete. " + runtimeReadableDoc,
		Attributes: map[string]schema.Attribute{
			"agent":       optionalFilter("Only sandboxes of sessions with this agent.", validName()),
			"environment": optionalFilter("Only sandboxes made from this environment.", validName()),
			"owner":       optionalFilter("Only sandboxes of sessions of this owner.", stringvalidator.LengthAtLeast(1)),
			"state": optionalFilter("Only sandboxes in this state: `running`, `stopped`, `archived`, `deleted`, `lost` (died under a call; "+
				"the next call recreates it) or `changing` (a reaper is stopping, archiving or deleting it).", stringvalidator.OneOf(sandboxStates...)),
			"sandboxes": schema.ListNestedAttribute{
				MarkdownDescription: "The matching sandboxes, oldest first.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: computedStrings(map[string]string{
						"session_id":       "The session the sandbox belongs to.",
						"sandbox_id":       "The backend's id of the sandbox.",
						"state":            "The state the harness recorded (see `state`).",
						"agent":            "The session's agent.",
						"owner":            "The session's owner.",
						"environment":      "The environment the sandbox was made from.",
						"snapshot_id":      "The snapshot the sandbox was made from.",
						"sandbox_provider": "The sandbox provider that runs it.",
						"created_at":       "When the sandbox was made (RFC 3339, UTC).",
						"idle_since":       "When a call last used it (RFC 3339, UTC).",
						"state_since":      "When it entered its state (RFC 3339, UTC).",
					}),
				},
			},
		},
	}
}

// sandboxRow is a session's sandbox with its session.
type sandboxRow struct {
	b store.SessionSandbox
	s store.Session
}

// listSandboxes lists the sandboxes that match the filters.
func listSandboxes(ctx context.Context, cp *controlPlane, m *sandboxesDataSourceModel, diags *diag.Diagnostics) {
	sessions, err := cp.store.ListSessions(ctx, m.Owner.ValueString(), m.Agent.ValueString())
	if err != nil {
		runtimeReadError(diags, cp, "Sandboxes", err)
		return
	}
	byID := make(map[string]store.Session, len(sessions))
	for _, s := range sessions {
		byID[s.ID] = s
	}
	boxes, err := cp.store.ListSessionSandboxes(ctx)
	if err != nil {
		runtimeReadError(diags, cp, "Sandboxes", err)
		return
	}
	rows := []sandboxRow{}
	for _, b := range boxes {
		s, ok := byID[b.SessionID]
		if ok && matches(m.State, b.State) && matches(m.Environment, b.Environment) {
			rows = append(rows, sandboxRow{b, s})
		}
	}
	m.Sandboxes = objectList(sandboxItemAttrTypes, rows, sandboxAttrs, diags)
}

func sandboxAttrs(r sandboxRow) map[string]attr.Value {
	return map[string]attr.Value{
		"session_id":       types.StringValue(r.b.SessionID),
		"sandbox_id":       types.StringValue(r.b.SandboxID),
		"state":            types.StringValue(r.b.State),
		"agent":            types.StringValue(r.s.Agent),
		"owner":            types.StringValue(r.s.Owner),
		"environment":      types.StringValue(r.b.Environment),
		"snapshot_id":      types.StringValue(r.b.SnapshotID),
		"sandbox_provider": types.StringValue(r.b.Provider),
		"created_at":       timestamp(r.b.CreatedAt),
		"idle_since":       timestamp(r.b.LastUsedAt),
		"state_since":      timestamp(r.b.StateAt),
	}
}

// computedStrings is a computed string attribute per name, documented by docs: the
// attributes of a list element that are all strings.
func computedStrings(docs map[string]string) map[string]schema.Attribute {
	attrs := make(map[string]schema.Attribute, len(docs))
	for name, doc := range docs {
		attrs[name] = computedString(doc)
	}
	return attrs
}
