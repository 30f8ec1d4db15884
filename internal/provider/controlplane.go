package provider

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// controlPlane is what Configure hands to resources: the store, who is applying, and the
// backends, opened lazily because most plans never need them.
type controlPlane struct {
	store *store.Store
	plane *controlplane.Plane
	owner string

	// backends are this build's sandbox backends by type (tests put in their own).
	backends backends.Registry

	// builders caches one snapshot builder per provider setting: a plan over hundreds
	// of environments refreshes each of them, and a builder is not free to set up.
	mu       sync.Mutex
	builders map[string]sandbox.SnapshotBuilder
}

func newControlPlane(st *store.Store, owner string) *controlPlane {
	return &controlPlane{store: st, plane: controlplane.New(st), owner: owner, backends: backends.Default()}
}

// backend returns the backend of a sandbox provider.
func (cp *controlPlane) backend(p store.SandboxProvider) (sandbox.Backend, error) {
	return cp.backends.Get(p.Type)
}

// settings is p as its backend sees it, without the API key: enough for plan-time checks.
func (cp *controlPlane) settings(ctx context.Context, p store.SandboxProvider) (sandbox.ProviderConfig, error) {
	id, err := cp.plane.ID(ctx)
	return sandbox.ProviderConfig{Name: p.Name, Type: p.Type, APIURL: p.APIURL, Target: p.Target,
		RequireLimits: p.RequireLimits, DataDir: cp.plane.DataDir(), Plane: id}, err
}

// opened is p as its backend is opened with it: its API key opened.
func (cp *controlPlane) opened(ctx context.Context, p store.SandboxProvider) (sandbox.Backend, sandbox.ProviderConfig, error) {
	b, err := cp.backend(p)
	if err != nil {
		return nil, sandbox.ProviderConfig{}, err
	}
	cfg, err := cp.plane.Provider(ctx, p)
	return b, cfg, err
}

// openProvider opens the sandbox provider a resource's sandbox_provider names, adding an
// error on that attribute (a missing provider) or an operation error (a store or backend
// failure) to diags; ok is false then.
func (cp *controlPlane) openProvider(ctx context.Context, name string, diags *diag.Diagnostics) (b sandbox.Backend, cfg sandbox.ProviderConfig, ok bool) {
	p, err := cp.store.GetSandboxProvider(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		diags.AddAttributeError(path.Root("sandbox_provider"), "Sandbox Provider Not Found",
			fmt.Sprintf("No sandbox provider %q exists. Reference a trueforge_sandbox_provider's name attribute so Terraform creates it first.", name))
		return nil, cfg, false
	}
	if err != nil {
		addOperationError(diags, "Error Reading Sandbox Provider", fmt.Sprintf("sandbox provider %q", name), err)
		return nil, cfg, false
	}
	b, cfg, err = cp.opened(ctx, p)
	if err != nil {
		addOperationError(diags, "Error Opening Sandbox Provider", fmt.Sprintf("sandbox provider %q", name), err)
		return nil, cfg, false
	}
	return b, cfg, true
}

