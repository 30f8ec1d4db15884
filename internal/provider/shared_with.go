package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// maxSharedWith bounds a shared_with list: a plane has a handful of teams, and "*"
// shares with all of them.
const maxSharedWith = 64

// ownerNameRe is what an owner may be called: a PostgreSQL login role (store's
// roleName: lower-case letters, digits and _) or an SQLite owner (an OS user or a
// stated name, which may also use capitals, '.', '-' and '@').
var ownerNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,62}$`)

// checkSharedWithEntry checks one entry of a shared_with list: an owner name or "*".
func checkSharedWithEntry(s string) string {
	if s == store.ShareAll || ownerNameRe.MatchString(s) {
		return ""
	}
	return fmt.Sprintf("%q is not an owner name; name an owner exactly as the provider's `owner` of that team is (on PostgreSQL its database role, "+
		"for example \"team_a\"), or \"*\" for every owner", s)
}

// sharedWithAttribute is the shared_with attribute of a shareable resource (what names
// it: "environment's secrets"). Empty by default: only the owner's agents use it.
func sharedWithAttribute(what string) schema.SetAttribute {
	return schema.SetAttribute{
		MarkdownDescription: fmt.Sprintf("Owners, besides this resource's `owner`, whose agents may use the %s: each an owner exactly as that team's "+
			"provider `owner` is (on PostgreSQL, its database role), or `\"*\"` for every owner of the control plane; at most %d. "+
			"Defaults to empty: only the owner's own agents. Applied live; removing an owner stops the harness from giving the %s "+
			"to that owner's agents at their next sandbox or outbound request, though their configuration stays until they change it.",
			what, maxSharedWith, what),
		Optional:    true,
		Computed:    true,
		ElementType: types.StringType,
		Default:     setdefault.StaticValue(types.SetValueMust(types.StringType, []attr.Value{})),
		Validators: []validator.Set{
			setvalidator.SizeAtMost(maxSharedWith),
			setvalidator.ValueStringsAre(stringCheck{"an owner name or \"*\"", checkSharedWithEntry}),
		},
	}
}

// stringSet is items as a set of strings (empty, not null, for none), sorted so that
// reads compare equal however the store ordered them.
func stringSet(items []string) types.Set {
	sorted := slices.Sorted(slices.Values(items))
	vals := make([]attr.Value, 0, len(sorted))
	for _, s := range sorted {
		vals = append(vals, types.StringValue(s))
	}
	return types.SetValueMust(types.StringType, vals)
}

// setFrom is the strings of a known set, sorted; nil for null or unknown.
func setFrom(ctx context.Context, s types.Set) []string {
	var out []string
	if s.IsNull() || s.IsUnknown() {
		return nil
	}
	s.ElementsAs(ctx, &out, false)
	slices.Sort(out)
	return out
}
