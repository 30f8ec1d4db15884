package provider

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// `terraform query` (Terraform 1.14 and later) against a populated control plane, driven
// through the CLI as a user runs it: each list resource with each filter lists exactly
// what it should, and `-generate-config-out` writes import blocks and configuration that
// plan as imports with no changes. scripts/test.sh runs these tests under Terraform
// 1.16, where they must pass; under Terraform 1.11 and OpenTofu they skip, saying why.

// queryPreCheck skips t unless TF_ACC_TERRAFORM_PATH has `terraform query` (queryCLI).
func queryPreCheck(t *testing.T) {
	t.Helper()
	testAccPreCheck(t)
	cli := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if os.Getenv("TF_ACC") == "" || cli == "" {
		t.Skip("acceptance test: set TF_ACC=1 and TF_ACC_TERRAFORM_PATH to run it")
	}
	cmd := exec.Command(cli, "version", "-json")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s version: %v", cli, err)
	}
	skipUnlessCLIHas(t, queryCLI, string(out))
}

// queryPlane is a populated control plane: two teams' configurations applied to it,
// and a runner that queries it as one of them.
type queryPlane struct {
	providers   providerFactories
	alice, bob  string // the owners (on PostgreSQL, the team roles)
	blockAs     func(owner string) string
	failEnv     func(name string) // marks an environment's snapshot Failed, outside Terraform
	aliceRunner *cliRunner
}

// aliceHCL is the first team's configuration: the sandbox provider, two environments
// (alpha has a secret), a volume and an agent in alpha.
const aliceHCL = localProviderHCL + `
resource "trueforge_environment" "alpha" {
  name             = "alpha"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "mkdir -p /opt/alpha"
  env              = { TEAM = "alice" }
}

resource "trueforge_environment" "beta" {
  name             = "beta"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "mkdir -p /opt/beta"
}

resource "trueforge_secret" "alpha_token" {
  environment = trueforge_environment.alpha.name
  env_name    = "TOKEN"
  hosts       = ["api.example.com"]
  value       = "alpha-secret-value"
}

resource "trueforge_volume" "alpha_data" {
  name             = "alpha-data"
  sandbox_provider = trueforge_sandbox_provider.local.name
  size             = 2
}

resource "trueforge_agent" "alpha_coder" {
  name    = "alpha-coder"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.alpha.name }
}
`

// bobHCL is the second team's configuration, on the first team's sandbox provider: an
// environment with a secret, a volume, an agent in it and one without a sandbox.
const bobHCL = `
resource "trueforge_environment" "gamma" {
  name             = "gamma"
  sandbox_provider = "local"
  build_script     = "mkdir -p /opt/gamma"
}

resource "trueforge_secret" "gamma_token" {
  environment = trueforge_environment.gamma.name
  env_name    = "TOKEN"
  hosts       = ["api.example.org"]
  value       = "gamma-secret-value"
}

resource "trueforge_volume" "bob_data" {
  name             = "bob-data"
  sandbox_provider = "local"
}

resource "trueforge_agent" "bob_coder" {
  name    = "bob-coder"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.gamma.name }
}

resource "trueforge_agent" "bob_chat" {
  name    = "bob-chat"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = false }
}
`

// populate applies both teams' configurations and marks beta's snapshot Failed.
func (q *queryPlane) populate(t *testing.T) {
	t.Helper()
	q.aliceRunner = newCLIRunner(t, q.providers)
	q.aliceRunner.write("main.tf", q.blockAs(q.alice)+aliceHCL)
	q.aliceRunner.init()
	q.aliceRunner.apply()
	bob := newCLIRunner(t, q.providers)
	bob.write("main.tf", q.blockAs(q.bob)+bobHCL)
	bob.init()
	bob.apply()
	// Destroyed at the end, bob's first (his agent and environment use alice's sandbox
	// provider): a volume of the local backend run as root is a mounted image, which the
	// test's temporary directory cannot be removed with.
	t.Cleanup(func() {
		bob.must("destroy", "-auto-approve", "-input=false", "-no-color")
		q.aliceRunner.must("destroy", "-auto-approve", "-input=false", "-no-color")
	})
	q.failEnv("beta")
}

