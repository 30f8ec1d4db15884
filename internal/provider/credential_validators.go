package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

// checkCredentialEnv is the harness's rule for a variable named as a credential
// (agentspec.CheckCredentialEnv: a variable name, never one of the harness's own
// TRUEFORGE_* settings), so plan refuses what the harness would refuse at run time.
func checkCredentialEnv(s string) string {
	if msg := checkEnvVarName(s); msg != "" {
		return msg
	}
	if err := agentspec.CheckCredentialEnv(s); err != nil {
		return fmt.Sprintf("%q: %s, and name that variable here", s, err)
	}
	return ""
}

// validCredentialName is for attributes that name a credential of the harness
// operator's credentials file (credential, api_key_credential), by the harness's rule
// for credential names (agentspec.CheckCredentialName).
func validCredentialName() stringCheck {
	return stringCheck{"the name of a credential the harness operator declares in its credentials file", func(s string) string {
		if looksLikeCredential(s) {
			return "the value looks like a credential, not a credential's name. Ask the harness operator to declare it in the harness's credentials file and name it here; rotate the credential, since it is now in your configuration"
		}
		if err := agentspec.CheckCredentialName(s); err != nil {
			return fmt.Sprintf("%q: %s; name a credential the harness operator declares (for example github)", s, err)
		}
		return ""
	}}
}

// checkOneCredential refuses a block that names both a credential and, in the older
// form, a variable: the harness would refuse it, since it could not tell which is meant.
func checkOneCredential(p path.Path, block, newName string, newValue types.String, oldName string, oldValue types.String, diags *diag.Diagnostics) {
	if newValue.IsNull() || newValue.IsUnknown() || oldValue.IsNull() || oldValue.IsUnknown() {
		return
	}
	diags.AddAttributeError(p, "Conflicting Credential Attributes",
		fmt.Sprintf("%s sets both %s (%q) and %s (%q), which name the same credential in two ways. Keep %s, the name the harness operator's credentials file declares, and remove %s.",
			block, newName, newValue.ValueString(), oldName, oldValue.ValueString(), newName, oldName))
}

// exactlyOneCredential requires a credential's plain or write-only attribute. Write-only
// values are null in plans, so the framework's ExactlyOneOf cannot see them at every
// stage; the config can.
type exactlyOneCredential struct{ c credential }

func (v exactlyOneCredential) Description(context.Context) string {
	return fmt.Sprintf("exactly one of %s or %s must be set", v.c.name, v.c.woName())
}
func (v exactlyOneCredential) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (v exactlyOneCredential) ValidateResource(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var plain, wo types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(v.c.name), &plain)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(v.c.woName()), &wo)...)
	if plain.IsUnknown() || wo.IsUnknown() {
		return
	}
	switch {
	case plain.IsNull() && wo.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root(v.c.woName()), v.c.missing,
			fmt.Sprintf("Set %s (with %s), or %s. %s keeps the credential out of plan and state.", v.c.woName(), v.c.versionName(), v.c.name, v.c.woName()))
	case !plain.IsNull() && !wo.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root(v.c.name), v.c.conflicting,
			fmt.Sprintf("Set only one of %s and %s.", v.c.name, v.c.woName()))
	}
}
