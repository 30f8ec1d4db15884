package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func (r *agentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[agentModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	spec, raw, blobs, ok := plan.applied(ctx, &resp.Diagnostics)
	if !ok {
		return
	}
	env := spec.EnvironmentRef() // none while the sandbox is off
	if env != "" && !r.checkEnvironment(ctx, spec.Name, env, &resp.Diagnostics) {
		return
	}
	if sb, _ := plan.sandboxSettings(ctx); !r.checkEnvironmentVersion(ctx, spec.Name, sb, &resp.Diagnostics) { // agent_environment_version.go
		return
	}
	err := r.cp.store.CreateAgent(ctx, store.Agent{
		ID: newID("agent"), Name: spec.Name, Owner: r.cp.owner, Environment: env, Spec: raw, Skills: blobs,
	})
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Agent Already Exists",
			fmt.Sprintf("Agent %q already exists in this control plane. Import it with `terraform import <address> %s`, or choose another name.", spec.Name, spec.Name))
		return
	case errors.Is(err, store.ErrNotFound):
		// The environment went away between the check and the insert.
		addEnvironmentNotFound(&resp.Diagnostics, spec.Name, env)
		return
	case err != nil:
		resp.Diagnostics.AddError("Error Creating Agent", fmt.Sprintf("Agent %q could not be stored.\n\nOriginal Error: %s", spec.Name, err))
		return
	}
	plan.ID = types.StringValue(spec.Name)
	setNameIdentity(ctx, resp.Identity, plan.ID, &resp.Diagnostics)
	plan.Owner = types.StringValue(r.cp.owner)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// applied is what Create and Update store of the planned agent: its skills published,
// the plan validated as apply sees it, and the spec (with its JSON) it becomes. ok is
// false when an error was added.
func (m *agentModel) applied(ctx context.Context, diags *diag.Diagnostics) (spec agentspec.Spec, raw []byte, blobs []store.SkillBlob, ok bool) {
	blobs = m.publishSkills(ctx, diags)
	if diags.HasError() {
		return spec, nil, nil, false
	}
	m.validate(ctx, true, diags)
	if diags.HasError() {
		return spec, nil, nil, false
	}
	spec, raw = m.spec(ctx)
	return spec, raw, blobs, true
}

func (r *agentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[agentModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	setNameIdentity(ctx, resp.Identity, state.ID, &resp.Diagnostics)
	a, err := r.cp.store.GetAgent(ctx, state.ID.ValueString())
	if errors.Is(err, store.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Error Reading Agent", fmt.Sprintf("Agent %q could not be read.\n\nOriginal Error: %s", state.ID.ValueString(), err))
		return
	}
	before := state
	resp.Diagnostics.Append(state.fromStore(ctx, a)...)
	if resp.Diagnostics.HasError() || reflect.DeepEqual(before, state) {
		// Unchanged: resp.State already holds the prior state.
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *agentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan, state, ok := decodeChange[agentModel](ctx, r.cp, req.Plan.Get, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	spec, raw, blobs, ok := plan.applied(ctx, &resp.Diagnostics)
	if !ok {
		return
	}
	env := spec.EnvironmentRef() // none while the sandbox is off
	if selectsEnvironment(ctx, &state, spec.Sandbox.Enabled, env) {
		if !r.checkEnvironment(ctx, spec.Name, env, &resp.Diagnostics) {
			return
		}
	} else if env != "" {
		// Kept, not selected anew: its owner must still allow it (environment_sharing.go).
		if e, err := r.cp.store.GetEnvironment(ctx, env); err == nil && !checkEnvironmentSharing(ctx, r.cp.store, spec.Name, r.cp.owner, e, &resp.Diagnostics) {
			return
		}
	}
	if sb, _ := plan.sandboxSettings(ctx); !r.checkEnvironmentVersion(ctx, spec.Name, sb, &resp.Diagnostics) { // agent_environment_version.go
		return
	}
	err := r.cp.store.UpdateAgent(ctx, store.Agent{Name: spec.Name, Environment: env, Spec: raw, Skills: blobs})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && env != "" {
			if _, gerr := r.cp.store.GetEnvironment(ctx, env); errors.Is(gerr, store.ErrNotFound) {
				addEnvironmentNotFound(&resp.Diagnostics, spec.Name, env)
				return
			}
		}
		resp.Diagnostics.AddError("Error Updating Agent",
			fmt.Sprintf("Agent %q could not be updated. If it was deleted outside Terraform, run terraform apply again to recreate it.\n\nOriginal Error: %s", spec.Name, err))
		return
	}
	plan.ID, plan.Owner = state.ID, state.Owner
	setNamed(ctx, &resp.State, resp.Identity, plan.ID, &plan, &resp.Diagnostics)
}

func (r *agentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[agentModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	err := r.cp.store.DeleteAgent(ctx, state.ID.ValueString())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		resp.Diagnostics.AddError("Error Deleting Agent", fmt.Sprintf("Agent %q could not be deleted.\n\nOriginal Error: %s", state.ID.ValueString(), err))
	}
}
