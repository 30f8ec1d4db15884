package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Model providers an agent can run on.
const (
	modelProviderOpenAI    = "openai"
	modelProviderAnthropic = "anthropic"
	modelProviderScripted  = "scripted"
)

var modelProviders = []string{modelProviderAnthropic, modelProviderOpenAI, modelProviderScripted}

// Sandbox lifecycle defaults of an agent, in minutes: stop after 15 idle minutes, archive
// after a day, delete after a week.
const (
	defaultIdleStopMinutes     = 15
	defaultArchiveAfterMinutes = 1440
	defaultDeleteAfterMinutes  = 10080
)

var (
	_ resource.Resource                   = (*agentResource)(nil)
	_ resource.ResourceWithConfigure      = (*agentResource)(nil)
	_ resource.ResourceWithImportState    = (*agentResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*agentResource)(nil)
	_ resource.ResourceWithValidateConfig = (*agentResource)(nil)
)

type agentResource struct {
	cp *controlPlane
}

// agentModel is the trueforge_agent resource and the trueforge_agent data source.
type agentModel struct {
	CodeMode     types.Bool   `tfsdk:"code_mode"`
	Description  types.String `tfsdk:"description"`
	ID           types.String `tfsdk:"id"`
	Instructions types.String `tfsdk:"instructions"`
	MCPServers   types.List   `tfsdk:"mcp_servers"`
	Model        types.Object `tfsdk:"model"`
	Name         types.String `tfsdk:"name"`
	Owner        types.String `tfsdk:"owner"`
	Sandbox      types.Object `tfsdk:"sandbox"`
	Skills       types.List   `tfsdk:"skills"`
}

type modelSettingsModel struct {
	APIKeyEnv types.String `tfsdk:"api_key_env"`
	BaseURL   types.String `tfsdk:"base_url"`
	Name      types.String `tfsdk:"name"`
	Provider  types.String `tfsdk:"provider"`
	Script    types.String `tfsdk:"script"`
}

type mcpServerModel struct {
	AllowedTools  types.List   `tfsdk:"allowed_tools"`
	CredentialEnv types.String `tfsdk:"credential_env"`
	Name          types.String `tfsdk:"name"`
	URL           types.String `tfsdk:"url"`
}

type skillModel struct {
	Name types.String `tfsdk:"name"`
	Path types.String `tfsdk:"path"`
}

type agentSandboxModel struct {
	ArchiveAfterMinutes types.Int64  `tfsdk:"archive_after_minutes"`
	DeleteAfterMinutes  types.Int64  `tfsdk:"delete_after_minutes"`
	Enabled             types.Bool   `tfsdk:"enabled"`
	Environment         types.String `tfsdk:"environment"`
	FileDownloads       types.Bool   `tfsdk:"file_downloads"`
	IdleStopMinutes     types.Int64  `tfsdk:"idle_stop_minutes"`
}

var modelSettingsAttrTypes = map[string]attr.Type{
	"api_key_env": types.StringType,
	"base_url":    types.StringType,
	"name":        types.StringType,
	"provider":    types.StringType,
	"script":      types.StringType,
}

var mcpServerAttrTypes = map[string]attr.Type{
	"allowed_tools":  types.ListType{ElemType: types.StringType},
	"credential_env": types.StringType,
	"name":           types.StringType,
	"url":            types.StringType,
}

var skillAttrTypes = map[string]attr.Type{
	"name": types.StringType,
	"path": types.StringType,
}

var agentSandboxAttrTypes = map[string]attr.Type{
	"archive_after_minutes": types.Int64Type,
	"delete_after_minutes":  types.Int64Type,
	"enabled":               types.BoolType,
	"environment":           types.StringType,
	"file_downloads":        types.BoolType,
	"idle_stop_minutes":     types.Int64Type,
}

// agentSpec is the JSON document stored in agents.spec, which the harness runs. Its field
// names mirror the HCL attributes. Optional strings are pointers and lists keep nil apart
// from empty, so Read reproduces exactly what the configuration said; the harness may
// decode into plain strings and slices, where an absent or null value reads as empty.
type agentSpec struct {
	Name         string               `json:"name"`
	Description  *string              `json:"description,omitempty"`
	Instructions *string              `json:"instructions,omitempty"`
	Model        agentSpecModel       `json:"model"`
	MCPServers   []agentSpecMCPServer `json:"mcp_servers"`
	Skills       []agentSpecSkill     `json:"skills"`
	CodeMode     bool                 `json:"code_mode"`
	Sandbox      agentSpecSandbox     `json:"sandbox"`
}

