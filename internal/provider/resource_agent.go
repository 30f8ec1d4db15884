package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/skills"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type agentResource struct{ namedResource }

// agentModel is the trueforge_agent resource and the trueforge_agent data source.
type agentModel struct {
	CodeMode types.Bool `tfsdk:"code_mode"`
	// CodeModeLimits is codeModeLimitsModel.
	CodeModeLimits types.Object `tfsdk:"code_mode_limits"`
	Description    types.String `tfsdk:"description"`
	ID             types.String `tfsdk:"id"`
	Instructions   types.String `tfsdk:"instructions"`
	MaxTurns       types.Int64  `tfsdk:"max_turns"`
	MCPServers     types.List   `tfsdk:"mcp_servers"`
	Model          types.Object `tfsdk:"model"`
	Name           types.String `tfsdk:"name"`
	Owner          types.String `tfsdk:"owner"`
	Sandbox        types.Object `tfsdk:"sandbox"`
	Skills         types.List   `tfsdk:"skills"`
	TokenBudget    types.Int64  `tfsdk:"token_budget"`
}

type modelSettingsModel struct {
	APIKeyCredential types.String `tfsdk:"api_key_credential"`
	APIKeyEnv        types.String `tfsdk:"api_key_env"`
	BaseURL          types.String `tfsdk:"base_url"`
	Name             types.String `tfsdk:"name"`
	Provider         types.String `tfsdk:"provider"`
	Script           types.String `tfsdk:"script"`
}

type mcpServerModel struct {
	AllowedTools  types.List   `tfsdk:"allowed_tools"`
	Credential    types.String `tfsdk:"credential"`
	CredentialEnv types.String `tfsdk:"credential_env"`
	Name          types.String `tfsdk:"name"`
	URL           types.String `tfsdk:"url"`
}

type skillModel struct {
	Description types.String `tfsdk:"description"`
	Digest      types.String `tfsdk:"digest"`
	Name        types.String `tfsdk:"name"`
	Path        types.String `tfsdk:"path"`
}

type agentSandboxModel struct {
	ApproveCode         types.Bool   `tfsdk:"approve_code"`
	ArchiveAfterMinutes types.Int64  `tfsdk:"archive_after_minutes"`
	DeleteAfterMinutes  types.Int64  `tfsdk:"delete_after_minutes"`
	Enabled             types.Bool   `tfsdk:"enabled"`
	Environment         types.String `tfsdk:"environment"`
	// EnvironmentVersion pins a version (agent_environment_version.go).
	EnvironmentVersion types.String `tfsdk:"environment_version"`
	// ExtractLimits is extractLimitsModel.
	ExtractLimits   types.Object `tfsdk:"extract_limits"`
	FileDownloads   types.Bool   `tfsdk:"file_downloads"`
	IdleStopMinutes types.Int64  `tfsdk:"idle_stop_minutes"`
}

// The attribute types of an agent's objects, the resource's and the data source's
// alike (agentModel is both), read off the data source's schema.
var (
	modelSettingsAttrTypes = nestedAttrTypes(agentDataSourceSchema(), "model")
	mcpServerAttrTypes     = nestedAttrTypes(agentDataSourceSchema(), "mcp_servers")
	skillAttrTypes         = nestedAttrTypes(agentDataSourceSchema(), "skills")
	agentSandboxAttrTypes  = nestedAttrTypes(agentDataSourceSchema(), "sandbox")
)

// NewAgentResource is the trueforge_agent resource.
func NewAgentResource() resource.Resource { return &agentResource{named("agent")} }

// defaultAgentSandbox is the sandbox attribute of an agent that sets none: off.
func defaultAgentSandbox() types.Object { return sandboxObject(agentspec.DefaultSandbox()) }

