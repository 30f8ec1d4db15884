package provider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// pgFixture is one control plane on PostgreSQL per test, set up as the guide says: a
// fresh database migrated by its owner (the cluster's superuser), two team roles (alice
// and bob, members of trueforge_team) and a harness role (a member of trueforge_harness)
// created with store.ApplyRoles, one secret key shared by everyone who uses it, and a
// data directory of its own for the local backend's files.
//
// The provider reads the key and the data directory from its environment, which tests
// that run in parallel cannot set; so the fixture serves its own provider, whose
// environment carries them: use f.providers (not testAccProviders) as a TestCase's
// ProtoV6ProviderFactories. Role names carry a random suffix (roles belong to the whole
// cluster): write f.alice, never "alice".
//
// It embeds a controlPlaneFixture whose database URL is the superuser's, so store(),
// exec() and helpers such as buildCounter and testDisappears see (and change) every row,
// past row-level security, as an out-of-band change would.
type pgFixture struct {
	*controlPlaneFixture
	c *pgtest.Cluster
	// db is the database's name.
	db string
	// alice and bob are team roles; harness is a harness role.
	alice, bob, harness string
	// key is the control plane's TRUEFORGE_SECRET_KEY.
	key string
	// dataDir is the TRUEFORGE_DATA_DIR of the fixture's provider.
	dataDir string
	// providers serve the provider with the fixture's environment (env).
	providers map[string]func() (tfprotov6.ProviderServer, error)
}

// newPGFixture sets up a PostgreSQL control plane for t (skipped, or failed under
// TRUEFORGE_REQUIRE_POSTGRES=1, when PostgreSQL cannot run).
func newPGFixture(t testing.TB) *pgFixture {
	t.Helper()
	c := pgtest.Get(t)
	admin := c.Database(t)
	f := &pgFixture{
		controlPlaneFixture: &controlPlaneFixture{t: t, dir: t.TempDir(), dbURL: admin, owner: pgtest.Superuser},
		c:                   c,
		db:                  pgtest.Name(admin),
		key:                 newSecretKey(t),
	}
	f.dataDir = f.dir
	owner, err := store.Open(context.Background(), admin) // migrates, as `trueforge-harness db migrate` does
	if err != nil {
		t.Fatalf("migrating the control plane as its owner: %v", err)
	}
	defer owner.Close()
	f.alice, f.bob, f.harness = c.Role(t, "alice"), c.Role(t, "bob"), c.Role(t, "harness")
	for name, kind := range map[string]store.RoleKind{f.alice: store.TeamRole, f.bob: store.TeamRole, f.harness: store.HarnessRole} {
		if err := owner.ApplyRoles(context.Background(), kind, name); err != nil {
			t.Fatalf("setting up %s role %s: %v", kind, name, err)
		}
	}
	f.providers = f.providersWith(nil)
	return f
}

// newSecretKey returns a fresh TRUEFORGE_SECRET_KEY value.
func newSecretKey(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// url is the database URL with which role connects.
func (f *pgFixture) url(role string) string { return f.c.URL(f.db, role) }

// env is what the fixture's provider finds in its environment on top of the test
// process's: the secret key and the data directory.
func (f *pgFixture) env() map[string]string {
	return map[string]string{secretbox.KeyEnv: f.key, store.DataDirEnv: f.dataDir}
}

// getenv reads the fixture's environment, then the process's.
func (f *pgFixture) getenv(name string) string {
	if v, ok := f.env()[name]; ok {
		return v
	}
	return os.Getenv(name)
}

// providersWith serves the provider with the fixture's environment changed by override
// (a value of "" unsets a variable): for a machine with another key, or none.
func (f *pgFixture) providersWith(override map[string]string) map[string]func() (tfprotov6.ProviderServer, error) {
	env := f.env()
	for k, v := range override {
		env[k] = v
	}
	getenv := func(name string) string {
		if v, ok := env[name]; ok {
			return v
		}
		return os.Getenv(name)
	}
	return map[string]func() (tfprotov6.ProviderServer, error){
		"trueforge": func() (tfprotov6.ProviderServer, error) {
			return providerserver.NewProtocol6WithError(&trueforgeProvider{version: "test", getenv: getenv})()
		},
	}
}

// providerBlock configures the provider to connect as role. It sets no owner: on
// PostgreSQL the owner is the role.
func (f *pgFixture) providerBlock(role string) string {
	return fmt.Sprintf("provider \"trueforge\" {\n  database_url = %q\n}\n", f.url(role))
}

// config joins alice's provider block and the sandbox provider with the resources
// under test.
func (f *pgFixture) config(body string) string { return f.configAs(f.alice, body) }

// configAs is config as role.
func (f *pgFixture) configAs(role, body string) string {
	return f.providerBlock(role) + localProviderHCL + body
}

// storeAs opens the control plane as role, for what a test does as that role outside
// Terraform (a harness reading agents, hand-written SQL through Store.Exec).
func (f *pgFixture) storeAs(role string) *store.Store {
	f.t.Helper()
	st, err := store.Open(context.Background(), f.url(role))
	if err != nil {
		f.t.Fatalf("opening the control plane as %s: %v", role, err)
	}
	f.t.Cleanup(func() { st.Close() })
	return st
}

// planeAs is the control plane as role, with the fixture's key and data directory: what
// a harness on the fixture's machine opens.
func (f *pgFixture) planeAs(role string) *controlplane.Plane {
	p := controlplane.New(f.storeAs(role))
	p.Getenv = f.getenv
	return p
}
