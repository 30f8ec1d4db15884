package provider

import (
	"context"
	"fmt"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

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
	def := agentspec.DefaultSandbox()
	if s.Enabled.IsNull() {
		s.Enabled = types.BoolValue(def.Enabled)
	}
	if s.ApproveCode.IsNull() {
		s.ApproveCode = types.BoolValue(def.ApproveCode)
	}
	if s.Environment.IsNull() {
		s.Environment = types.StringValue(def.Environment)
	}
	if s.FileDownloads.IsNull() {
		s.FileDownloads = types.BoolValue(def.FileDownloads)
	}
	if s.IdleStopMinutes.IsNull() {
		s.IdleStopMinutes = types.Int64Value(def.IdleStopMinutes)
	}
	if s.ArchiveAfterMinutes.IsNull() {
		s.ArchiveAfterMinutes = types.Int64Value(def.ArchiveAfterMinutes)
	}
	if s.DeleteAfterMinutes.IsNull() {
		s.DeleteAfterMinutes = types.Int64Value(def.DeleteAfterMinutes)
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
	if sandboxOff && !sb.ApproveCode.IsUnknown() && sb.ApproveCode.ValueBool() {
		diags.AddAttributeError(path.Root("sandbox").AtName("approve_code"), "Approving Code Requires The Sandbox",
			"sandbox.approve_code = true holds the scripts and commands the agent runs in its sandbox, which is off. "+
				"Set sandbox.enabled = true, or remove approve_code.")
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
			for _, p := range agentspec.ModelProviders {
				if s == p {
					return ""
				}
			}
			return fmt.Sprintf("%q is not a model provider; use openai, anthropic or scripted", s)
		})
		checkString(mp.AtName("base_url"), mm.BaseURL, checkHTTPURL)
		checkString(mp.AtName("api_key_env"), mm.APIKeyEnv, validCredentialEnv().check)
		checkString(mp.AtName("api_key_credential"), mm.APIKeyCredential, validCredentialName().check)
		checkOneCredential(mp.AtName("api_key_credential"), "model", "api_key_credential", mm.APIKeyCredential, "api_key_env", mm.APIKeyEnv, diags)
		if !mm.Provider.IsUnknown() {
			switch provider := mm.Provider.ValueString(); provider {
			case agentspec.ModelScripted:
				if mm.Script.IsNull() {
					diags.AddAttributeError(mp.AtName("script"), "Missing Model Script",
						"model.provider = \"scripted\" replays model.script instead of calling a model API, and no script is set. "+
							"Set model.script (for example script = file(\"${path.module}/replay.json\")), or choose provider openai or anthropic with a model name.")
				}
			case agentspec.ModelOpenAI, agentspec.ModelAnthropic:
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
		checkString(sp.AtName("credential"), s.Credential, validCredentialName().check)
		checkOneCredential(sp.AtName("credential"), fmt.Sprintf("mcp_servers[%d]", i), "credential", s.Credential, "credential_env", s.CredentialEnv, diags)
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
	// The harness's own check of every spec it reads, on the spec apply is about to
	// store, read back as the harness reads it: a bound the schema above missed is
	// caught here, not by the harness later.
	if atApply && !diags.HasError() {
		_, raw := m.spec(ctx)
		if s, err := agentspec.Decode(raw); err == nil {
			if err := s.CheckBounds(); err != nil {
				diags.AddError("Agent Limit Out Of Bounds", fmt.Sprintf("Agent %q: %s.", s.Name, err))
			}
		}
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
	if provider == agentspec.ModelAnthropic {
		return "claude-sonnet-4-5"
	}
	return "gpt-4.1"
}
