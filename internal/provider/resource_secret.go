package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type secretResource struct{ configuredResource }

type secretModel struct {
	ID             types.String   `tfsdk:"id"`
	Environment    types.String   `tfsdk:"environment"`
	EnvName        types.String   `tfsdk:"env_name"`
	Value          types.String   `tfsdk:"value"`
	ValueWO        types.String   `tfsdk:"value_wo"`
	ValueWOVersion types.Int64    `tfsdk:"value_wo_version"`
	Hosts          types.List     `tfsdk:"hosts"`
	Timeouts       timeouts.Value `tfsdk:"timeouts"`
}

// NewSecretResource is the trueforge_secret resource.
func NewSecretResource() resource.Resource {
	return &secretResource{configuredResource{typeName: "_secret"}}
}

// secretCredential is the secret's value: value, or value_wo with value_wo_version.
var secretCredential = credential{
	name:        "value",
	plainDoc:    "The credential (sensitive; kept in state). Prefer `value_wo`. Changing it rotates the secret in place.",
	woDoc:       "Write-only credential (Terraform 1.11 or later): never stored in plan or state. Increment `value_wo_version` to rotate.",
	versionDoc:  "Version of `value_wo`; change it to send a new value (a rotation, in place).",
	validators:  []validator.String{stringvalidator.LengthAtLeast(1), validSecretValue()},
	missing:     "Missing Secret Value",
	conflicting: "Conflicting Secret Values",
}

func (r *secretResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A network-scoped credential of an environment, for the sandbox's own outbound calls (not model or MCP " +
			"credentials, which stay in the harness). The sandbox process sees the variable, but the value is only forwarded to " +
			"`hosts`. The value is stored sealed (AES-256-GCM), never in plaintext. Rotating or removing a secret is live for " +
			"running sandboxes; adding one reaches only sandboxes created afterwards. Secrets cannot be added while the " +
			"environment's `network.block_all` is on. On a `daytona` sandbox provider the secret is also a Daytona secret named " +
			"`trueforge-<environment>--<env_name>` with these hosts; refresh compares it with Daytona. Import with `<environment>/<env_name>`.",
		Attributes: map[string]schema.Attribute{
			"env_name":    replacingString("The environment variable the sandbox process sees, for example `GITHUB_TOKEN`. Changing it replaces the secret.", validEnvVarName()),
			"environment": replacingString("Name of the environment the secret belongs to. Changing it replaces the secret.", validName()),
			"hosts": schema.ListAttribute{
				MarkdownDescription: "Hosts the value may be sent to: host names or `*.` wildcards, with no scheme, port or path. Changed in place.",
				Required:            true,
				ElementType:         types.StringType,
				Validators:          []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(), listvalidator.ValueStringsAre(validHost())},
			},
			"id": keptString("`<environment>/<env_name>`."),
			"timeouts": timeoutsAttribute(ctx, "How long apply waits for the secret's backend (on Daytona a secret call may be retried for minutes).", map[string]string{
				"create": "How long creating the secret may take. Defaults to 10 minutes.",
				"update": "How long changing its hosts or rotating its value may take. Defaults to 10 minutes.",
				"delete": "How long deleting the secret may take. Defaults to 10 minutes.",
			}),
		},
	}
	secretCredential.addAttributes(resp.Schema.Attributes)
}

func (r *secretResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{exactlyOneCredential{secretCredential}}
}

// checkEnvironment enforces the rules of the environment a secret is added to: it
// exists, the caller owns it, and block_all is off. known=false means the environment is
// not in the store yet (created in the same apply).
//
// At plan time (planning=true) block_all gives a warning, not an error: the same apply may
// turn block_all off before the secret is created, and only apply can tell.
func (r *secretResource) checkEnvironment(ctx context.Context, name string, adding, planning bool, diags *diag.Diagnostics) (known bool) {
	env, err := r.cp.store.GetEnvironment(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		addOperationError(diags, "Error Reading Environment", fmt.Sprintf("environment %q", name), err)
		return true
	}
	if env.Owner != r.cp.owner {
		r.cp.addOwnerError(diags, "Environment", name, env.Owner, "changed (its secrets are part of it)")
		return true
	}
	if adding && planning {
		warnFirstSecret(ctx, r.cp.store, env, diags) // environment_sharing.go
	}
	if adding && env.BlockAll && planning {
		diags.AddAttributeWarning(path.Root("environment"), "Environment Blocks All Network",
			fmt.Sprintf("Environment %q has network.block_all = true now. Unless this apply turns it off first, adding this secret will fail: secrets cannot be added while block_all is on.", name))
	}
	if adding && env.BlockAll && !planning {
		diags.AddAttributeError(path.Root("environment"), "Secrets Cannot Be Added While Block All Network Is On",
			fmt.Sprintf("Environment %q has network.block_all = true, so no secret could ever be sent anywhere. Turn block_all off first (secrets are network-scoped), or do not add the secret.", name))
	}
	return true
}