func (r *agentResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	inPlace := " Changing it updates the agent in place."
	resp.Schema = schema.Schema{
		MarkdownDescription: "An agent the harness runs: its model, instructions, MCP servers, skills and sandbox settings. The sandbox is a " +
			"*tool*, off by default: with `sandbox.enabled`, a sandbox is provisioned from the selected environment only when a turn needs " +
			"one, stopped when idle, then archived, then deleted. Skills and Code Mode require the sandbox. Only Ready environments can be " +
			"selected, and an environment referenced by an agent with its sandbox enabled cannot be deleted. Skills are folders in the configuration: " +
			"plan reads and hashes them, so a file changed on disk plans an in-place update. An agent whose sandbox is off " +
			"references no environment and needs no sandbox provider. Editing an agent never changes a sandbox that already exists. " +
			"Model and MCP credentials stay in the harness's environment: the agent only names the variables.",
		Attributes: map[string]schema.Attribute{
			"code_mode": schema.BoolAttribute{
				MarkdownDescription: "Code Mode: the model writes a script that runs in the sandbox and calls MCP tools through a bridge to the harness, " +
					"so the sandbox never holds MCP tokens. Requires `sandbox.enabled = true`. Defaults to false." + inPlace,
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"code_mode_limits": codeModeLimitsSchema(inPlace),
			"max_turns": defaultedInt64(fmt.Sprintf("How many model steps the harness allows for one user message (a step is one model reply with the tool calls it makes); "+
				"the run stops with a clear message past it. %d to %d, defaults to %d.", 1, agentspec.MaxMaxTurns, agentspec.DefaultMaxTurns)+inPlace,
				agentspec.DefaultMaxTurns, int64validator.Between(agentBound("max_turns"))),
			"token_budget": defaultedInt64(fmt.Sprintf("How many tokens (input plus output, summed over the steps) one user message may use before the harness stops the run. "+
				"%d to %d, defaults to %d.", agentspec.MinTokenBudget, agentspec.MaxTokenBudget, agentspec.DefaultTokenBudget)+inPlace,
				agentspec.DefaultTokenBudget, int64validator.Between(agentBound("token_budget"))),
			"description": schema.StringAttribute{
				MarkdownDescription: "What the agent is for, shown to users." + inPlace,
				Optional:            true,
			},
			"id": keptString("The agent's name."),
			"instructions": schema.StringAttribute{
				MarkdownDescription: "The system prompt of the agent." + inPlace,
				Optional:            true,
			},
			"mcp_servers": schema.ListNestedAttribute{
				MarkdownDescription: "MCP servers the agent may call. The harness calls them (also for Code Mode scripts, through the bridge); " +
					"their credentials never enter the sandbox." + inPlace,
				Optional: true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"allowed_tools": schema.ListAttribute{
							MarkdownDescription: "Tools of the server the agent may call. Omitted or empty means every tool the server offers.",
							Optional:            true,
							ElementType:         types.StringType,
							Validators:          []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))},
						},
						"credential": schema.StringAttribute{
							MarkdownDescription: "Name of the credential the harness sends to this server as a bearer token: one its operator declares in the harness's " +
								"`--credentials` file, bound to this server's origin and to owners that include this agent's owner (the harness refuses otherwise, " +
								"and sends nothing). Name the credential, never the token. See the running-agents guide.",
							Optional:   true,
							Validators: []validator.String{validCredentialName()},
						},
						"credential_env": schema.StringAttribute{
							MarkdownDescription: "The older form of `credential`: the name of a harness environment variable holding the server's bearer token " +
								"(for example `GITHUB_MCP_TOKEN`). The harness sends it only where its credentials file lets a credential holding that variable go " +
								"for this agent's owner (or, without a file on SQLite, for its operator's own agents). Prefer `credential`; set at most one of the two.",
							Optional:   true,
							Validators: []validator.String{validCredentialEnv()},
						},
						"name": schema.StringAttribute{
							MarkdownDescription: "Name of the server, unique within the agent; tools are exposed as `<name>.<tool>`.",
							Required:            true,
							Validators:          []validator.String{validName()},
						},
						"url": schema.StringAttribute{
							MarkdownDescription: "The server's streamable HTTP endpoint: an `http://` or `https://` URL.",
							Required:            true,
							Validators:          []validator.String{validHTTPURL()},
						},
					},
				},
			},
			"model": schema.SingleNestedAttribute{
				MarkdownDescription: "The model the agent runs on." + inPlace,
				Required:            true,
				Attributes: map[string]schema.Attribute{
					"api_key_credential": schema.StringAttribute{
						MarkdownDescription: "Name of the credential the harness sends as the model API key: one its operator declares in the harness's " +
							"`--credentials` file, bound to the model's origin (`base_url`, else the provider's public API) and to owners that include this " +
							"agent's owner (the harness refuses otherwise, and sends nothing). See the running-agents guide.",
						Optional:   true,
						Validators: []validator.String{validCredentialName()},
					},
					"api_key_env": schema.StringAttribute{
						MarkdownDescription: "The older form of `api_key_credential`: the name of a harness environment variable holding the model API key " +
							"(for example `OPENAI_API_KEY`). Defaults to the provider's usual variable when neither is set. The harness sends it only where its " +
							"credentials file lets a credential holding that variable go for this agent's owner. Prefer `api_key_credential`; set at most one of the two.",
						Optional:   true,
						Validators: []validator.String{validCredentialEnv()},
					},
					"base_url": schema.StringAttribute{
						MarkdownDescription: "API endpoint, for OpenAI-compatible servers and proxies: an `http://` or `https://` URL. Defaults to the provider's public API.",
						Optional:            true,
						Validators:          []validator.String{validHTTPURL()},
					},
					"name": schema.StringAttribute{
						MarkdownDescription: "Model name, for example `gpt-4.1` or `claude-sonnet-4-5`. Required for `openai` and `anthropic`.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"provider": schema.StringAttribute{
						MarkdownDescription: "`openai` (any OpenAI-compatible API), `anthropic`, or `scripted` (replays `script`, for tests and demos).",
						Required:            true,
						Validators:          []validator.String{stringvalidator.OneOf(agentspec.ModelProviders...)},
					},
					"script": schema.StringAttribute{
						MarkdownDescription: "The replay script of a `scripted` model (for example `file(\"replay.json\")`). Required for `scripted`.",
						Optional:            true,
					},
				},
			},
			"name":  replacingString("Name of the agent. Changing it replaces the agent.", validName()),
			"owner": keptString("Who created the agent (the provider's `owner`)."),
			"sandbox": schema.SingleNestedAttribute{
				MarkdownDescription: "The agent's sandbox: an isolated box for code, files and shell, provisioned on the first tool call that needs it " +
					"and reused by later turns of the same session. Off by default. Changes reach sandboxes created afterwards; a sandbox that " +
					"already exists keeps its environment." + inPlace,
				Optional: true,
				Computed: true,
				Default:  objectdefault.StaticValue(defaultAgentSandbox()),
				Attributes: map[string]schema.Attribute{
					"archive_after_minutes": defaultedInt64(fmt.Sprintf("Minutes of inactivity after which a stopped sandbox is archived; at least `idle_stop_minutes`. Defaults to %d (a day).", agentspec.DefaultArchiveAfterMinutes),
						agentspec.DefaultArchiveAfterMinutes, int64validator.AtLeast(1)),
					"delete_after_minutes": defaultedInt64(fmt.Sprintf("Minutes of inactivity after which an archived sandbox is deleted; at least `archive_after_minutes`. Defaults to %d (a week).", agentspec.DefaultDeleteAfterMinutes),
						agentspec.DefaultDeleteAfterMinutes, int64validator.AtLeast(1)),
					"approve_code": schema.BoolAttribute{
						MarkdownDescription: "Hold every `run_code` script and `exec` command until the session's user has read the code and approved it " +
							"(in the web page, `chat`, or the approvals API and CLI), the same way an approve rule of the operator's MCP policy holds a call; " +
							"a denial, or no decision within 10 minutes, refuses it and nothing runs. Requires `enabled = true`. Defaults to false.",
						Optional: true,
						Computed: true,
						Default:  booldefault.StaticBool(false),
					},
					"enabled": schema.BoolAttribute{
						MarkdownDescription: "Give the agent a sandbox. Required for `skills` and `code_mode`. Defaults to false.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(agentspec.DefaultSandbox().Enabled),
					},
					"environment": schema.StringAttribute{
						MarkdownDescription: "The environment sandboxes are cloned from; it must be Ready when selected. Reference `trueforge_environment.<name>.name` " +
							"so Terraform creates it first. Defaults to `default`. An environment that rebuilds later does not block edits of an agent already using it. " +
							"Another owner's environment that has secrets may be selected only when its `shared_with` names this provider's `owner` (or `\"*\"`). " +
							"Used only with `enabled = true`: while the sandbox is off, the environment is not checked or referenced, and need not exist.",
						Optional:   true,
						Computed:   true,
						Default:    stringdefault.StaticString(agentspec.DefaultEnvironment),
						Validators: []validator.String{validName()},
					},
					"environment_version": schema.StringAttribute{
						MarkdownDescription: environmentVersionDoc, // agent_environment_version.go
						Optional:            true,
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
					},
					"extract_limits": extractLimitsSchema(),
					"file_downloads": schema.BoolAttribute{
						MarkdownDescription: "Let users download files the agent produces. Defaults to true.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(agentspec.DefaultFileDownloads),
					},
					"idle_stop_minutes": defaultedInt64(fmt.Sprintf("Minutes without a tool call after which the sandbox is stopped (files kept). Defaults to %d. "+
						"On Daytona the three timings are also the sandbox's own auto-stop and auto-delete intervals, so they hold with no harness running "+
						"(see the *Running agents* guide for the mapping and rounding).", agentspec.DefaultIdleStopMinutes),
						agentspec.DefaultIdleStopMinutes, int64validator.AtLeast(1)),
				},
			},
			"skills": schema.ListNestedAttribute{
				MarkdownDescription: skillsDescription + inPlace,
				Optional:            true,
				Validators:          []validator.List{listvalidator.SizeAtMost(skills.MaxPerAgent)},
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"description": schema.StringAttribute{
							MarkdownDescription: "The skill's description, from `SKILL.md`: what the model sees of the skill until it loads it.",
							Computed:            true,
						},
						"digest": schema.StringAttribute{
							MarkdownDescription: "SHA-256 of the folder's files (their paths relative to the folder, executable bits and contents; " +
								"not times or owners), `sha256:<hex>`. The skill's content is stored in the control plane under it. A file changed on disk " +
								"changes it, and plan shows that as an in-place update of the agent.",
							Computed: true,
						},
						"name": schema.StringAttribute{
							MarkdownDescription: "Name of the skill, unique within the agent: the `name` in its `SKILL.md`, which it must match when set. " +
								"Defaults to that name.",
							Optional:   true,
							Computed:   true,
							Validators: []validator.String{validName()},
						},
						"path": schema.StringAttribute{
							MarkdownDescription: "The skill's folder in the Terraform configuration, relative to the working directory: for example " +
								"`\"${path.module}/skills/pdf\"`. Plan and apply read it from the machine that runs Terraform (never from the harness's host); " +
								"the harness gets the content from the control plane.",
							Required:   true,
							Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
						},
					},
				},
			},
		},
	}
}