// queryFound runs `terraform query -json` of queryHCL as owner and returns the display
// names each list block found, by the block's address (list.trueforge_x.name), in order.
func (q *queryPlane) queryFound(t *testing.T, owner, queryHCL string) map[string][]string {
	t.Helper()
	r := newCLIRunner(t, q.providers)
	r.write("main.tf", q.blockAs(owner))
	r.write("search.tfquery.hcl", queryHCL)
	r.init()
	res := r.run("query", "-json", "-no-color")
	if res.code != 0 {
		t.Fatalf("terraform query failed:\n%s", res)
	}
	found := map[string][]string{}
	for line := range strings.Lines(res.stdout) {
		var msg struct {
			Type  string `json:"type"`
			Level string `json:"@level"`
			Text  string `json:"@message"`
			Start *struct {
				Address string `json:"address"`
			} `json:"list_start"`
			Found *struct {
				Address     string            `json:"address"`
				DisplayName string            `json:"display_name"`
				Identity    map[string]string `json:"identity"`
			} `json:"list_resource_found"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("terraform query -json printed %q: %v", line, err)
		}
		switch {
		case msg.Level == "error" || msg.Level == "warn":
			t.Errorf("terraform query said (%s): %s", msg.Level, msg.Text)
		case msg.Start != nil:
			found[msg.Start.Address] = []string{}
		case msg.Found != nil:
			found[msg.Found.Address] = append(found[msg.Found.Address], msg.Found.DisplayName)
			if len(msg.Found.Identity) == 0 {
				t.Errorf("%s: %s was listed without an identity", msg.Found.Address, msg.Found.DisplayName)
			}
		}
	}
	return found
}

// expectFound compares what a query found with want, block by block.
func expectFound(t *testing.T, got, want map[string][]string) {
	t.Helper()
	for _, addr := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[addr]; !ok {
			t.Errorf("%s: the query ran no such list block (ran %v)", addr, slices.Sorted(maps.Keys(got)))
		} else if !slices.Equal(g, want[addr]) {
			t.Errorf("%s found %q, want %q", addr, g, want[addr])
		}
	}
}

// everyFilterHCL is a list block per kind and filter; nobody's are the filters that
// match nothing.
func everyFilterHCL(alice, bob string) string {
	blocks := []struct{ kind, name, config string }{
		{"environment", "all", ""},
		{"environment", "alice", fmt.Sprintf("owner = %q", alice)},
		{"environment", "bob", fmt.Sprintf("owner = %q", bob)},
		{"environment", "ready", `status = "Ready"`},
		{"environment", "failed", `status = "Failed"`},
		{"environment", "building", `status = "Building"`},
		{"environment", "local", `sandbox_provider = "local"`},
		{"environment", "nowhere", `sandbox_provider = "nowhere"`},
		{"environment", "alice_ready", fmt.Sprintf("owner = %q\n    status = \"Ready\"", alice)},
		{"agent", "all", ""},
		{"agent", "bob", fmt.Sprintf("owner = %q", bob)},
		{"agent", "in_gamma", `environment = "gamma"`},
		{"agent", "nobody", `owner = "nobody"`},
		{"secret", "all", ""},
		{"secret", "alpha", `environment = "alpha"`},
		{"secret", "beta", `environment = "beta"`},
		{"volume", "all", ""},
		{"volume", "bob", fmt.Sprintf("owner = %q", bob)},
		{"volume", "local", `sandbox_provider = "local"`},
		{"volume", "nowhere", `sandbox_provider = "nowhere"`},
	}
	var b strings.Builder
	for _, l := range blocks {
		fmt.Fprintf(&b, "list \"trueforge_%s\" %q {\n  provider = trueforge\n", l.kind, l.name)
		if l.config != "" {
			fmt.Fprintf(&b, "  config {\n    %s\n  }\n", l.config)
		}
		b.WriteString("}\n\n")
	}
	// Terraform's limit (default 100) stops the list where it says.
	b.WriteString("list \"trueforge_environment\" \"first\" {\n  provider = trueforge\n  limit    = 1\n}\n")
	return b.String()
}

// expectEveryFilter queries the populated plane with every filter, as owner (who sees
// secrets: the secrets owner may read).
func (q *queryPlane) expectEveryFilter(t *testing.T, owner string, secrets []string) {
	t.Helper()
	found := q.queryFound(t, owner, everyFilterHCL(q.alice, q.bob))
	none := []string{}
	expectFound(t, found, map[string][]string{
		"list.trueforge_environment.all":         {"alpha", "beta", "gamma"},
		"list.trueforge_environment.alice":       {"alpha", "beta"},
		"list.trueforge_environment.bob":         {"gamma"},
		"list.trueforge_environment.ready":       {"alpha", "gamma"},
		"list.trueforge_environment.failed":      {"beta"},
		"list.trueforge_environment.building":    none,
		"list.trueforge_environment.local":       {"alpha", "beta", "gamma"},
		"list.trueforge_environment.nowhere":     none,
		"list.trueforge_environment.alice_ready": {"alpha"},
		"list.trueforge_environment.first":       {"alpha"},
		"list.trueforge_agent.all":               {"alpha-coder", "bob-chat", "bob-coder"},
		"list.trueforge_agent.bob":               {"bob-chat", "bob-coder"},
		"list.trueforge_agent.in_gamma":          {"bob-coder"},
		"list.trueforge_agent.nobody":            none,
		"list.trueforge_secret.all":              secrets,
		"list.trueforge_secret.alpha":            filterPrefix(secrets, "alpha/"),
		"list.trueforge_secret.beta":             none,
		"list.trueforge_volume.all":              {"alpha-data", "bob-data"},
		"list.trueforge_volume.bob":              {"bob-data"},
		"list.trueforge_volume.local":            {"alpha-data", "bob-data"},
		"list.trueforge_volume.nowhere":          none,
	})
}

func filterPrefix(items []string, prefix string) []string {
	out := []string{}
	for _, s := range items {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// sqliteQueryPlane is a populated control plane in SQLite, owners alice and bob.
func sqliteQueryPlane(t *testing.T) *queryPlane {
	f := newFixture(t)
	q := &queryPlane{providers: freshProviders, alice: "alice", bob: "bob", blockAs: f.providerBlock}
	q.failEnv = func(name string) { failSnapshotOf(t, f, name) }
	q.populate(t)
	return q
}

// pgQueryPlane is the same on PostgreSQL, each team its own role under row-level security.
func pgQueryPlane(t *testing.T) *queryPlane {
	f := newPGFixture(t)
	q := &queryPlane{providers: f.providers, alice: f.alice, bob: f.bob, blockAs: f.providerBlock}
	q.failEnv = func(name string) { failSnapshotOf(t, f.controlPlaneFixture, name) }
	q.populate(t)
	return q
}

// failSnapshotOf marks environment name's snapshot Failed outside Terraform, as a build
// that failed leaves it.
func failSnapshotOf(t *testing.T, f *controlPlaneFixture, name string) {
	t.Helper()
	f.exec(`UPDATE snapshots SET status = 'Failed' WHERE id = (SELECT snapshot_id FROM environments WHERE name = ?)`, name)
}

// TestAccQueryEveryFilter_sqlite: every list resource with each of its filters. On one
// SQLite file every owner reads every secret's name (one operator: the file's).
func TestAccQueryEveryFilter_sqlite(t *testing.T) {
	queryPreCheck(t)
	t.Parallel()
	q := sqliteQueryPlane(t)
	q.expectEveryFilter(t, "alice", []string{"alpha/TOKEN", "gamma/TOKEN"})
}

// TestAccQueryEveryFilter_postgres: the same on PostgreSQL, where each team role finds
// every environment, agent and volume (published configuration) but only its own
// secrets: row-level security lets a team read the secrets of its own environments.
func TestAccQueryEveryFilter_postgres(t *testing.T) {
	queryPreCheck(t)
	t.Parallel()
	q := pgQueryPlane(t)
	q.expectEveryFilter(t, q.alice, []string{"alpha/TOKEN"})
	q.expectEveryFilter(t, q.bob, []string{"gamma/TOKEN"})
}

// generateHCL lists what alice owns, with the resource objects, for
// -generate-config-out: her Ready environments (beta's build failed, so its import
// would plan the rebuild that retries it), agents, volumes and alpha's secret.
func generateHCL(alice string) string {
	return fmt.Sprintf(`
list "trueforge_environment" "mine" {
  provider = trueforge
  config {
    owner  = %[1]q
    status = "Ready"
  }
}

list "trueforge_agent" "mine" {
  provider = trueforge
  config {
    owner = %[1]q
  }
}

list "trueforge_volume" "mine" {
  provider = trueforge
  config {
    owner = %[1]q
  }
}

list "trueforge_secret" "alpha" {
  provider = trueforge
  config {
    environment = "alpha"
  }
}
`, alice)
}

// expectGeneratedImports runs `terraform query -generate-config-out` as alice in a new
// directory (no state), then plans what it wrote: every listed object must plan as an
// import with no changes. A secret's value is never listed, so its generated block has
// none (value and value_wo are null): the user gives it one, as here, and its import
// plans the one in-place update that seals that value again (the import of a secret by
// identity does the same: TestAccIdentity_secret), changing nothing else.
func (q *queryPlane) expectGeneratedImports(t *testing.T) {
	t.Helper()
	r := newCLIRunner(t, q.providers)
	r.write("main.tf", q.blockAs(q.alice))
	r.write("search.tfquery.hcl", generateHCL(q.alice))
	r.init()
	r.must("query", "-generate-config-out=generated.tf", "-no-color")
	gen := r.read("generated.tf")
	for _, want := range []string{
		`to       = trueforge_environment.mine_0`, `name = "alpha"`, `name = "alpha-coder"`, `name = "alpha-data"`,
		"value            = null # sensitive", "value_wo         = null # sensitive",
	} {
		if !strings.Contains(gen, want) {
			t.Errorf("generated.tf has no %q", want)
		}
	}
	if strings.Contains(gen, "alpha-secret-value") || strings.Contains(gen, "gamma") || strings.Contains(gen, "bob") || strings.Contains(gen, "beta") {
		t.Errorf("generated.tf holds a secret's value, bob's objects or the failed environment:\n%s", gen)
	}
	if t.Failed() {
		t.Fatalf("generated.tf:\n%s", gen)
	}
	gen = strings.Replace(gen, "value_wo         = null # sensitive", `value_wo         = "alpha-secret-value"`, 1)
	gen = strings.Replace(gen, "value_wo_version = null", "value_wo_version = 1", 1)
	r.write("generated.tf", gen)
	r.must("plan", "-out=import.tfplan", "-input=false", "-no-color")
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions   []string        `json:"actions"`
				Importing json.RawMessage `json:"importing"`
				Before    map[string]any  `json:"before"`
				After     map[string]any  `json:"after"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(r.must("show", "-json", "import.tfplan")), &plan); err != nil {
		t.Fatal(err)
	}
	var imported []string
	for _, rc := range plan.ResourceChanges {
		imported = append(imported, rc.Address)
		want := []string{"no-op"}
		if strings.HasPrefix(rc.Address, "trueforge_secret.") {
			want = []string{"update"}
			var changed []string
			for k, v := range rc.Change.After {
				if fmt.Sprint(v) != fmt.Sprint(rc.Change.Before[k]) {
					changed = append(changed, k)
				}
			}
			if !slices.Equal(changed, []string{"value_wo_version"}) {
				t.Errorf("%s: the import changes %v, want only value_wo_version (the value sealed again)", rc.Address, changed)
			}
		}
		if !slices.Equal(rc.Change.Actions, want) || len(rc.Change.Importing) == 0 {
			t.Errorf("%s: planned %v (importing: %s), want an import and %v", rc.Address, rc.Change.Actions, rc.Change.Importing, want)
		}
	}
	slices.Sort(imported)
	if want := []string{"trueforge_agent.mine_0", "trueforge_environment.mine_0",
		"trueforge_secret.alpha_0", "trueforge_volume.mine_0"}; !slices.Equal(imported, want) {
		t.Errorf("the generated configuration planned %v, want %v", imported, want)
	}
}

func TestAccQueryGenerateConfig_sqlite(t *testing.T) {
	queryPreCheck(t)
	t.Parallel()
	sqliteQueryPlane(t).expectGeneratedImports(t)
}

func TestAccQueryGenerateConfig_postgres(t *testing.T) {
	queryPreCheck(t)
	t.Parallel()
	pgQueryPlane(t).expectGeneratedImports(t)
}
