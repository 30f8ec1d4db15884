package provider

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The CI drift check of docs/guides/ci.md, end to end: one machine applies; a CI runner
// that starts from nothing (a new working directory and HOME holding only the
// configuration as checked out and the state file, the control plane named by the
// provider block's database_url or TRUEFORGE_DATABASE_URL) plans against it with
// `plan -detailed-exitcode` and scripts/ci-drift.sh. It must plan empty (exit 0) while
// nobody changed anything, and exit 2 naming the resource and the attribute after a row
// was changed with SQL or by a colleague's apply from another working directory.

// ciConfig is the configuration under check: a sandbox provider, an environment and an
// agent on it, after providerBlock, which says at most where the control plane is.
func ciConfig(providerBlock, instructions string) string {
	return providerBlock + fmt.Sprintf(`
resource "trueforge_sandbox_provider" "local" {
  name = "local"
  type = "local"
}

resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "echo ci > /usr/local/share/marker"
  env              = { MODE = "ci" }
}

resource "trueforge_agent" "support" {
  name         = "support"
  model        = { provider = "scripted", script = "[]" }
  instructions = %q
  sandbox      = { enabled = true, environment = trueforge_environment.py.name }
}
`, instructions)
}

// driftScript is scripts/ci-drift.sh of this checkout.
func driftScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", "ci-drift.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// freshRunner is a CI runner that holds the configuration and the state the applier
// left, nothing else.
func freshRunner(t *testing.T, providers providerFactories, config, state string) *cliRunner {
	t.Helper()
	r := newCLIRunner(t, providers)
	r.write("main.tf", config)
	r.write("terraform.tfstate", state)
	if got := r.files(); !slices.Equal(got, []string{"main.tf", "terraform.tfstate"}) {
		t.Fatalf("a fresh runner holds %v, want only main.tf and terraform.tfstate", got)
	}
	r.init()
	return r
}

// expectNoDrift checks that a fresh runner plans empty, with the CLI and with the script.
func expectNoDrift(t *testing.T, providers providerFactories, config, state string) {
	t.Helper()
	r := freshRunner(t, providers, config, state)
	if res := r.plan(); res.code != 0 || !strings.Contains(res.stdout, "No changes.") {
		t.Fatalf("a fresh runner must plan empty (exit 0):\n%s", res)
	}
	if res := r.runProgram(driftScript(t)); res.code != 0 || !strings.Contains(res.stdout, "drift: none") {
		t.Fatalf("ci-drift.sh must report no drift:\n%s", res)
	}
}