type agentSpecModel struct {
	Provider  string  `json:"provider"`
	Name      *string `json:"name,omitempty"`
	BaseURL   *string `json:"base_url,omitempty"`
	APIKeyEnv *string `json:"api_key_env,omitempty"`
	Script    *string `json:"script,omitempty"`
}

type agentSpecMCPServer struct {
	Name          string   `json:"name"`
	URL           string   `json:"url"`
	CredentialEnv *string  `json:"credential_env,omitempty"`
	AllowedTools  []string `json:"allowed_tools"`
}

type agentSpecSkill struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

type agentSpecSandbox struct {
	Enabled             bool   `json:"enabled"`
	Environment         string `json:"environment"`
	FileDownloads       bool   `json:"file_downloads"`
	IdleStopMinutes     int64  `json:"idle_stop_minutes"`
	ArchiveAfterMinutes int64  `json:"archive_after_minutes"`
	DeleteAfterMinutes  int64  `json:"delete_after_minutes"`
}

// NewAgentResource is the trueforge_agent resource.
func NewAgentResource() resource.Resource { return &agentResource{} }

func (r *agentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent"
}

func defaultAgentSandbox() types.Object {
	return types.ObjectValueMust(agentSandboxAttrTypes, map[string]attr.Value{
		"archive_after_minutes": types.Int64Value(defaultArchiveAfterMinutes),
		"delete_after_minutes":  types.Int64Value(defaultDeleteAfterMinutes),
		"enabled":               types.BoolValue(false),
		"environment":           types.StringValue(defaultEnvironmentName),
		"file_downloads":        types.BoolValue(true),
		"idle_stop_minutes":     types.Int64Value(defaultIdleStopMinutes),
	})
}

func (r *agentResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	inPlace := " Changing it updates the agent in place."
	resp.Schema = schema.Schema{
		MarkdownDescription: "An agent the harness runs: its model, instructions, MCP servers, skills and sandbox settings. The sandbox is a " +
			"*tool*, off by default: with `sandbox.enabled`, a sandbox is provisioned from the selected environment only when a turn needs " +
			"one, stopped when idle, then archived, then deleted. Skills and Code Mode require the sandbox. Only Ready environments can be " +
			"selected, and an environment referenced by an agent cannot be deleted. Editing an agent never changes a sandbox that already exists. " +
			"Model and MCP credentials stay in the harness's environment: the agent only names the variables.",
		Attributes: map[string]schema.Attribute{
			"code_mode": schema.BoolAttribute{
				MarkdownDescription: "Code Mode: the model writes a script that runs in the sandbox and calls MCP tools through a bridge to the harness, " +
					"so the sandbox never holds MCP tokens. Requires `sandbox.enabled = true`. Defaults to false." + inPlace,
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "What the agent is for, shown to users." + inPlace,
				Optional:            true,
			},
			"id": schema.StringAttribute{
				MarkdownDescription: "The agent's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
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
						"credential_env": schema.StringAttribute{
							MarkdownDescription: "Name of the harness's environment variable holding the server's bearer token (for example `GITHUB_MCP_TOKEN`). " +
								"Name the variable, never the token: the value stays in the harness.",
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
					"api_key_env": schema.StringAttribute{
						MarkdownDescription: "Name of the harness's environment variable holding the model API key (for example `OPENAI_API_KEY`). " +
							"Name the variable, never the key: the key stays in the harness. Defaults to the provider's usual variable.",
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
						Validators:          []validator.String{stringvalidator.OneOf(modelProviders...)},
					},
					"script": schema.StringAttribute{
						MarkdownDescription: "The replay script of a `scripted` model (for example `file(\"replay.json\")`). Required for `scripted`.",
						Optional:            true,
					},
				},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the agent. Changing it replaces the agent.",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          []validator.String{validName()},
			},
			"owner": schema.StringAttribute{
				MarkdownDescription: "Who created the agent (the provider's `owner`).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"sandbox": schema.SingleNestedAttribute{
				MarkdownDescription: "The agent's sandbox: an isolated box for code, files and shell, provisioned on the first tool call that needs it " +
					"and reused by later turns of the same session. Off by default. Changes reach sandboxes created afterwards; a sandbox that " +
					"already exists keeps its environment." + inPlace,
				Optional: true,
				Computed: true,
				Default:  objectdefault.StaticValue(defaultAgentSandbox()),
				Attributes: map[string]schema.Attribute{
					"archive_after_minutes": schema.Int64Attribute{
						MarkdownDescription: fmt.Sprintf("Minutes of inactivity after which a stopped sandbox is archived; at least `idle_stop_minutes`. Defaults to %d (a day).", defaultArchiveAfterMinutes),
						Optional:            true,
						Computed:            true,
						Default:             int64default.StaticInt64(defaultArchiveAfterMinutes),
						Validators:          []validator.Int64{int64validator.AtLeast(1)},
					},
					"delete_after_minutes": schema.Int64Attribute{
						MarkdownDescription: fmt.Sprintf("Minutes of inactivity after which an archived sandbox is deleted; at least `archive_after_minutes`. Defaults to %d (a week).", defaultDeleteAfterMinutes),
						Optional:            true,
						Computed:            true,
						Default:             int64default.StaticInt64(defaultDeleteAfterMinutes),
						Validators:          []validator.Int64{int64validator.AtLeast(1)},
					},
					"enabled": schema.BoolAttribute{
						MarkdownDescription: "Give the agent a sandbox. Required for `skills` and `code_mode`. Defaults to false.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(false),
					},
					"environment": schema.StringAttribute{
						MarkdownDescription: "The environment sandboxes are cloned from; it must be Ready when selected. Reference `trueforge_environment.<name>.name` " +
							"so Terraform creates it first. Defaults to `default`. An environment that rebuilds later does not block edits of an agent already using it.",
						Optional:   true,
						Computed:   true,
						Default:    stringdefault.StaticString(defaultEnvironmentName),
						Validators: []validator.String{validName()},
					},
					"file_downloads": schema.BoolAttribute{
						MarkdownDescription: "Let users download files the agent produces. Defaults to true.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(true),
					},
					"idle_stop_minutes": schema.Int64Attribute{
						MarkdownDescription: fmt.Sprintf("Minutes without a tool call after which the sandbox is stopped (files kept). Defaults to %d.", defaultIdleStopMinutes),
						Optional:            true,
						Computed:            true,
						Default:             int64default.StaticInt64(defaultIdleStopMinutes),
						Validators:          []validator.Int64{int64validator.AtLeast(1)},
					},
				},
			},
			"skills": schema.ListNestedAttribute{
				MarkdownDescription: "Skills (folders of instructions and scripts) the agent can load into its sandbox. Requires `sandbox.enabled = true`." + inPlace,
				Optional:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"name": schema.StringAttribute{
							MarkdownDescription: "Name of the skill, unique within the agent.",
							Required:            true,
							Validators:          []validator.String{validName()},
						},
						"path": schema.StringAttribute{
							MarkdownDescription: "Path of the skill's folder (with its `SKILL.md`) on the harness host.",
							Required:            true,
							Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
						},
					},
				},
			},
		},
	}
}