// builder returns the snapshot builder of a provider.
func (cp *controlPlane) builder(ctx context.Context, p store.SandboxProvider) (sandbox.SnapshotBuilder, error) {
	b, cfg, err := cp.opened(ctx, p)
	if err != nil {
		return nil, err
	}
	// A builder is tied to the provider's endpoint and key, which an update of the
	// provider may change within one run.
	sum := sha256.Sum256([]byte(cfg.APIKey))
	cacheKey := strings.Join([]string{cfg.Type, cfg.APIURL, cfg.Target, cfg.DataDir, string(sum[:])}, "\x00")
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if sb, ok := cp.builders[cacheKey]; ok {
		return sb, nil
	}
	sb, err := b.Builder(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cp.builders == nil {
		cp.builders = map[string]sandbox.SnapshotBuilder{}
	}
	cp.builders[cacheKey] = sb
	return sb, nil
}

// remoteSnapshots reports whether p's snapshots live in a remote service
// (sandbox.Capabilities.RemoteSnapshots).
func (cp *controlPlane) remoteSnapshots(p store.SandboxProvider) bool {
	b, err := cp.backend(p)
	return err == nil && b.Info().Capabilities.RemoteSnapshots
}

// coordinator returns the build coordinator for the named sandbox provider.
func (cp *controlPlane) coordinator(ctx context.Context, providerName string) (*builds.Coordinator, store.SandboxProvider, error) {
	p, err := cp.store.GetSandboxProvider(ctx, providerName)
	if err != nil {
		return nil, p, err
	}
	b, err := cp.builder(ctx, p)
	if err != nil {
		return nil, p, err
	}
	return &builds.Coordinator{Store: cp.store, Builder: b, Provider: p.Name}, p, nil
}

// checkEnvironment adds what p's backend would refuse or not honour about env.
func (cp *controlPlane) checkEnvironment(ctx context.Context, p store.SandboxProvider, env sandbox.EnvironmentSpec, diags *diag.Diagnostics) {
	b, err := cp.backend(p)
	if err != nil {
		return // the provider's own type check reports it
	}
	settings, err := cp.settings(ctx, p)
	if err != nil {
		addOperationError(diags, "Control Plane Unavailable", fmt.Sprintf("environment %q", env.Name), err)
		return
	}
	addProblems(diags, b.CheckEnvironment(ctx, settings, env))
}

// addProblems turns a backend's problems into diagnostics on their attributes.
func addProblems(diags *diag.Diagnostics, problems []sandbox.Problem) {
	for _, pr := range problems {
		switch {
		case pr.Attribute == "" && pr.Warning:
			diags.AddWarning(pr.Summary, pr.Detail)
		case pr.Attribute == "":
			diags.AddError(pr.Summary, pr.Detail)
		case pr.Warning:
			diags.AddAttributeWarning(attributePath(pr.Attribute), pr.Summary, pr.Detail)
		default:
			diags.AddAttributeError(attributePath(pr.Attribute), pr.Summary, pr.Detail)
		}
	}
}

// attributePath is the path of a dotted attribute name ("network.allow_domains").
func attributePath(dotted string) path.Path {
	parts := strings.Split(dotted, ".")
	p := path.Root(parts[0])
	for _, name := range parts[1:] {
		p = p.AtName(name)
	}
	return p
}

// environmentSecrets returns the backend secret store of an environment's sandbox
// provider and the backend's title, or a nil store when that backend keeps none (or the
// environment does not exist yet).
func (cp *controlPlane) environmentSecrets(ctx context.Context, environment string) (sandbox.SecretStore, string, error) {
	env, err := cp.store.GetEnvironment(ctx, environment)
	if err != nil {
		return nil, "", ignoreNotFound(err)
	}
	p, err := cp.store.GetSandboxProvider(ctx, env.Provider)
	if err != nil {
		return nil, "", err
	}
	b, cfg, err := cp.opened(ctx, p)
	if err != nil {
		return nil, "", err
	}
	s, err := b.Secrets(ctx, cfg)
	return s, b.Info().Title, err
}

// seal seals a credential (plaintext) under label with the control plane's secret
// key, for the store; what names it in the error ("registry \"r\", sealing its
// password"). ok is false when an error was added.
func (cp *controlPlane) seal(ctx context.Context, plaintext, label, what string, diags *diag.Diagnostics) ([]byte, bool) {
	sealed, err := cp.plane.Seal(ctx, []byte(plaintext), label)
	if err != nil {
		addOperationError(diags, "Secret Key Unavailable", what, err)
		return nil, false
	}
	return sealed, true
}

// addOwnerError reports that the caller would change or delete an object of kind that
// owner owns, and what the caller can do: on PostgreSQL the owner is a database role.
func (cp *controlPlane) addOwnerError(diags *diag.Diagnostics, kind, name, owner, verb string) {
	next := fmt.Sprintf("Ask its owner, or apply with owner = %q if you are acting for them.", owner)
	if cp.store.Shared() {
		next = fmt.Sprintf("On this PostgreSQL control plane each role changes only what it created, and the database enforces it. "+
			"Ask its owner, or apply as role %q (in database_url) if you are acting for them.", owner)
	}
	diags.AddError(kind+" Owned By Another User",
		fmt.Sprintf("%s %q is owned by %q and cannot be %s by %q. %s", kind, name, owner, verb, cp.owner, next))
}

// refuseOthers adds an error at plan time when req would change or delete an object of
// kind that another role owns, on a database that enforces ownership: on PostgreSQL,
// row-level security would refuse the write at apply, or hide the row so that the write
// changed nothing and looked like success. owner is the object's owner ("" when
// unknown). Environments and their secrets are checked on every database by their own
// ModifyPlan; this covers what only the database enforces (agents, the sandbox provider).
func (cp *controlPlane) refuseOthers(req resource.ModifyPlanRequest, kind, name, owner string, diags *diag.Diagnostics) bool {
	if !cp.store.Shared() || owner == "" || owner == cp.owner || req.State.Raw.IsNull() || req.Plan.Raw.Equal(req.State.Raw) {
		return false
	}
	verb := "changed"
	if req.Plan.Raw.IsNull() {
		verb = "deleted"
	}
	cp.addOwnerError(diags, kind, name, owner, verb)
	return true
}

// othersSecret reports whether a secret of environment that this role cannot find may
// simply be hidden from it: on PostgreSQL only an environment's owner (and harness
// roles) may read its secrets, so another team planning a shared configuration cannot
// see them. Its plan keeps such a secret as its state says, rather than planning to
// create one that exists; changing it is refused at plan as for any secret of another's
// environment.
func (cp *controlPlane) othersSecret(ctx context.Context, environment string) bool {
	if !cp.store.Shared() {
		return false
	}
	env, err := cp.store.GetEnvironment(ctx, environment)
	return err == nil && env.Owner != cp.owner
}

// ignoreNotFound is err, or nil when it says that something does not exist.
func ignoreNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// configureControlPlane is the shared body of every resource's and data source's
// Configure.
func configureControlPlane(providerData any, diags *diag.Diagnostics) *controlPlane {
	if providerData == nil {
		return nil
	}
	cp, ok := providerData.(*controlPlane)
	if !ok {
		diags.AddError("Unexpected Configure Type",
			fmt.Sprintf("Expected *controlPlane, got %T. Please report this issue to the provider developers.", providerData))
		return nil
	}
	return cp
}

// configuredResource is what every resource embeds: the control plane it acts on, set
// by its Configure, and its type name, which Metadata gives Terraform.
type configuredResource struct {
	cp       *controlPlane
	typeName string // after the provider's: "_agent"
}

func (c *configuredResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + c.typeName
}

func (c *configuredResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c.cp = configureControlPlane(req.ProviderData, &resp.Diagnostics)
}

// configuredDataSource is what every data source embeds: the control plane it reads,
// set by its Configure.
type configuredDataSource struct{ cp *controlPlane }

func (c *configuredDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	c.cp = configureControlPlane(req.ProviderData, &resp.Diagnostics)
}

// notConfigured reports a resource used before the provider was configured.
func notConfigured(diags *diag.Diagnostics) {
	diags.AddError("Provider Not Configured",
		"The trueforge provider was not configured with known values, so the control-plane database is not open. "+
			"Make database_url and owner known at plan time.")
}

// decode is how every CRUD step starts: it reads the plan, state or config (get is its
// Get method) into a model, and reports false, with the reason in diags, when the
// provider is not configured or the data does not decode.
func decode[T any](ctx context.Context, cp *controlPlane, get func(context.Context, any) diag.Diagnostics, diags *diag.Diagnostics) (T, bool) {
	var m T
	if cp == nil {
		notConfigured(diags)
		return m, false
	}
	diags.Append(get(ctx, &m)...)
	return m, !diags.HasError()
}

// decodeChange is decode for an update, which reads both the plan and the prior state.
func decodeChange[T any](ctx context.Context, cp *controlPlane, plan, state func(context.Context, any) diag.Diagnostics, diags *diag.Diagnostics) (T, T, bool) {
	p, ok := decode[T](ctx, cp, plan, diags)
	if !ok {
		return p, p, false
	}
	s, ok := decode[T](ctx, cp, state, diags)
	return p, s, ok
}
