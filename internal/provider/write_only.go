package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// credential is a value a resource takes two ways: a sensitive attribute (name) that is
// kept in state, or its write-only twin (name_wo, Terraform 1.11 or later) that never is,
// with name_wo_version, whose change sends the write-only value again. Both resources
// that take a credential describe and read it through this one type, so the trio's
// names, flags and rules cannot drift apart.
type credential struct {
	name       string
	plainDoc   string
	woDoc      string
	versionDoc string
	// validators apply to both the plain and the write-only attribute.
	validators []validator.String
	// plainValidators apply to the plain attribute only.
	plainValidators []validator.String
	// missing and conflicting are the summaries of exactlyOneCredential's errors, for the
	// resources that require the credential ("Missing Password", "Conflicting Passwords").
	missing, conflicting string
}

func (c credential) woName() string      { return c.name + "_wo" }
func (c credential) versionName() string { return c.name + "_wo_version" }

// addAttributes puts the three attributes into a schema's attribute map.
func (c credential) addAttributes(attrs map[string]schema.Attribute) {
	plain := append(append([]validator.String{}, c.validators...), c.plainValidators...)
	plain = append(plain, stringvalidator.PreferWriteOnlyAttribute(path.MatchRoot(c.woName())))
	wo := append(append([]validator.String{}, c.validators...), stringvalidator.AlsoRequires(path.MatchRoot(c.versionName())))
	attrs[c.name] = schema.StringAttribute{
		MarkdownDescription: c.plainDoc,
		Optional:            true,
		Sensitive:           true,
		Validators:          plain,
	}
	attrs[c.woName()] = schema.StringAttribute{
		MarkdownDescription: c.woDoc,
		Optional:            true,
		Sensitive:           true,
		WriteOnly:           true,
		Validators:          wo,
	}
	attrs[c.versionName()] = schema.Int64Attribute{
		MarkdownDescription: c.versionDoc,
		Optional:            true,
	}
}

// value is the plaintext to use: the plain attribute when it is set, else the write-only
// one, which only the configuration carries (it is null in plan and state).
func (c credential) value(ctx context.Context, plain types.String, cfg tfsdk.Config, diags *diag.Diagnostics) string {
	if !plain.IsNull() {
		return plain.ValueString()
	}
	var wo types.String
	diags.Append(cfg.GetAttribute(ctx, path.Root(c.woName()), &wo)...)
	return wo.ValueString()
}

// changed reports whether an update must send the credential again: the plain value or
// the write-only version differs from the prior state.
func credentialChanged(plain, priorPlain types.String, version, priorVersion types.Int64) bool {
	return !plain.Equal(priorPlain) || !version.Equal(priorVersion)
}
