package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/check"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var (
	_ action.ActionWithConfigure      = (*agentCheckAction)(nil)
	_ action.ActionWithValidateConfig = (*agentCheckAction)(nil)
)

// NewAgentCheckAction is trueforge_agent_check.
func NewAgentCheckAction() action.Action { return &agentCheckAction{} }

type agentCheckAction struct{ actionBase }

type agentCheckModel struct {
	Agent types.String `tfsdk:"agent"`
	Check types.String `tfsdk:"check"`
}

func (a *agentCheckAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent_check"
}

func (a *agentCheckAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Runs an agent check: a scripted conversation (the scripted model's turns) and expectations on what each " +
			"step did (exec exit codes, output patterns, files offered, no sandbox for a Q&A step), in a fresh session and a fresh " +
			"sandbox of the agent's environment, deleted afterwards. The check fails the apply, naming the failed step and " +
			"expectation, when an expectation does not hold. Trigger it after the environment's update " +
			"(`lifecycle { action_trigger { events = [after_update], actions = [action.trueforge_agent_check.x] } }`) so that an " +
			"environment change that breaks the agent fails the apply that made it. You must own the agent. The same check file " +
			"runs in any CI with `trueforge-harness check AGENT FILE --junit report.xml`. On PostgreSQL a team role reads its agents' sessions but may " +
			"not run one, so the action refuses it up front (\"Agent Check Not Runnable By This Role\"): run the check with " +
			"`trueforge-harness check` where the harness runs. Needs Terraform 1.14 or later.",
		Attributes: map[string]schema.Attribute{
			"agent": schema.StringAttribute{
				MarkdownDescription: "The agent to check (by name). Its sandbox settings and environment are used; its model is " +
					"replaced by the check's script, and its MCP servers are not called.",
				Required: true,
			},
			"check": schema.StringAttribute{
				MarkdownDescription: "The check file's content (JSON), usually `file(\"checks/agent.json\")`: " +
					"`{\"name\", \"timeout_seconds\" (default 300, at most 1800), \"steps\": [{\"name\", \"message\", \"turns\": [scripted " +
					"model turns], \"expect\": {\"exit_codes\", \"output_matches\", \"output_not_matches\", \"files_offered\", " +
					"\"no_sandbox\"}}]}`. It is validated at plan time.",
				Required: true,
			},
		},
	}
}

func (a *agentCheckAction) ValidateConfig(ctx context.Context, req action.ValidateConfigRequest, resp *action.ValidateConfigResponse) {
	var cfg agentCheckModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || cfg.Check.IsUnknown() || cfg.Check.IsNull() {
		return
	}
	if _, err := check.Parse([]byte(cfg.Check.ValueString())); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("check"), "Invalid Agent Check", err.Error())
	}
}

func (a *agentCheckAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var cfg agentCheckModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || !a.configured(resp) {
		return
	}
	f, err := check.Parse([]byte(cfg.Check.ValueString()))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("check"), "Invalid Agent Check", err.Error())
		return
	}
	cp, name := a.cp, cfg.Agent.ValueString()
	if refuseReadOnlyRole(ctx, &resp.Diagnostics, cp, "Agent Check Not Runnable", "a check (which runs a session)",
		"Run the same check file with `trueforge-harness check "+name+" FILE` where the harness runs (as its harness role), for "+
			"example in CI.") {
		return
	}
	progress(resp, "agent %q: running check %q (%d steps) in a fresh sandbox", name, f.Name, len(f.Steps))
	res, err := check.Run(ctx, check.Config{Store: cp.store, Sandboxes: cp.sandboxes(), Caller: cp.owner,
		Progress: func(msg string) { progress(resp, "agent %q: %s", name, msg) }}, name, f)
	switch {
	case errors.Is(err, check.ErrNotOwner):
		ag, _ := cp.store.GetAgent(ctx, name)
		cp.addOwnerError(&resp.Diagnostics, "Agent", name, ag.Owner, "checked")
		return
	case errors.Is(err, store.ErrNotFound):
		resp.Diagnostics.AddAttributeError(path.Root("agent"), "Agent Not Found", fmt.Sprintf("No agent %q is in the control plane: %v", name, err))
		return
	case errors.Is(err, agents.ErrNotReady):
		resp.Diagnostics.AddAttributeError(path.Root("agent"), "Agent Not Ready", fmt.Sprintf("The check of agent %q cannot run: %v", name, err))
		return
	case err != nil:
		addOperationError(&resp.Diagnostics, "Error Running Agent Check", fmt.Sprintf("agent %q", name), err)
		return
	}
	if res.Passed() {
		progress(resp, "agent %q: check %q passed: %d steps in %.1fs", name, f.Name, len(res.Steps), res.Duration.Seconds())
		return
	}
	for _, s := range res.Steps {
		if len(s.Failures) == 0 {
			continue
		}
		detail := fmt.Sprintf("Agent %q failed check %q at step %q:\n", name, f.Name, s.Name)
		for _, fl := range s.Failures {
			detail += fmt.Sprintf("  - %s: %s\n", fl.Expectation, fl.Message)
		}
		if s.Output != "" {
			detail += "\nThe step's tool output (its tail):\n" + s.Output + "\n"
		}
		detail += "\nThe environment or agent as just applied does not give the agent what the check expects. Fix it and apply again, " +
			"or run `trueforge-harness check " + name + " FILE` to reproduce (session " + res.SessionID + " keeps the conversation)."
		resp.Diagnostics.AddError("Agent Check Failed", detail)
		return
	}
}
