// Package provider is the trueforge Terraform provider: sandbox providers, environments,
// secrets and agents, published into the control-plane store that the harness reads.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Environment variables read when the provider block leaves a setting out.
const (
	envDatabaseURL = "TRUEFORGE_DATABASE_URL"
	envOwner       = "TRUEFORGE_OWNER"
)

var _ provider.Provider = (*trueforgeProvider)(nil)

type trueforgeProvider struct {
	version string
	// backends, when set, replaces backends.Default(): tests poll and back off faster
	// against the Daytona emulator, or fake what the local backend finds on the host.
	backends backends.Registry
	// getenv, when set, replaces os.Getenv for every setting the provider reads from its
	// environment: tests that run in parallel give each control plane its own key.
	getenv func(string) string
}

type providerModel struct {
	DatabaseURL types.String `tfsdk:"database_url"`
	Owner       types.String `tfsdk:"owner"`
}

// New returns a constructor of the provider, as providerserver expects.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &trueforgeProvider{version: version} }
}

func (p *trueforgeProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "trueforge"
	resp.Version = p.version
}

func (p *trueforgeProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Declares where AI agents run their code: sandbox providers, environments (snapshot blueprints), " +
			"network-scoped secrets and agents. `terraform apply` publishes them into the trueforge control-plane database, " +
			"which `trueforge-harness` reads to run the agents.",
		Attributes: map[string]schema.Attribute{
			"database_url": schema.StringAttribute{
				MarkdownDescription: "The control-plane database: an SQLite file path (or `sqlite://` / `file:` URL), or a PostgreSQL URL " +
					"(`postgres://` or `postgresql://`) for a control plane that teams, CI runners and harnesses share (see the PostgreSQL guide). " +
					"Defaults to `$" + envDatabaseURL + "`, else `trueforge/trueforge.db` under the user's data directory " +
					"(`$XDG_DATA_HOME`, else `~/.local/share`). With SQLite, the local backend keeps its snapshots and the secret key file " +
					"beside the database. With PostgreSQL, `$TRUEFORGE_SECRET_KEY` is required (the same key on every machine), and local " +
					"files go to `$TRUEFORGE_DATA_DIR` (default: that same data directory). Put a password in `$" + envDatabaseURL + "`, " +
					"`PGPASSWORD` or `~/.pgpass` rather than in configuration.",
				Optional: true,
			},
			"owner": schema.StringAttribute{
				MarkdownDescription: "Who is applying: environments are owned by their creator, and only the owner may change or delete them " +
					"or their secrets. On SQLite it defaults to `$" + envOwner + "`, else the OS user. On PostgreSQL the owner is the database " +
					"role `database_url` authenticates as, enforced by the database's row-level security (there agents and the sandbox " +
					"provider are owned too): leave `owner` unset; a value, or `$" + envOwner + "`, that differs from the role is an error.",
				Optional: true,
			},
		},
	}
}

func (p *trueforgeProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.DatabaseURL.IsUnknown() || cfg.Owner.IsUnknown() {
		// Values come from resources not created yet; resources will not be called before
		// a later Configure with known values.
		return
	}
	ctx = maskSecrets(ctx)
	dbURL, from := cfg.DatabaseURL.ValueString(), "database_url"
	if dbURL == "" {
		dbURL, from = p.env(envDatabaseURL), envDatabaseURL
	}
	tflog.Debug(ctx, "configure: opening the control-plane database", map[string]any{"database": redactedURL(dbURL), "from": from})
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("database_url"), "Unable To Open Control-Plane Database",
			"The trueforge provider could not open its database.\n\nSet database_url (or "+envDatabaseURL+") to a writable SQLite path, "+
				"or to a postgres:// URL of a PostgreSQL database and a role that may use it (see the PostgreSQL guide).\n\nOriginal Error: "+err.Error())
		return
	}
	owner, ok := p.owner(cfg, st, &resp.Diagnostics)
	if !ok {
		st.Close()
		return
	}
	st.EnableConfigCache() // a plan reads the configuration once, not per resource (store/config_cache.go)
	cp := newControlPlane(st, owner)
	cp.plane.Getenv = p.env
	// The key is checked against the control plane before any resource runs, so that a
	// machine with the wrong key (or none, on PostgreSQL) writes nothing at all.
	if _, err := cp.plane.SecretBox(ctx); err != nil {
		addKeyError(&resp.Diagnostics, err)
		st.Close()
		return
	}
	if p.backends != nil {
		cp.backends = p.backends
	}
	kind := "sqlite"
	if st.Shared() {
		kind = "postgresql"
	}
	tflog.Info(ctx, "configure: control plane open", map[string]any{
		"database_kind": kind, "database": redactedURL(dbURL), "owner": owner, "owner_is_role": st.Shared(),
		"data_dir": cp.plane.DataDir(), "backends": strings.Join(cp.backends.Types(), ","),
	})
	resp.ActionData = cp // provider_actions.go
	resp.ResourceData = cp
	resp.DataSourceData = cp
	resp.ListResourceData = cp // provider_list.go
}