func (r *agentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.cp = configureControlPlane(req.ProviderData, &resp.Diagnostics)
}

func validHTTPURL() stringCheck {
	return stringCheck{"an `http://` or `https://` URL", checkHTTPURL}
}

func checkHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL; give the full address with its scheme, for example https://mcp.example.com/mcp", s)
	}
	return ""
}

var asObject = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

// sandboxSettings returns the sandbox object of m with the schema defaults filled in for
// null attributes (a configuration may leave them out), and false when the object itself
// is unknown.
func (m *agentModel) sandboxSettings(ctx context.Context) (agentSandboxModel, bool) {
	var s agentSandboxModel
	if m.Sandbox.IsUnknown() {
		return s, false
	}
	if !m.Sandbox.IsNull() {
		m.Sandbox.As(ctx, &s, asObject)
	}
	if s.Enabled.IsNull() {
		s.Enabled = types.BoolValue(false)
	}
	if s.Environment.IsNull() {
		s.Environment = types.StringValue(defaultEnvironmentName)
	}
	if s.FileDownloads.IsNull() {
		s.FileDownloads = types.BoolValue(true)
	}
	if s.IdleStopMinutes.IsNull() {
		s.IdleStopMinutes = types.Int64Value(defaultIdleStopMinutes)
	}
	if s.ArchiveAfterMinutes.IsNull() {
		s.ArchiveAfterMinutes = types.Int64Value(defaultArchiveAfterMinutes)
	}
	if s.DeleteAfterMinutes.IsNull() {
		s.DeleteAfterMinutes = types.Int64Value(defaultDeleteAfterMinutes)
	}
	return s, true
}

