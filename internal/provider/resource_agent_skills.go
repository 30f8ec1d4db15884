package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/skills"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// skillsDescription documents the skills attribute: what a skill folder is, where it
// goes, and its limits (package skills).
var skillsDescription = fmt.Sprintf("Skills the agent can load into its sandbox: folders in the Terraform configuration, each with a `SKILL.md` "+
	"whose YAML front matter gives the skill's `name` and `description`, plus the scripts and resources it needs. Plan and apply read each folder, "+
	"check it and hash it (`digest`); apply stores its content in the control plane, so the harness never reads the folder. The model sees every "+
	"skill's name and description and loads one with the `load_skill` tool, which copies the folder into the session's sandbox at "+
	"`/workspace/%s/<name>/`, read-only (provisioning the sandbox then, not before). Requires `sandbox.enabled = true`. At most %d skills "+
	"per agent. Refused at plan, naming the file: a folder without `SKILL.md`, front matter without a name or description, any symlink "+
	"(copy the file in instead), other special files, file names with `..`, control characters, backslashes or invalid UTF-8, names over "+
	"%d bytes, paths more than %d levels deep, more than %d files, more than %d bytes (1 MiB) in all, a `SKILL.md` over %d bytes (64 KiB), "+
	"a description over %d characters.",
	skills.WorkspaceDir, skills.MaxPerAgent, skills.MaxNameBytes, skills.MaxDepth, skills.MaxFiles, skills.MaxBytes, skills.MaxSkillMDBytes, skills.MaxDescriptionChars)

// skillAttr is the path of attribute name of skill i.
func skillAttr(i int, name string) path.Path { return path.Root("skills").AtListIndex(i).AtName(name) }

// readSkill reads the folder of skill i (configured as s) and checks it against what
// the configuration says of it, reporting what is wrong at skills[i].
func readSkill(i int, s skillModel, diags *diag.Diagnostics) (*skills.Bundle, bool) {
	dir := s.Path.ValueString()
	b, err := skills.Read(dir)
	var prob *skills.Problem
	switch {
	case errors.As(err, &prob):
		diags.AddAttributeError(skillAttr(i, "path"), prob.Summary, fmt.Sprintf("skills[%d].path: %s\n\n%s", i, prob.Detail, prob.Fix))
		return nil, false
	case err != nil:
		diags.AddAttributeError(skillAttr(i, "path"), "Error Reading Skill Folder",
			fmt.Sprintf("The folder of skills[%d] (%q) could not be read. Check that the machine running Terraform can read every file in it.\n\nOriginal Error: %s", i, dir, err))
		return nil, false
	}
	if !s.Name.IsNull() && !s.Name.IsUnknown() && s.Name.ValueString() != b.Name {
		diags.AddAttributeError(skillAttr(i, "name"), "Skill Name Does Not Match SKILL.md",
			fmt.Sprintf("skills[%d] is named %q, but %s/%s names the skill %q. Set name = %q, or leave name out to take it from SKILL.md, or change the name in SKILL.md.",
				i, s.Name.ValueString(), dir, skills.Manifest, b.Name, b.Name))
		return nil, false
	}
	return b, true
}

// planSkills reads the folder of every skill of plan whose path is known and sets what
// apply will publish where the plan differs from it: the name (when the configuration
// leaves it out), the description and the digest. An unchanged folder leaves the plan as
// it was, so an agent whose configuration and folders did not change plans no change; a
// changed file changes the digest, an in-place update of the agent. A skill whose path
// is unknown keeps these unknown, for apply to read. A folder that breaks a rule fails
// the plan, naming the file.
func planSkills(ctx context.Context, plan *tfsdk.Plan, diags *diag.Diagnostics) {
	var list types.List
	diags.Append(plan.GetAttribute(ctx, path.Root("skills"), &list)...)
	if diags.HasError() || list.IsNull() || list.IsUnknown() || len(list.Elements()) == 0 {
		return
	}
	named := map[string]int{}
	objs := knownObjects[skillModel](ctx, list)
	for i := range len(list.Elements()) {
		s, ok := objs[i]
		if !ok || s.Path.IsUnknown() {
			continue
		}
		b, ok := readSkill(i, s, diags)
		if !ok {
			continue
		}
		if first, dup := named[b.Name]; dup {
			addDuplicateSkill(diags, first, i, b.Name)
			continue
		}
		named[b.Name] = i
		for attr, v := range map[string]string{"name": b.Name, "description": b.Description, "digest": b.Digest} {
			cur := map[string]types.String{"name": s.Name, "description": s.Description, "digest": s.Digest}[attr]
			if cur.IsUnknown() || cur.IsNull() || cur.ValueString() != v {
				diags.Append(plan.SetAttribute(ctx, skillAttr(i, attr), types.StringValue(v))...)
			}
		}
	}
}

func addDuplicateSkill(diags *diag.Diagnostics, first, i int, name string) {
	diags.AddAttributeError(skillAttr(i, "path"), "Duplicate Skill Name",
		fmt.Sprintf("skills[%d] and skills[%d] are both named %q (by their SKILL.md); skill names must be unique within the agent. Rename one of them in its SKILL.md, or remove it.", first, i, name))
}

// publishSkills reads the folders of m's skills at apply, checks that they are what
// plan read, fills in their computed attributes, and returns their content to store
// with the agent.
func (m *agentModel) publishSkills(ctx context.Context, diags *diag.Diagnostics) []store.SkillBlob {
	if m.Skills.IsNull() || m.Skills.IsUnknown() {
		return nil
	}
	list := knownObjects[skillModel](ctx, m.Skills)
	vals := make([]attr.Value, 0, len(list))
	var blobs []store.SkillBlob
	named := map[string]int{}
	for i := range len(m.Skills.Elements()) {
		s := list[i]
		b, ok := readSkill(i, s, diags)
		if !ok {
			continue
		}
		if !s.Digest.IsUnknown() && !s.Digest.IsNull() && s.Digest.ValueString() != b.Digest {
			diags.AddAttributeError(skillAttr(i, "path"), "Skill Changed Since Plan",
				fmt.Sprintf("The files of skills[%d] (%q) changed after plan read them: its digest was %s at plan and is %s now. Nothing was stored. "+
					"Run terraform apply again to plan and publish the files as they are now.", i, s.Path.ValueString(), s.Digest.ValueString(), b.Digest))
			continue
		}
		if first, dup := named[b.Name]; dup {
			addDuplicateSkill(diags, first, i, b.Name)
			continue
		}
		named[b.Name] = i
		blobs = append(blobs, store.SkillBlob{Digest: b.Digest, Content: b.Encoded})
		obj, d := types.ObjectValue(skillAttrTypes, map[string]attr.Value{
			"description": types.StringValue(b.Description),
			"digest":      types.StringValue(b.Digest),
			"name":        types.StringValue(b.Name),
			"path":        s.Path,
		})
		diags.Append(d...)
		vals = append(vals, obj)
	}
	if diags.HasError() {
		return nil
	}
	l, d := types.ListValue(types.ObjectType{AttrTypes: skillAttrTypes}, vals)
	diags.Append(d...)
	m.Skills = l
	return blobs
}
