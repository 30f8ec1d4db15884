package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var _ action.ActionWithConfigure = (*sandboxesStopAction)(nil)

// NewSandboxesStopAction is trueforge_sandboxes_stop.
func NewSandboxesStopAction() action.Action { return &sandboxesStopAction{} }

type sandboxesStopAction struct{ actionBase }

type sandboxesStopModel struct {
	Environment types.String `tfsdk:"environment"`
	Agent       types.String `tfsdk:"agent"`
}

func (a *sandboxesStopAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_sandboxes_stop"
}

func (a *sandboxesStopAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	oneOf := []validator.String{stringvalidator.ExactlyOneOf(path.MatchRoot("environment"), path.MatchRoot("agent"))}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Stops every running sandbox of an environment, or of an agent's sessions, now: for example after a secret " +
			"leaked, to end every process that may hold it. Give exactly one of `environment` and `agent`; you must own it (on " +
			"PostgreSQL, your role), as for any change to it. Each sandbox is stopped as the harness's idle stop does it (its " +
			"workspace is kept, and the session's next sandbox call starts it again with the environment's settings and secrets " +
			"as they are then); a sandbox running a command at that moment is left running and counted as busy: run the action " +
			"again. Progress messages report each sandbox, and the last one how many were stopped. On PostgreSQL a team role reads its " +
			"agents' sandboxes but may not change them, so the action refuses it up front (\"Sandboxes Not Stoppable By This Role\"): " +
			"there the harness's operator stops them. Needs Terraform 1.14 or later.",
		Attributes: map[string]schema.Attribute{
			"environment": schema.StringAttribute{
				MarkdownDescription: "Stop the sandboxes made from this environment (by name), whichever agent's sessions they serve.",
				Optional:            true,
				Validators:          oneOf,
			},
			"agent": schema.StringAttribute{
				MarkdownDescription: "Stop the sandboxes of this agent's sessions (by name).",
				Optional:            true,
				Validators:          oneOf,
			},
		},
	}
}

func (a *sandboxesStopAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var cfg sandboxesStopModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || !a.configured(resp) {
		return
	}
	cp := a.cp
	kind, name, owner, err := "Environment", cfg.Environment.ValueString(), "", error(nil)
	if name != "" {
		var env store.Environment
		env, err = cp.store.GetEnvironment(ctx, name)
		owner = env.Owner
	} else {
		kind, name = "Agent", cfg.Agent.ValueString()
		var ag store.Agent
		ag, err = cp.store.GetAgent(ctx, name)
		owner = ag.Owner
	}
	if errors.Is(err, store.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root(strings.ToLower(kind)), kind+" Not Found", fmt.Sprintf("No %s %q is in the control plane; name one that exists.", strings.ToLower(kind), name))
		return
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Stopping Sandboxes", fmt.Sprintf("%s %q", strings.ToLower(kind), name), err)
		return
	}
	if owner != cp.owner {
		cp.addOwnerError(&resp.Diagnostics, kind, name, owner, "stopped (its sandboxes)")
		return
	}
	if refuseReadOnlyRole(ctx, &resp.Diagnostics, cp, "Sandboxes Not Stoppable", "stopping sandboxes",
		"On a PostgreSQL control plane this action cannot stop sandboxes for a team: ask the operator of the harness to stop them "+
			"(the agent's idle stop does it too, once the sandbox is idle), and list what still runs with the trueforge_sandboxes "+
			"data source.") {
		return
	}
	recs, err := cp.store.ListSessionSandboxes(ctx)
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Stopping Sandboxes", "listing the session sandboxes", err)
		return
	}
	m := cp.sandboxes()
	stopped, busy := 0, 0
	for _, rec := range recs {
		if rec.State != store.SandboxStateRunning {
			continue
		}
		if kind == "Environment" && rec.Environment != name {
			continue
		}
		if kind == "Agent" {
			s, err := cp.store.GetSession(ctx, rec.SessionID)
			if err != nil || s.Agent != name {
				continue
			}
		}
		ok, isBusy, err := m.StopNow(ctx, rec.SessionID)
		switch {
		case err != nil:
			addOperationError(&resp.Diagnostics, "Error Stopping Sandboxes", fmt.Sprintf("sandbox %s of session %s", rec.SandboxID, rec.SessionID), err)
			return
		case ok:
			stopped++
			progress(resp, "stopped sandbox %s (session %s)", rec.SandboxID, rec.SessionID)
		case isBusy:
			busy++
			progress(resp, "sandbox %s (session %s) is running a command: left running", rec.SandboxID, rec.SessionID)
		}
	}
	progress(resp, "%s %q: %d running sandbox(es) stopped, %d busy left running", strings.ToLower(kind), name, stopped, busy)
	if busy > 0 {
		resp.Diagnostics.AddWarning("Busy Sandboxes Left Running",
			fmt.Sprintf("%d sandbox(es) of %s %q were running a command and were left running. Run the action again to stop them.", busy, strings.ToLower(kind), name))
	}
}