func (r *secretResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.cp == nil || req.Plan.Raw.IsNull() || req.Plan.Raw.Equal(req.State.Raw) {
		// Destroy (Delete checks the owner), or nothing changes: planning another
		// owner's unchanged secret is not changing it.
		return
	}
	var plan secretModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.Environment.IsUnknown() || plan.EnvName.IsUnknown() {
		return
	}
	plan.ID = types.StringValue(store.SecretID(plan.Environment.ValueString(), plan.EnvName.ValueString()))
	r.checkEnvironment(ctx, plan.Environment.ValueString(), req.State.Raw.IsNull(), true, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// seal is the secret's value sealed for the store; nil when an error was added.
func (r *secretResource) seal(ctx context.Context, id, value string, diags *diag.Diagnostics) []byte {
	sealed, _ := r.cp.seal(ctx, value, controlplane.SecretLabel(id), fmt.Sprintf("secret %s, sealing its value", id), diags)
	return sealed
}

func (r *secretResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[secretModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx = maskSecrets(ctx)
	ctx, cancel, timeout := withTimeout(ctx, plan.Timeouts.Create, defaultSecretTimeout, &resp.Diagnostics)
	defer cancel()

	envName := plan.Environment.ValueString()
	if !r.checkEnvironment(ctx, envName, true, false, &resp.Diagnostics) {
		resp.Diagnostics.AddAttributeError(path.Root("environment"), "Environment Not Found",
			fmt.Sprintf("No environment %q exists. Reference a trueforge_environment's name attribute so Terraform creates it first.", envName))
	}
	if resp.Diagnostics.HasError() {
		return
	}
	id := store.SecretID(envName, plan.EnvName.ValueString())
	value := secretCredential.value(ctx, plan.Value, req.Config, &resp.Diagnostics)
	sealed := r.seal(ctx, id, value, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if _, err := r.cp.store.GetSecret(ctx, id); err == nil {
		resp.Diagnostics.AddError("Secret Already Exists",
			fmt.Sprintf("Environment %q already has a secret %s. Import it with `terraform import <address> %s`.", envName, plan.EnvName.ValueString(), id))
		return
	}
	hosts := listFrom(ctx, plan.Hosts)
	// On a backend with secrets of its own the value lives there too; it is created first
	// so that a failure leaves nothing in the store.
	bs, title, err := r.cp.environmentSecrets(ctx, envName)
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Creating Secret", fmt.Sprintf("secret %s, opening the backend of environment %q", id, envName), err)
		return
	}
	var remote *sandbox.RemoteSecret
	if bs != nil {
		rs, err := bs.Create(ctx, sandbox.SecretValue{Environment: envName, EnvName: plan.EnvName.ValueString(), Value: value, Hosts: hosts})
		if timedOut(ctx, err) {
			addTimeoutError(&resp.Diagnostics, "Timed Out Creating Secret", "create", timeout,
				fmt.Sprintf("Creating secret %s in %s", id, title), "Nothing was stored in trueforge. Raise timeouts.create and apply again.", err)
			return
		}
		if err != nil {
			resp.Diagnostics.AddError(fmt.Sprintf("Error Creating %s Secret", title),
				fmt.Sprintf("Secret %s could not be created in %s as %q; nothing was stored.\n\nOriginal Error: %s", id, title, bs.Name(envName, plan.EnvName.ValueString()), err))
			return
		}
		remote = &rs
		tflog.Debug(ctx, "secret: created in the backend", map[string]any{"secret": id, "backend": title, "remote_id": rs.ID})
	}
	err = r.cp.store.CreateSecret(ctx, store.Secret{ID: id, Environment: envName, EnvName: plan.EnvName.ValueString(), Hosts: hosts, ValueEnc: sealed})
	if err != nil && remote != nil {
		_ = bs.Delete(context.WithoutCancel(ctx), *remote, envName, plan.EnvName.ValueString())
	}
	if errors.Is(err, store.ErrAlreadyExists) {
		resp.Diagnostics.AddError("Secret Already Exists",
			fmt.Sprintf("Environment %q already has a secret %s. Import it with `terraform import <address> %s`.", envName, plan.EnvName.ValueString(), id))
		return
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Creating Secret", fmt.Sprintf("secret %s, saving it", id), err)
		return
	}
	plan.ID = types.StringValue(id)
	r.identify(ctx, plan.ID, resp.Identity, &resp.Diagnostics)
	saveRemoteSecret(ctx, resp.Private, remote, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *secretResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[secretModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	r.identify(ctx, state.ID, resp.Identity, &resp.Diagnostics)
	sec, err := r.cp.store.GetSecret(ctx, state.ID.ValueString())
	if errors.Is(err, store.ErrNotFound) {
		if r.cp.othersSecret(ctx, state.Environment.ValueString()) {
			return // not this role's to see: the state stays as it is
		}
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Reading Secret", fmt.Sprintf("secret %s", state.ID.ValueString()), err)
		return
	}
	state.Environment = types.StringValue(sec.Environment)
	state.EnvName = types.StringValue(sec.EnvName)
	state.Hosts = stringList(sec.Hosts)
	valueDrift := r.readRemote(ctx, sec, &state, req.Private, resp)
	if resp.Diagnostics.HasError() {
		return
	}
	// The control plane can open its own seal, so a value changed outside Terraform shows
	// as drift of `value`. A write-only value is never in state and cannot drift-detect.
	if !state.Value.IsNull() {
		if _, err := r.cp.plane.SecretBox(ctx); err == nil {
			if pt, err := r.cp.plane.Open(ctx, sec.ValueEnc, controlplane.SecretLabel(sec.ID), "secret "+sec.ID); err == nil && !valueDrift {
				state.Value = types.StringValue(string(pt))
			} else {
				state.Value = types.StringValue("") // unreadable: force a rotation to repair it
			}
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *secretResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan, state, ok := decodeChange[secretModel](ctx, r.cp, req.Plan.Get, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx = maskSecrets(ctx)
	ctx, cancel, timeout := withTimeout(ctx, plan.Timeouts.Update, defaultSecretTimeout, &resp.Diagnostics)
	defer cancel()

	r.checkEnvironment(ctx, state.Environment.ValueString(), false, false, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	var sealed []byte
	rotate := credentialChanged(plan.Value, state.Value, plan.ValueWOVersion, state.ValueWOVersion)
	if rotate {
		sealed = r.seal(ctx, id, secretCredential.value(ctx, plan.Value, req.Config, &resp.Diagnostics), &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	hosts := listFrom(ctx, plan.Hosts)
	bs, title, err := r.cp.environmentSecrets(ctx, state.Environment.ValueString())
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Secret", fmt.Sprintf("secret %s, opening the backend of environment %q", id, state.Environment.ValueString()), err)
		return
	}
	if bs != nil {
		// One update: a rotation is a new value, never a new secret or snapshot.
		value := secretCredential.value(ctx, plan.Value, req.Config, &resp.Diagnostics)
		remote, err := bs.Update(ctx, loadRemoteSecret(ctx, req.Private),
			sandbox.SecretValue{Environment: state.Environment.ValueString(), EnvName: state.EnvName.ValueString(), Value: value, Hosts: hosts}, rotate)
		if timedOut(ctx, err) {
			addTimeoutError(&resp.Diagnostics, "Timed Out Updating Secret", "update", timeout,
				fmt.Sprintf("Updating secret %s in %s", id, title), "The stored secret is unchanged. Raise timeouts.update and apply again.", err)
			return
		}
		if err != nil {
			resp.Diagnostics.AddError(fmt.Sprintf("Error Updating %s Secret", title),
				fmt.Sprintf("Secret %s could not be updated in %s; the stored secret is unchanged. Apply again.\n\nOriginal Error: %s", id, title, err))
			return
		}
		saveRemoteSecret(ctx, resp.Private, &remote, &resp.Diagnostics)
		tflog.Debug(ctx, "secret: updated in the backend", map[string]any{"secret": id, "backend": title, "rotated": rotate})
	}
	if err := r.cp.store.UpdateSecret(ctx, id, hosts, sealed); err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Secret", fmt.Sprintf("secret %s, saving it", id), err)
		return
	}
	plan.ID = state.ID
	r.identify(ctx, plan.ID, resp.Identity, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *secretResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[secretModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx, cancel, timeout := withTimeout(ctx, state.Timeouts.Delete, defaultSecretTimeout, &resp.Diagnostics)
	defer cancel()

	if env, err := r.cp.store.GetEnvironment(ctx, state.Environment.ValueString()); err == nil && env.Owner != r.cp.owner {
		r.cp.addOwnerError(&resp.Diagnostics, "Environment", env.Name, env.Owner, "changed (its secrets are part of it)")
		return
	}
	bs, title, err := r.cp.environmentSecrets(ctx, state.Environment.ValueString())
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Deleting Secret", fmt.Sprintf("secret %s, opening the backend of environment %q", state.ID.ValueString(), state.Environment.ValueString()), err)
		return
	}
	if bs != nil {
		err := bs.Delete(ctx, loadRemoteSecret(ctx, req.Private), state.Environment.ValueString(), state.EnvName.ValueString())
		if timedOut(ctx, err) {
			addTimeoutError(&resp.Diagnostics, "Timed Out Deleting Secret", "delete", timeout,
				fmt.Sprintf("Deleting secret %s in %s", state.ID.ValueString(), title), "It is kept in trueforge too. Raise timeouts.delete and run the command again.", err)
			return
		}
		if err != nil {
			resp.Diagnostics.AddError(fmt.Sprintf("Error Deleting %s Secret", title),
				fmt.Sprintf("Secret %s could not be deleted in %s; it is kept in trueforge too. Apply again.\n\nOriginal Error: %s", state.ID.ValueString(), title, err))
			return
		}
		tflog.Debug(ctx, "secret: deleted in the backend", map[string]any{"secret": state.ID.ValueString(), "backend": title})
	}
	if err := r.cp.store.DeleteSecret(ctx, state.ID.ValueString()); err != nil && !errors.Is(err, store.ErrNotFound) {
		addOperationError(&resp.Diagnostics, "Error Deleting Secret", fmt.Sprintf("secret %s", state.ID.ValueString()), err)
	}
}

// readRemote refreshes a secret against its backend's own secret store, if the backend
// keeps one (one read): a secret deleted there reads as having no hosts, hosts changed
// there read as they are, so the plan shows the drift and apply repairs it in place. It
// reports whether the value may have been changed there (a backend never returns
// values): a state `value` then reads as "" so the plan rotates it; a write-only value
// gets a warning.
func (r *secretResource) readRemote(ctx context.Context, sec store.Secret, state *secretModel, priv privateGetter, resp *resource.ReadResponse) bool {
	bs, title, err := r.cp.environmentSecrets(ctx, sec.Environment)
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Reading Secret", fmt.Sprintf("secret %s, opening the backend of environment %q", sec.ID, sec.Environment), err)
		return false
	}
	if bs == nil {
		return false
	}
	rs := loadRemoteSecret(ctx, priv)
	name := bs.Name(sec.Environment, sec.EnvName)
	remote, err := bs.Get(ctx, rs, sec.Environment, sec.EnvName)
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Error Reading %s Secret", title), fmt.Sprintf("Secret %s (%s secret %q): %s", sec.ID, title, name, err))
		return false
	}
	if remote == nil {
		resp.Diagnostics.AddWarning(fmt.Sprintf("%s Secret Deleted Outside Terraform", title),
			fmt.Sprintf("%s secret %q of %s no longer exists. The plan shows it with no hosts; apply recreates it with the configured value and hosts. "+
				"The recreated secret gets a new placeholder: sandboxes started before keep the old one in their environment, which %s no longer replaces, "+
				"so their requests carry the placeholder instead of the value until they are started again or replaced (a new session).", title, name, sec.ID, title))
		state.Hosts = stringList(nil)
		return false
	}
	hosts, valueChanged := remoteSecretDrift(remote, rs)
	state.Hosts = stringList(hosts)
	if rs.ID == "" {
		// Imported or recovered: remember the secret from now on.
		saveRemoteSecret(ctx, resp.Private, remote, &resp.Diagnostics)
	}
	if valueChanged && state.Value.IsNull() {
		resp.Diagnostics.AddWarning(fmt.Sprintf("%s Secret Changed Outside Terraform", title),
			fmt.Sprintf("%s secret %q of %s was updated outside Terraform, so its value may differ from value_wo. Increment value_wo_version to send the configured value again.", title, name, sec.ID))
	}
	return valueChanged
}

func (r *secretResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id := r.importID(ctx, req, &resp.Diagnostics)
	env, name, ok := strings.Cut(id, "/")
	if !ok || env == "" || name == "" {
		resp.Diagnostics.AddError("Invalid Import ID",
			fmt.Sprintf("Secret import IDs have the form <environment>/<env_name> (for example py/GITHUB_TOKEN); got %q.", id))
		return
	}
	// The value is not imported: the plaintext never enters state through an import. The
	// next apply re-seals the configured value, which is harmless.
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
}