// knownObjects returns the known elements of a list of objects as T, by index; unknown
// elements are skipped.
func knownObjects[T any](ctx context.Context, l types.List) map[int]T {
	out := map[int]T{}
	if l.IsNull() || l.IsUnknown() {
		return out
	}
	for i, e := range l.Elements() {
		obj, ok := e.(types.Object)
		if !ok || obj.IsUnknown() || obj.IsNull() {
			continue
		}
		var v T
		obj.As(ctx, &v, asObject)
		out[i] = v
	}
	return out
}

// validate enforces the agent's rules. In ValidateConfig (atApply false) it checks the
// rules that span attributes and skips unknown values; at apply every value is known and
// it checks every rule again, including those of the attribute validators, since values
// that were unknown at plan time were never validated.
func (m *agentModel) validate(ctx context.Context, atApply bool, diags *diag.Diagnostics) {
	checkString := func(p path.Path, v types.String, check func(string) string) {
		if !atApply || v.IsNull() || v.IsUnknown() {
			return
		}
		if msg := check(v.ValueString()); msg != "" {
			diags.AddAttributeError(p, "Invalid Attribute Value", fmt.Sprintf("%s: %s", p, msg))
		}
	}
	checkString(path.Root("name"), m.Name, checkName)

	sb, sbKnown := m.sandboxSettings(ctx)
	sandboxOff := sbKnown && !sb.Enabled.IsUnknown() && !sb.Enabled.ValueBool()
	if sandboxOff && !m.CodeMode.IsUnknown() && m.CodeMode.ValueBool() {
		diags.AddAttributeError(path.Root("code_mode"), "Code Mode Requires The Sandbox",
			"code_mode = true needs sandbox.enabled = true: Code Mode scripts run in the agent's sandbox. "+
				"Set sandbox = { enabled = true } (choosing a Ready environment), or remove code_mode.")
	}
	if sandboxOff && !m.Skills.IsNull() && !m.Skills.IsUnknown() && len(m.Skills.Elements()) > 0 {
		diags.AddAttributeError(path.Root("skills"), "Skills Require The Sandbox",
			fmt.Sprintf("The agent lists %d skill(s), but skills run in the agent's sandbox, which is off. "+
				"Set sandbox = { enabled = true } (choosing a Ready environment), or remove skills.", len(m.Skills.Elements())))
	}

	if !m.Model.IsNull() && !m.Model.IsUnknown() {
		var mm modelSettingsModel
		m.Model.As(ctx, &mm, asObject)
		mp := path.Root("model")
		checkString(mp.AtName("provider"), mm.Provider, func(s string) string {
			for _, p := range modelProviders {
				if s == p {
					return ""
				}
			}
			return fmt.Sprintf("%q is not a model provider; use openai, anthropic or scripted", s)
		})
		checkString(mp.AtName("base_url"), mm.BaseURL, checkHTTPURL)
		checkString(mp.AtName("api_key_env"), mm.APIKeyEnv, validCredentialEnv().check)
		if !mm.Provider.IsUnknown() {
			switch provider := mm.Provider.ValueString(); provider {
			case modelProviderScripted:
				if mm.Script.IsNull() {
					diags.AddAttributeError(mp.AtName("script"), "Missing Model Script",
						"model.provider = \"scripted\" replays model.script instead of calling a model API, and no script is set. "+
							"Set model.script (for example script = file(\"${path.module}/replay.json\")), or choose provider openai or anthropic with a model name.")
				}
			case modelProviderOpenAI, modelProviderAnthropic:
				if mm.Name.IsNull() || (!mm.Name.IsUnknown() && mm.Name.ValueString() == "") {
					diags.AddAttributeError(mp.AtName("name"), "Missing Model Name",
						fmt.Sprintf("model.provider = %q needs the model to call. Set model.name (for example %q).", provider, exampleModel(provider)))
				}
			}
		}
	}

	seen := map[string]int{}
	servers := knownObjects[mcpServerModel](ctx, m.MCPServers)
	for i := range len(m.MCPServers.Elements()) {
		s, ok := servers[i]
		if !ok {
			continue
		}
		sp := path.Root("mcp_servers").AtListIndex(i)
		checkString(sp.AtName("name"), s.Name, checkName)
		checkString(sp.AtName("url"), s.URL, checkHTTPURL)
		checkString(sp.AtName("credential_env"), s.CredentialEnv, validCredentialEnv().check)
		if s.Name.IsUnknown() || s.Name.IsNull() {
			continue
		}
		if first, dup := seen[s.Name.ValueString()]; dup {
			diags.AddAttributeError(sp.AtName("name"), "Duplicate MCP Server Name",
				fmt.Sprintf("mcp_servers[%d] and mcp_servers[%d] are both named %q; the name prefixes the server's tools, so it must be unique within the agent. Rename one of them.",
					first, i, s.Name.ValueString()))
			continue
		}
		seen[s.Name.ValueString()] = i
	}
	seen = map[string]int{}
	skills := knownObjects[skillModel](ctx, m.Skills)
	for i := range len(m.Skills.Elements()) {
		s, ok := skills[i]
		if !ok || s.Name.IsUnknown() || s.Name.IsNull() {
			continue
		}
		sp := path.Root("skills").AtListIndex(i)
		checkString(sp.AtName("name"), s.Name, checkName)
		if first, dup := seen[s.Name.ValueString()]; dup {
			diags.AddAttributeError(sp.AtName("name"), "Duplicate Skill Name",
				fmt.Sprintf("skills[%d] and skills[%d] are both named %q; skill names must be unique within the agent. Rename or remove one of them.", first, i, s.Name.ValueString()))
			continue
		}
		seen[s.Name.ValueString()] = i
	}

	if sbKnown {
		m.validateTimings(sb, atApply, diags)
	}
}