func (r *agentResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.validate(ctx, false, &resp.Diagnostics)
}

// refuseOthers refuses to plan a change or deletion of another role's agent where the
// database enforces ownership (controlPlane.refuseOthers).
func (r *agentResource) refuseOthers(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics) bool {
	if !r.cp.store.Shared() || req.State.Raw.IsNull() || req.Plan.Raw.Equal(req.State.Raw) {
		return false // nothing to check: decode nothing
	}
	var name, owner types.String
	diags.Append(req.State.GetAttribute(ctx, path.Root("name"), &name)...)
	diags.Append(req.State.GetAttribute(ctx, path.Root("owner"), &owner)...)
	return r.cp.refuseOthers(req, "Agent", name.ValueString(), owner.ValueString(), diags)
}

func (r *agentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if !req.Plan.Raw.IsNull() {
		// Skill folders are read on every plan, changed or not: a file changed on disk
		// is a change of the agent its configuration cannot show.
		planSkills(ctx, &resp.Plan, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
		req.Plan = resp.Plan
	}
	if r.cp != nil && r.refuseOthers(ctx, req, &resp.Diagnostics) {
		return
	}
	if req.Plan.Raw.IsNull() || r.cp == nil || req.Plan.Raw.Equal(req.State.Raw) {
		// Destroy, or no change at all: nothing selects an environment anew.
		return
	}
	var plan agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var state *agentModel
	if !req.State.Raw.IsNull() {
		state = &agentModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	if state == nil {
		if !plan.Name.IsUnknown() {
			plan.ID = plan.Name
		}
		plan.Owner = types.StringValue(r.cp.owner)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	}
	sb, ok := plan.sandboxSettings(ctx)
	if !ok || sb.Enabled.IsUnknown() || sb.Environment.IsUnknown() || !sb.Enabled.ValueBool() {
		return
	}
	r.checkEnvironmentVersion(ctx, plan.Name.ValueString(), sb, &resp.Diagnostics) // agent_environment_version.go
	// An environment that does not exist yet may be created by this same apply; Create
	// checks again once it has run.
	name := sb.Environment.ValueString()
	if !selectsEnvironment(ctx, state, true, name) {
		// Every change rewrites the agent's reference, which its environment's owner
		// must still allow (they may have unshared it since; PostgreSQL refuses the
		// write then).
		if env, err := r.cp.store.GetEnvironment(ctx, name); err == nil {
			checkEnvironmentSharing(ctx, r.cp.store, plan.Name.ValueString(), r.cp.owner, env, &resp.Diagnostics) // environment_sharing.go
		}
		return
	}
	env, status, reason, err := r.environmentStatus(ctx, name)
	if err != nil {
		return
	}
	if !checkEnvironmentSharing(ctx, r.cp.store, plan.Name.ValueString(), r.cp.owner, env, &resp.Diagnostics) {
		return
	}
	if status != sandbox.StatusReady {
		addNotReadyError(&resp.Diagnostics, env.Name, status, reason)
	}
}

// selectsEnvironment reports whether a plan whose sandbox is enabled (or not) selects
// environment env anew: an enabled sandbox on create, or when state's sandbox was off or
// on another environment. A sandbox that is off selects none, and an environment that
// rebuilds after it was selected does not block other edits of the agent.
func selectsEnvironment(ctx context.Context, state *agentModel, enabled bool, env string) bool {
	if !enabled {
		return false
	}
	if state == nil {
		return true
	}
	prior, ok := state.sandboxSettings(ctx)
	return !ok || !prior.Enabled.ValueBool() || prior.Environment.ValueString() != env
}

// environmentStatus returns environment name and the refreshed status of its snapshot,
// with the reason of a failed build. A missing environment is store.ErrNotFound.
func (r *agentResource) environmentStatus(ctx context.Context, name string) (store.Environment, string, string, error) {
	env, err := r.cp.store.GetEnvironment(ctx, name)
	if err != nil {
		return env, "", "", err
	}
	coord, _, err := r.cp.coordinator(ctx, env.Provider)
	if err != nil {
		return env, "", "", err
	}
	snap, err := coord.Refresh(ctx, env.SnapshotID)
	if err != nil {
		return env, "", "", err
	}
	return env, snap.Status, snap.Reason, nil
}

// checkEnvironment is the apply-time check of the selected environment: it must exist,
// be usable by this owner's agents and be Ready.
func (r *agentResource) checkEnvironment(ctx context.Context, agent, name string, diags *diag.Diagnostics) bool {
	env, status, reason, err := r.environmentStatus(ctx, name)
	if err == nil && !checkEnvironmentSharing(ctx, r.cp.store, agent, r.cp.owner, env, diags) {
		return false
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		addEnvironmentNotFound(diags, agent, name)
		return false
	case err != nil:
		diags.AddAttributeError(path.Root("sandbox").AtName("environment"), "Error Checking Environment",
			fmt.Sprintf("The status of environment %q, selected by agent %q, could not be read.\n\nOriginal Error: %s", name, agent, err))
		return false
	case status != sandbox.StatusReady:
		addNotReadyError(diags, env.Name, status, reason)
		return false
	}
	return true
}

func addEnvironmentNotFound(diags *diag.Diagnostics, agent, env string) {
	diags.AddAttributeError(path.Root("sandbox").AtName("environment"), "Environment Not Found",
		fmt.Sprintf("Agent %q selects environment %q, which does not exist in this control plane. Create it, and set "+
			"sandbox.environment = trueforge_environment.<name>.name rather than a literal name so Terraform creates the environment before the agent "+
			"(for the default environment, trueforge_sandbox_provider.<name>.default_environment).", agent, env))
}

func addNotReadyError(diags *diag.Diagnostics, env, status, reason string) {
	next := "Wait for its build to finish (terraform refresh shows its status), then apply again."
	if status == sandbox.StatusFailed {
		next = fmt.Sprintf("Its build failed (%s): fix its build_script and apply the environment again, or select another environment.", reason)
	}
	diags.AddAttributeError(path.Root("sandbox").AtName("environment"), "Environment Not Ready",
		fmt.Sprintf("Environment %q is %s, and only Ready environments can be selected on an agent. %s", env, status, next))
}