// owner is who applies. On PostgreSQL it is the role the connection authenticates as
// (the database enforces it with row-level security), and a stated owner that differs
// is refused rather than ignored: it would say one name and write another. On SQLite it
// is the stated owner (the owner attribute, else TRUEFORGE_OWNER), else the OS user.
func (p *trueforgeProvider) owner(cfg providerModel, st *store.Store, diags *diag.Diagnostics) (string, bool) {
	claimed, from := cfg.Owner.ValueString(), "owner"
	if claimed == "" {
		claimed, from = p.env(envOwner), envOwner
	}
	if st.Shared() {
		if claimed != "" && claimed != st.Role() {
			diags.AddAttributeError(path.Root("owner"), "Owner Differs From Database Role",
				fmt.Sprintf("%s is %q, but this control plane is on PostgreSQL, where the owner is the database role the connection "+
					"authenticates as: %q. Remove owner from the provider block (and unset %s) to apply as %q, "+
					"or set database_url to connect as role %q.", from, claimed, st.Role(), envOwner, st.Role(), claimed))
			return "", false
		}
		return st.Role(), true
	}
	if claimed != "" {
		return claimed, true
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, true
	}
	diags.AddAttributeError(path.Root("owner"), "Missing Owner",
		"The provider could not tell who is applying. Set owner in the provider block or the "+envOwner+" environment variable.")
	return "", false
}

// addKeyError reports a secret key the control plane cannot use.
func addKeyError(diags *diag.Diagnostics, err error) {
	switch {
	case errors.Is(err, controlplane.ErrKeyRequired):
		diags.AddError("Missing Secret Key", err.Error()+".")
	case errors.Is(err, controlplane.ErrWrongKey):
		diags.AddError("Wrong Secret Key", err.Error()+".")
	default:
		diags.AddError("Secret Key Unavailable", "The control plane's secret key could not be loaded or checked: "+err.Error()+
			"\n\nFix the key (TRUEFORGE_SECRET_KEY, or the key file named above) or the database connection, then run the command again.")
	}
}

// maskSecrets masks, in every log line of ctx, the fields that would hold a credential
// should one ever be logged. Nothing logs them today; this keeps a future log line that
// passes one from printing it.
func maskSecrets(ctx context.Context) context.Context {
	return tflog.MaskFieldValuesWithFieldKeys(ctx, "api_key", "api_key_wo", "value", "value_wo", "secret_key", "password")
}

// redactedURL is a database URL fit for a log: a PostgreSQL URL without its password
// (and without a password query parameter), an SQLite path as it is.
func redactedURL(raw string) string {
	if raw == "" {
		return "(default SQLite path)"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Scheme == "file" || u.Scheme == "sqlite" {
		if err != nil && strings.Contains(raw, "://") {
			return "(unparsable URL)"
		}
		return raw
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// env reads a setting from the provider's environment.
func (p *trueforgeProvider) env(name string) string {
	if p.getenv != nil {
		return p.getenv(name)
	}
	return os.Getenv(name)
}

func (p *trueforgeProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewSandboxProviderResource,
		NewEnvironmentResource,
		NewSecretResource,
		NewVolumeResource,
		NewRegistryResource,
		NewAgentResource,
	}
}

func (p *trueforgeProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewSandboxProviderDataSource,
		NewEnvironmentDataSource,
		NewEnvironmentsDataSource,
		NewAgentDataSource,
		NewAgentsDataSource,
		NewSnapshotManifestDataSource,
		NewSandboxesDataSource, // what the harness creates: no managed resource, so no list resource (provider_list.go)
		NewSessionsDataSource,
		NewSnapshotsDataSource,
	}
}