// validateTimings checks idle <= archive <= delete (and, at apply, each >= 1).
func (m *agentModel) validateTimings(sb agentSandboxModel, atApply bool, diags *diag.Diagnostics) {
	sp := path.Root("sandbox")
	timings := []struct {
		name string
		v    types.Int64
	}{{"idle_stop_minutes", sb.IdleStopMinutes}, {"archive_after_minutes", sb.ArchiveAfterMinutes}, {"delete_after_minutes", sb.DeleteAfterMinutes}}
	for _, t := range timings {
		if t.v.IsUnknown() {
			return
		}
		if atApply && t.v.ValueInt64() < 1 {
			diags.AddAttributeError(sp.AtName(t.name), "Invalid Sandbox Timing",
				fmt.Sprintf("sandbox.%s is %d; it must be at least 1 minute.", t.name, t.v.ValueInt64()))
			return
		}
	}
	idle, archive, del := sb.IdleStopMinutes.ValueInt64(), sb.ArchiveAfterMinutes.ValueInt64(), sb.DeleteAfterMinutes.ValueInt64()
	const order = "A sandbox is stopped after idle_stop_minutes, archived after archive_after_minutes and deleted after delete_after_minutes, so idle_stop_minutes <= archive_after_minutes <= delete_after_minutes."
	if idle > archive {
		diags.AddAttributeError(sp.AtName("archive_after_minutes"), "Invalid Sandbox Timings",
			fmt.Sprintf("sandbox.archive_after_minutes (%d) is less than sandbox.idle_stop_minutes (%d). %s Raise archive_after_minutes or lower idle_stop_minutes.", archive, idle, order))
	}
	if archive > del {
		diags.AddAttributeError(sp.AtName("delete_after_minutes"), "Invalid Sandbox Timings",
			fmt.Sprintf("sandbox.delete_after_minutes (%d) is less than sandbox.archive_after_minutes (%d). %s Raise delete_after_minutes or lower archive_after_minutes.", del, archive, order))
	}
}

func exampleModel(provider string) string {
	if provider == modelProviderAnthropic {
		return "claude-sonnet-4-5"
	}
	return "gpt-4.1"
}

func (r *agentResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m agentModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.validate(ctx, false, &resp.Diagnostics)
}

func (r *agentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.cp == nil {
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
	if !ok || sb.Environment.IsUnknown() || !selectsEnvironment(ctx, state, sb.Environment.ValueString()) {
		return
	}
	// An environment that does not exist yet may be created by this same apply; Create
	// checks again once it has run.
	name := sb.Environment.ValueString()
	env, status, reason, err := r.environmentStatus(ctx, name)
	if err != nil {
		return
	}
	if status != sandbox.StatusReady {
		addNotReadyError(&resp.Diagnostics, env.Name, status, reason)
	}
}

// selectsEnvironment reports whether a plan selects environment env anew: on create, or
// when it differs from the one in state. An environment that rebuilds after it was
// selected does not block other edits of the agent.
func selectsEnvironment(ctx context.Context, state *agentModel, env string) bool {
	if state == nil {
		return true
	}
	prior, ok := state.sandboxSettings(ctx)
	return !ok || prior.Environment.ValueString() != env
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

// checkEnvironment is the apply-time check of the selected environment: it must exist
// and be Ready.
func (r *agentResource) checkEnvironment(ctx context.Context, agent, name string, diags *diag.Diagnostics) bool {
	env, status, reason, err := r.environmentStatus(ctx, name)
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
