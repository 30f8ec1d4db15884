package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// testAccProviders starts the provider in-process; Terraform reattaches to it, so no
// registry is involved and the suite runs offline.
var testAccProviders = map[string]func() (tfprotov6.ProviderServer, error){
	"trueforge": providerserver.NewProtocol6WithError(New("test")()),
}

// controlPlaneFixture is one isolated control plane per test: its own database (and so
// its own snapshots and key file) in a temp dir.
type controlPlaneFixture struct {
	t     testing.TB
	dir   string
	dbURL string
	owner string
}

func newFixture(t testing.TB) *controlPlaneFixture {
	t.Helper()
	dir := t.TempDir()
	return &controlPlaneFixture{t: t, dir: dir, dbURL: filepath.Join(dir, "trueforge.db"), owner: "alice"}
}

// providerBlock configures the provider for this fixture as owner.
func (f *controlPlaneFixture) providerBlock(owner string) string {
	return fmt.Sprintf("provider \"trueforge\" {\n  database_url = %q\n  owner        = %q\n}\n", f.dbURL, owner)
}

// config joins the provider block (as the fixture's owner) and the sandbox provider with
// the resources under test.
func (f *controlPlaneFixture) config(body string) string {
	return f.providerBlock(f.owner) + localProviderHCL + body
}

const localProviderHCL = `
resource "trueforge_sandbox_provider" "local" {
  name = "local"
  type = "local"
}
`

// store opens the fixture's database, for out-of-band changes and assertions.
func (f *controlPlaneFixture) store() *store.Store {
	f.t.Helper()
	st, err := store.Open(context.Background(), f.dbURL)
	if err != nil {
		f.t.Fatalf("opening the control-plane store: %v", err)
	}
	f.t.Cleanup(func() { st.Close() })
	return st
}

// exec runs SQL written with ? placeholders against the fixture's database (a change made
// outside Terraform), on SQLite or PostgreSQL.
func (f *controlPlaneFixture) exec(query string, args ...any) {
	f.t.Helper()
	if _, err := f.store().Exec(f.t.Context(), query, args...); err != nil {
		f.t.Fatalf("out-of-band change %q: %v", query, err)
	}
}

func testAccPreCheck(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		t.Fatal("bubblewrap is required for the local backend's snapshot builds: run `make deps` (apt-get install bubblewrap)")
	}
}

// accTest runs steps as a parallel acceptance test of the provider (testAccProviders),
// the case nearly every acceptance test is.
func accTest(t *testing.T, steps ...resource.TestStep) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps:                    steps,
	})
}

// plannedAction is the plan check of a step whose plan must take action on addr.
func plannedAction(addr string, action plancheck.ResourceActionType) resource.ConfigPlanChecks {
	return resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, action)}}
}

// attrError matches an attribute's diagnostic and requires the attribute to be named
// twice: in the source line Terraform and OpenTofu quote for an attribute diagnostic
// ("31:   hosts       = [...]") and in the detail, given as a pattern whose spaces match
// any run of white space (the CLI wraps long details).
func attrError(attr, detail string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)\n\s*\d+:\s+` + regexp.QuoteMeta(attr) + `\s*=.*` + strings.ReplaceAll(detail, " ", `\s+`))
}

// terraformState is the state a legacy Check function receives.
type terraformState = terraform.State

// controlPlane opens the fixture's control plane as the provider would.
func (f *controlPlaneFixture) controlPlane() (*controlPlane, error) {
	return newControlPlane(f.store(), f.owner), nil
}

func mustProvider(t *testing.T, cp *controlPlane) store.SandboxProvider {
	t.Helper()
	p, err := cp.store.OnlySandboxProvider(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testDisappears applies cfg, deletes the object behind addr outside Terraform with
// deleteSQL, and expects the refreshed plan to create it again (the AWS "disappears"
// pattern).
func testDisappears(t *testing.T, f *controlPlaneFixture, cfg, addr, deleteSQL string, args ...any) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{{
			Config: cfg,
			Check: func(*terraformState) error {
				f.exec(deleteSQL, args...)
				return nil
			},
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
			},
		}},
	})
}

// buildCounter returns checks that assert how many snapshot builds the fixture's control
// plane started since the previous such check (since the test began, for the first).
func buildCounter(t *testing.T, f *controlPlaneFixture) func(want int64) resource.TestCheckFunc {
	before := int64(0)
	return func(want int64) resource.TestCheckFunc {
		return func(*terraformState) error {
			n, err := f.store().CountBuilds(t.Context())
			if err != nil {
				return err
			}
			if n-before != want {
				return fmt.Errorf("builds started = %d, want %d", n-before, want)
			}
			before = n
			return nil
		}
	}
}