// expectDrift checks that a fresh runner's plan exits 2 and shows every pattern of
// shown (the CLI's own rendering of the drifted attribute), and that ci-drift.sh exits 2
// and lists exactly listed: resources and attribute names, never values.
func expectDrift(t *testing.T, providers providerFactories, config, state string, shown []*regexp.Regexp, listed []string) {
	t.Helper()
	r := freshRunner(t, providers, config, state)
	res := r.plan()
	if res.code != 2 {
		t.Fatalf("a fresh runner must see the drift (exit 2):\n%s", res)
	}
	for _, re := range shown {
		if !re.MatchString(res.stdout) {
			t.Errorf("the plan does not show %s:\n%s", re, res.stdout)
		}
	}
	res = r.runProgram(driftScript(t))
	if res.code != 2 {
		t.Fatalf("ci-drift.sh must exit 2 on drift:\n%s", res)
	}
	// The script's list follows the plan the CLI printed (whose values the CLI redacts
	// where they are sensitive).
	_, list, ok := strings.Cut(res.stdout, "drift: the control plane does not match the configuration:\n")
	if !ok {
		t.Fatalf("ci-drift.sh printed no list of drifted resources:\n%s", res)
	}
	if got, want := strings.Split(strings.TrimSpace(list), "\n"), listed; !slices.Equal(got, want) {
		t.Errorf("ci-drift.sh listed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// testDriftFromFreshRunner runs the drift check against the control plane that
// providerBlock names: the applier and the colleague are served providers, the fresh
// runners fresh; st is a connection to it for the out-of-band change.
func testDriftFromFreshRunner(t *testing.T, providers, fresh providerFactories, providerBlock string, st *store.Store) {
	testAccPreCheck(t)
	config := ciConfig(providerBlock, "Answer support questions.")

	applier := newCLIRunner(t, providers)
	applier.write("main.tf", config)
	applier.init()
	applier.apply()
	state := applier.read("terraform.tfstate")

	t.Log("a fresh runner plans empty after the apply")
	expectNoDrift(t, fresh, config, state)

	t.Log("a row changed with SQL is drift")
	if _, err := st.Exec(t.Context(), `UPDATE environments SET env = ? WHERE name = ?`, `{"MODE":"hotfix"}`, "py"); err != nil {
		t.Fatal(err)
	}
	expectDrift(t, fresh, config, state,
		[]*regexp.Regexp{
			regexp.MustCompile(`(?s)# trueforge_environment\.py will be updated in-place.*~ "MODE"\s+= "hotfix" -> "ci"`),
		},
		[]string{
			"trueforge_environment.py: changed outside Terraform (env)",
			"trueforge_environment.py: plan: update (env)",
		})

	t.Log("the applier puts it back; a fresh runner plans empty again")
	applier.apply()
	state = applier.read("terraform.tfstate")
	expectNoDrift(t, fresh, config, state)

	t.Log("a colleague imports the agent into another configuration and changes it")
	colleague := newCLIRunner(t, providers)
	colleague.write("main.tf", providerBlock+`
resource "trueforge_agent" "copy" {
  name         = "support"
  model        = { provider = "scripted", script = "[]" }
  instructions = "Colleague's instructions."
  sandbox      = { enabled = true, environment = "py" }
}
`)
	colleague.init()
	colleague.must("import", "-input=false", "-no-color", "trueforge_agent.copy", "support")
	colleague.apply()
	expectDrift(t, fresh, config, state,
		[]*regexp.Regexp{
			regexp.MustCompile(`(?s)# trueforge_agent\.support will be updated in-place.*~ instructions\s+= "Colleague's instructions\." -> "Answer support questions\."`),
		},
		[]string{
			"trueforge_agent.support: changed outside Terraform (instructions)",
			"trueforge_agent.support: plan: update (instructions)",
		})

	t.Log("a row deleted with SQL is drift too: the plan creates it again")
	if _, err := st.Exec(t.Context(), `DELETE FROM agents WHERE name = ?`, "support"); err != nil {
		t.Fatal(err)
	}
	expectDrift(t, fresh, config, state,
		[]*regexp.Regexp{regexp.MustCompile(`# trueforge_agent\.support will be created`)},
		[]string{
			"trueforge_agent.support: changed outside Terraform (gone)",
			"trueforge_agent.support: plan: create (missing)",
		})
}

func TestAccDriftFromFreshRunner_sqlite(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "trueforge.db")
	st, err := store.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	testDriftFromFreshRunner(t, freshProviders, freshProviders, fmt.Sprintf("provider \"trueforge\" {\n  database_url = %q\n}\n", dbPath), st)
}

// On PostgreSQL the runners connect as the team role alice (the owner of what they
// apply), as docs/guides/ci.md sets a pipeline up: the configuration has no provider
// block at all, and the database URL and the secret key are the runner's
// TRUEFORGE_DATABASE_URL and TRUEFORGE_SECRET_KEY (the provider's environment). A fresh
// runner's data directory is its own and empty, as under a new HOME: the local
// backend's snapshot files are where the applier built them, which the database records.
// The SQL change is made as the database's superuser, past row-level security.
func TestAccDriftFromFreshRunner_postgres(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	providers := f.providersWith(map[string]string{envDatabaseURL: f.url(f.alice)})
	fresh := f.providersWith(map[string]string{envDatabaseURL: f.url(f.alice), store.DataDirEnv: t.TempDir()})
	testDriftFromFreshRunner(t, providers, fresh, "", f.store())
}

// builderUnavailable is a backend whose snapshot builder cannot be opened on this
// machine, as the local backend cannot on a runner as root without subordinate ids.
type builderUnavailable struct{ sandbox.Backend }

func (builderUnavailable) Builder(context.Context, sandbox.ProviderConfig) (sandbox.SnapshotBuilder, error) {
	return nil, errors.New("local: this process runs as root and has no subordinate ids (simulated)")
}

// A runner that cannot open the sandbox backend cannot tell whether a snapshot needs a
// rebuild: its plan fails, naming the environment and why, instead of reporting drift
// (a rebuild) that is not there.
func TestAccDriftFromFreshRunner_backendUnavailable(t *testing.T) {
	t.Parallel()
	testAccPreCheck(t)
	dbPath := filepath.Join(t.TempDir(), "trueforge.db")
	config := ciConfig(fmt.Sprintf("provider \"trueforge\" {\n  database_url = %q\n}\n", dbPath), "Answer support questions.")
	applier := newCLIRunner(t, freshProviders)
	applier.write("main.tf", config)
	applier.init()
	applier.apply()

	reg := backends.Default()
	reg[local.Type] = builderUnavailable{reg[local.Type]}
	broken := providerFactories{"trueforge": providerserver.NewProtocol6WithError(&trueforgeProvider{version: "test", backends: reg})}
	r := freshRunner(t, broken, config, applier.read("terraform.tfstate"))
	res := r.plan()
	if res.code != 1 || !expectError(`Error Reading Environment Snapshot .* Environment "py": its sandbox provider "local" could not be opened on this machine, so the plan cannot tell .* has no subordinate ids`).MatchString(res.stderr) {
		t.Fatalf("a runner that cannot open the backend must fail the plan, saying why:\n%s", res)
	}
	if res := r.runProgram(driftScript(t)); res.code != 1 || !strings.Contains(res.stderr, "drift: the plan failed") {
		t.Fatalf("ci-drift.sh must fail (exit 1), not report drift:\n%s", res)
	}
}
