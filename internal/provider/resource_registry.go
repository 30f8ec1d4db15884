package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type registryResource struct{ namedResource }

type registryModel struct {
	ID                types.String `tfsdk:"id"`
	Name              types.String `tfsdk:"name"`
	SandboxProvider   types.String `tfsdk:"sandbox_provider"`
	URL               types.String `tfsdk:"url"`
	Username          types.String `tfsdk:"username"`
	Password          types.String `tfsdk:"password"`
	PasswordWO        types.String `tfsdk:"password_wo"`
	PasswordWOVersion types.Int64  `tfsdk:"password_wo_version"`
	Project           types.String `tfsdk:"project"`
	RemoteID          types.String `tfsdk:"remote_id"`
}

// NewRegistryResource is the trueforge_registry resource.
func NewRegistryResource() resource.Resource { return &registryResource{named("registry")} }

// registryCredential is the registry's password: password, or password_wo with
// password_wo_version.
var registryCredential = credential{
	name:        "password",
	plainDoc:    "Password or access token of `username` (sensitive; kept in state, stored sealed with AES-256-GCM). Prefer `password_wo`. Changing it updates the registry in place.",
	woDoc:       "Write-only password or access token (Terraform 1.11 or later): never stored in plan or state. Increment `password_wo_version` to send a new one.",
	versionDoc:  "Version of `password_wo`; change it to rotate the password (the registry is updated in place).",
	validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
	missing:     "Missing Password",
	conflicting: "Conflicting Passwords",
}

// registryLabel is the sealing label of a registry's password.
func registryLabel(name string) string { return "registry/" + name }

