package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// What the harness creates (sessions and their sandboxes) has no managed resource, and a
// list resource needs one (provider_list.go says where Terraform and the framework
// require it), so it is read with plural data sources: trueforge_sessions here,
// trueforge_sandboxes and trueforge_snapshots beside it.

type sessionsDataSourceModel struct {
	Agent    types.String `tfsdk:"agent"`
	IDs      types.List   `tfsdk:"ids"`
	Owner    types.String `tfsdk:"owner"`
	Sessions types.List   `tfsdk:"sessions"`
}

var sessionItemAttrTypes = nestedAttrTypes(sessionsDataSourceSchema(), "sessions")

// NewSessionsDataSource is the trueforge_sessions data source.
func NewSessionsDataSource() datasource.DataSource {
	return &dataSource[sessionsDataSourceModel]{typeName: "_sessions", schema: sessionsDataSourceSchema(), read: listSessions}
}

// runtimeReadableDoc says who may read what the harness records.
const runtimeReadableDoc = "On SQLite every owner reads them all. On PostgreSQL row-level security decides: a harness role (a member of " +
	"`trueforge_harness`) reads them all, and a team role reads only the sessions of the agents it owns and their sandboxes (read " +
	"only: the harness alone writes them)."

func sessionsDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Lists the harness's sessions (conversations with an agent), newest first, optionally filtered by agent and " +
			"owner (the user or team the session is for); a filter that matches nothing gives an empty list. " + runtimeReadableDoc,
		Attributes: map[string]schema.Attribute{
			"agent": optionalFilter("Only sessions with this agent.", validName()),
			"owner": optionalFilter("Only sessions of this owner.", stringvalidator.LengthAtLeast(1)),
			"ids":   computedStringList("The ids of the matching sessions, newest first."),
			"sessions": schema.ListNestedAttribute{
				MarkdownDescription: "The matching sessions, newest first.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"id":            computedString("The session's id."),
						"agent":         computedString("The agent the session talks to."),
						"owner":         computedString("Who the session is for."),
						"environment":   computedString("The session's one-off environment; null when it uses its agent's."),
						"created_at":    computedString("When the session was created (RFC 3339, UTC)."),
						"last_activity": computedString("When the session last changed: its last turn or event (RFC 3339, UTC)."),
						"input_tokens":  computedInt64("Model input tokens the session used."),
						"output_tokens": computedInt64("Model output tokens the session used."),
					},
				},
			},
		},
	}
}

// listSessions lists the sessions that match the filters.
func listSessions(ctx context.Context, cp *controlPlane, m *sessionsDataSourceModel, diags *diag.Diagnostics) {
	sessions, err := cp.store.ListSessions(ctx, m.Owner.ValueString(), m.Agent.ValueString())
	if err != nil {
		runtimeReadError(diags, cp, "Sessions", err)
		return
	}
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.ID
	}
	m.Sessions = objectList(sessionItemAttrTypes, sessions, sessionAttrs, diags)
	m.IDs = stringList(ids)
}

func sessionAttrs(s store.Session) map[string]attr.Value {
	return map[string]attr.Value{
		"id":            types.StringValue(s.ID),
		"agent":         types.StringValue(s.Agent),
		"owner":         types.StringValue(s.Owner),
		"environment":   optionalString(s.Environment),
		"created_at":    timestamp(s.CreatedAt),
		"last_activity": timestamp(s.UpdatedAt),
		"input_tokens":  types.Int64Value(s.InputTokens),
		"output_tokens": types.Int64Value(s.OutputTokens),
	}
}

// timestamp is t as RFC 3339 in UTC, to the millisecond the store keeps.
func timestamp(t time.Time) types.String {
	return types.StringValue(t.UTC().Format(time.RFC3339Nano))
}

// runtimeReadError reports a failed read of what the harness records (kinds: "Sessions"),
// saying so plainly when the role may not read it.
func runtimeReadError(diags *diag.Diagnostics, cp *controlPlane, kinds string, err error) {
	if errors.Is(err, store.ErrForbidden) {
		diags.AddError(kinds+" Not Readable By This Role",
			fmt.Sprintf("Role %q may not read the harness's %s: on PostgreSQL a team role reads the sessions of its own agents and their "+
				"sandboxes, and a harness role (a member of trueforge_harness) all of them; this role has neither kind's grants. Have the "+
				"database's owner run `trueforge-harness db migrate` and then `trueforge-harness db roles --team <role> --apply` (see the "+
				"PostgreSQL guide).\n\nOriginal Error: %s", cp.owner, strings.ToLower(kinds), err))
		return
	}
	listError(diags, kinds, err)
}

// refuseReadOnlyRole adds an error and reports true when the control plane's role may
// only read sessions (a PostgreSQL team role), which doing ("stopping sandboxes")
// changes; summary is the error's subject ("Sandboxes Not Stoppable"), instead what the
// user can do instead.
func refuseReadOnlyRole(ctx context.Context, diags *diag.Diagnostics, cp *controlPlane, summary, doing, instead string) bool {
	ok, err := cp.store.RunsSessions(ctx)
	if err != nil {
		addOperationError(diags, summary, "checking the role's privileges on sessions", err)
		return true
	}
	if ok {
		return false
	}
	diags.AddError(summary+" By This Role",
		fmt.Sprintf("Role %q is a team role: on PostgreSQL it reads the sessions of its own agents and their sandboxes (trueforge_sessions, "+
			"trueforge_sandboxes) but may not change them, and %s changes them; only the harness (a role in trueforge_harness) "+
			"writes them. %s", cp.owner, doing, instead))
	return true
}