func (r *registryResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A private container registry that environments pull `image` (or the `dockerfile`'s base image) from, named by their " +
			"`registry` attribute. On a `daytona` sandbox provider it is a docker registry of the organization named `trueforge-<name>`: Daytona " +
			"picks the registry whose URL matches the image's host when it pulls, so `image` must start with this `url`'s host (for example " +
			"`ghcr.io/acme/agent:1` with `url = \"ghcr.io\"`), and one organization should not have two registries for one host. The password is " +
			"stored sealed and sent only to Daytona. The `local` backend runs only the platform image, so it refuses registries. Import with the name.",
		Attributes: map[string]schema.Attribute{
			"name":             replacingString("Name of the registry, unique in the control plane; environments name it in `registry`. Changing it replaces the registry.", validName()),
			"sandbox_provider": replacingString("Name of the `trueforge_sandbox_provider` that pulls from the registry (a `daytona` one). Changing it replaces the registry.", validName()),
			"url": schema.StringAttribute{
				MarkdownDescription: "The registry's host, with a port or path prefix if it has one, for example `ghcr.io`, `registry.example.com:5000` or " +
					"`https://index.docker.io/v1/`-style URLs without the trailing `/`. Daytona stores Docker Hub URLs as `docker.io`. " +
					"The host must be a domain name with a top-level domain or an IP address: Daytona refuses a bare name such as `localhost:5000` or `registry:5000`. Changed in place.",
				Required: true,
			},
			"username": schema.StringAttribute{
				MarkdownDescription: "User name to pull with. Changed in place.",
				Required:            true,
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"project": schema.StringAttribute{
				MarkdownDescription: "Project (namespace) of the registry, for registries that have them (Harbor, Google Artifact Registry). Changed in place.",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"id":        keptString("The registry's name."),
			"remote_id": keptString("The backend's id of the registry (Daytona's docker registry id)."),
		},
	}
	registryCredential.addAttributes(resp.Schema.Attributes)
}

func (r *registryResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{exactlyOneCredential{registryCredential}}
}

// ModifyPlan refuses at plan a registry of a backend that has none (the local one) and
// another owner's registry, and warns when one planned for deletion is still named by
// environments.
func (r *registryResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.cp == nil || req.Plan.Raw.Equal(req.State.Raw) {
		return
	}
	if req.Plan.Raw.IsNull() {
		registryKind.planDelete(ctx, r.cp, req.State, &resp.Diagnostics)
		return
	}
	var plan registryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.Name.IsUnknown() {
		return
	}
	if !req.State.Raw.IsNull() {
		if registryKind.refuseOthers(ctx, r.cp, plan.Name.ValueString(), "changed", &resp.Diagnostics) {
			return
		}
		var state registryModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if state.URL.ValueString() == "" {
			// Deleted outside Terraform (Read): apply creates it again, with a new id.
			plan.RemoteID = types.StringUnknown()
		}
	}
	if !plan.SandboxProvider.IsUnknown() && !plan.URL.IsUnknown() {
		// A provider created by this apply is checked at apply (Create).
		if p, err := r.cp.store.GetSandboxProvider(ctx, plan.SandboxProvider.ValueString()); err == nil {
			if b, err := r.cp.backend(p); err == nil {
				addProblems(&resp.Diagnostics, registryRules(b).CheckRegistry(sandbox.ProviderConfig{Name: p.Name, Type: p.Type}, plan.spec("")))
			}
		}
	}
	plan.ID = types.StringValue(plan.Name.ValueString())
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// registryBackend is the registry store of a sandbox provider, with what its backend
// checks of registries (rules), the provider as the backend sees it and the backend's
// title.
type registryBackend struct {
	sandbox.RegistryStore
	rules sandbox.RegistryChecker
	cfg   sandbox.ProviderConfig
	title string
}

// registries opens the registry store of the named sandbox provider (a backend that
// keeps no registries says why, on sandbox_provider).
func (r *registryResource) registries(ctx context.Context, providerName string, diags *diag.Diagnostics) registryBackend {
	b, cfg, ok := r.cp.openProvider(ctx, providerName, diags)
	if !ok {
		return registryBackend{}
	}
	rb := registryBackend{rules: registryRules(b), cfg: cfg, title: b.Info().Title}
	rs, err := b.Registries(ctx, cfg)
	if errors.Is(err, sandbox.ErrUnsupported) {
		var refused diag.Diagnostics
		addProblems(&refused, rb.rules.CheckRegistry(cfg, sandbox.RegistrySpec{}))
		if !refused.HasError() {
			addOperationError(&refused, "Registries Not Supported By Backend", fmt.Sprintf("sandbox provider %q", providerName), err)
		}
		diags.Append(refused...)
		return rb
	}
	if err != nil {
		addOperationError(diags, "Error Opening Sandbox Provider", fmt.Sprintf("sandbox provider %q, its registries", providerName), err)
		return rb
	}
	rb.RegistryStore = rs
	return rb
}

// check refuses, before it is sent, a registry that the backend refuses (CheckRegistry).
func (rb registryBackend) check(m *registryModel, diags *diag.Diagnostics) bool {
	var refused diag.Diagnostics
	addProblems(&refused, rb.rules.CheckRegistry(rb.cfg, m.spec("")))
	diags.Append(refused...)
	return !refused.HasError()
}

// registryRules is what backend b checks of registries: none when it has no rules of
// its own.
func registryRules(b sandbox.Backend) sandbox.RegistryChecker {
	if rc, ok := b.(sandbox.RegistryChecker); ok {
		return rc
	}
	return noRegistryRules{}
}

// noRegistryRules is the RegistryChecker of a backend that has none.
type noRegistryRules struct{}

func (noRegistryRules) CheckRegistry(sandbox.ProviderConfig, sandbox.RegistrySpec) []sandbox.Problem {
	return nil
}
func (noRegistryRules) RegistryURL(url string) string                       { return url }
func (noRegistryRules) CheckRegistryImage(_, _, _ string) []sandbox.Problem { return nil }

func (m *registryModel) spec(password string) sandbox.RegistrySpec {
	return sandbox.RegistrySpec{Name: m.Name.ValueString(), URL: m.URL.ValueString(), Username: m.Username.ValueString(),
		Password: password, Project: m.Project.ValueString()}
}

// seal is the registry's password sealed for the store; nil when an error was added.
func (r *registryResource) seal(ctx context.Context, name, password string, diags *diag.Diagnostics) []byte {
	sealed, _ := r.cp.seal(ctx, password, registryLabel(name), fmt.Sprintf("registry %q, sealing its password", name), diags)
	return sealed
}

func (r *registryResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, ok := decode[registryModel](ctx, r.cp, req.Plan.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx = maskSecrets(ctx)
	name := plan.Name.ValueString()
	if _, err := r.cp.store.GetRegistry(ctx, name); err == nil {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Registry Already Exists",
			fmt.Sprintf("Registry %q already exists. Choose another name, or import it with `terraform import <address> %s`.", name, name))
		return
	}
	password := registryCredential.value(ctx, plan.Password, req.Config, &resp.Diagnostics)
	sealed := r.seal(ctx, name, password, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	rs := r.registries(ctx, plan.SandboxProvider.ValueString(), &resp.Diagnostics)
	if resp.Diagnostics.HasError() || !rs.check(&plan, &resp.Diagnostics) {
		return
	}
	title := rs.title
	remote, err := rs.Create(ctx, plan.spec(password))
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Error Creating %s Registry", title),
			fmt.Sprintf("Registry %q could not be created in %s; nothing was stored. Check url, username and the password, then apply again.\n\nOriginal Error: %s", name, title, err))
		return
	}
	err = r.cp.store.CreateRegistry(ctx, store.Registry{Name: name, Provider: plan.SandboxProvider.ValueString(), Owner: r.cp.owner,
		URL: plan.URL.ValueString(), Username: plan.Username.ValueString(), PasswordEnc: sealed, Project: plan.Project.ValueString(), RemoteID: remote.ID})
	if err != nil {
		_ = rs.Delete(context.WithoutCancel(ctx), remote.ID)
		addOperationError(&resp.Diagnostics, "Error Creating Registry", fmt.Sprintf("registry %q, saving it", name), err)
		return
	}
	tflog.Debug(ctx, "registry: created", map[string]any{"registry": name, "backend": title, "remote_id": remote.ID})
	plan.ID, plan.RemoteID = types.StringValue(name), types.StringValue(remote.ID)
	setNamed(ctx, &resp.State, resp.Identity, plan.ID, &plan, &resp.Diagnostics)
}

// Read refreshes the registry from the store and its backend (one read): a registry
// deleted there reads with no URL and one changed there as it is, so that the plan
// shows the drift and apply repairs it in place.
func (r *registryResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, ok := decode[registryModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	name := state.ID.ValueString()
	g, ok := readNamed(ctx, "Registry", state.ID, r.cp.store.GetRegistry, resp)
	if !ok {
		return
	}
	state.ID, state.Name, state.SandboxProvider = types.StringValue(g.Name), types.StringValue(g.Name), types.StringValue(g.Provider)
	state.URL, state.Username, state.RemoteID = types.StringValue(g.URL), types.StringValue(g.Username), types.StringValue(g.RemoteID)
	state.Project = types.StringNull()
	if g.Project != "" {
		state.Project = types.StringValue(g.Project)
	}
	rs := r.registries(ctx, g.Provider, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	title := rs.title
	remote, ok := readRemote(ctx, "Registry", title, name, g.RemoteID, rs.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	switch {
	case remote == nil:
		resp.Diagnostics.AddWarning(fmt.Sprintf("%s Registry Deleted Outside Terraform", title),
			fmt.Sprintf("The %s registry of %q no longer exists. The plan shows it with no URL; apply creates it again with the configured URL, username and password.", title, name))
		state.URL = types.StringValue("")
	default:
		if remote.URL != rs.rules.RegistryURL(g.URL) {
			state.URL = types.StringValue(remote.URL)
		}
		state.Username = types.StringValue(remote.Username)
	}
	// The control plane can open its own seal: a password changed outside Terraform is
	// not visible (Daytona never returns it), but a state password is kept as stored.
	if !state.Password.IsNull() {
		if pt, err := r.cp.plane.Open(ctx, g.PasswordEnc, registryLabel(g.Name), "registry "+g.Name); err == nil {
			state.Password = types.StringValue(string(pt))
		}
	}
	setNamed(ctx, &resp.State, resp.Identity, state.ID, &state, &resp.Diagnostics)
}

// Update changes the registry in place in its backend and the store; a new password (or
// password_wo_version) is sent and sealed again, never a new registry.
func (r *registryResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	plan, state, ok := decodeChange[registryModel](ctx, r.cp, req.Plan.Get, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	ctx = maskSecrets(ctx)
	name := state.ID.ValueString()
	g, ok := ownedNamed(ctx, r.cp, "Registry", name, "changed", r.cp.store.GetRegistry, registryOwner, &resp.Diagnostics)
	if !ok {
		return
	}
	rotate := credentialChanged(plan.Password, state.Password, plan.PasswordWOVersion, state.PasswordWOVersion)
	password := registryCredential.value(ctx, plan.Password, req.Config, &resp.Diagnostics)
	var sealed []byte
	if rotate {
		sealed = r.seal(ctx, name, password, &resp.Diagnostics)
	}
	rs := r.registries(ctx, g.Provider, &resp.Diagnostics)
	if resp.Diagnostics.HasError() || !rs.check(&plan, &resp.Diagnostics) {
		return
	}
	title := rs.title
	// A registry recreated because it was deleted outside Terraform needs its password
	// even when the configuration did not change it.
	remote, err := rs.Update(ctx, g.RemoteID, plan.spec(password), rotate || password != "")
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Error Updating %s Registry", title),
			fmt.Sprintf("Registry %q could not be updated in %s; the stored registry is unchanged. Apply again.\n\nOriginal Error: %s", name, title, err))
		return
	}
	g.URL, g.Username, g.Project, g.RemoteID = plan.URL.ValueString(), plan.Username.ValueString(), plan.Project.ValueString(), remote.ID
	if err := r.cp.store.UpdateRegistry(ctx, g, sealed); err != nil {
		addOperationError(&resp.Diagnostics, "Error Updating Registry", fmt.Sprintf("registry %q, saving it", name), err)
		return
	}
	tflog.Debug(ctx, "registry: updated", map[string]any{"registry": name, "backend": title, "rotated": rotate})
	plan.ID, plan.RemoteID = state.ID, types.StringValue(remote.ID)
	setNamed(ctx, &resp.State, resp.Identity, plan.ID, &plan, &resp.Diagnostics)
}

// Delete removes the registry from the store first, in the transaction that checks no
// environment names it, then from its backend; when the backend fails, the row is put
// back.
func (r *registryResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, ok := decode[registryModel](ctx, r.cp, req.State.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	name := state.ID.ValueString()
	g, ok := ownedNamed(ctx, r.cp, "Registry", name, "deleted", r.cp.store.GetRegistry, registryOwner, &resp.Diagnostics)
	if !ok {
		return
	}
	rs := r.registries(ctx, g.Provider, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	registryKind.delete(ctx, r.cp, name, rs.title, 0, func(ctx context.Context) error { return rs.Delete(ctx, g.RemoteID) },
		func(ctx context.Context) error { return r.cp.store.CreateRegistry(ctx, g) }, &resp.Diagnostics)
}

// registryKind is what the registry's plan and Delete share with the volume's.
var registryKind = backedKind{kind: "Registry", owner: ownerBy((*store.Store).GetRegistry, registryOwner),
	deleteRow: (*store.Store).DeleteRegistry, users: (*store.Store).EnvironmentsUsingRegistry,
	usedAs:    "the registry of",
	stillUsed: "Registry Still Used By Environments",
	planNext:  "Unless this apply changes their registry first, deleting it will fail.",
	fix:       "Change those environments' registry",
	again:     "Apply again.",
}

func registryOwner(g store.Registry) string { return g.Owner }
