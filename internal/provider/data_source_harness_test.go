package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// What the harness creates has no managed resource, so no list resource (provider_list.go
// says where Terraform and the framework require one): trueforge_sessions,
// trueforge_sandboxes and trueforge_snapshots list it, on every CLI.

// harnessRecords stores what a harness would have recorded, outside Terraform: three
// sessions (two of carol's with agent "coder", one of dave's with "chat") and the
// sandboxes of two of them, one running in py, one stopped.
func harnessRecords(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []store.Session{
		{ID: "s1", Agent: "coder", Owner: "carol"},
		{ID: "s2", Agent: "coder", Owner: "carol"},
		{ID: "s3", Agent: "chat", Owner: "dave"},
	} {
		if err := st.CreateSession(ctx, s); err != nil {
			t.Fatalf("recording session %s: %v", s.ID, err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times: the list is newest first
	}
	py, err := st.GetEnvironment(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, b := range []store.SessionSandbox{
		{SessionID: "s1", Provider: "local", ProviderType: "local", SandboxID: "box-1", Environment: "py", SnapshotID: py.SnapshotID,
			State: store.SandboxStateRunning, Generation: 1, CreatedAt: now, LastUsedAt: now, StateAt: now},
		{SessionID: "s3", Provider: "local", ProviderType: "local", SandboxID: "box-3", Environment: "py", SnapshotID: py.SnapshotID,
			State: store.SandboxStateStopped, Generation: 1, CreatedAt: now.Add(time.Second), LastUsedAt: now, StateAt: now},
	} {
		if err := st.PutSessionSandbox(ctx, b); err != nil {
			t.Fatalf("recording the sandbox of session %s: %v", b.SessionID, err)
		}
	}
}

// listed checks a data source's list attribute (ids, names) against want, in order.
func listedExactly(addr, attr string, want ...string) statecheck.StateCheck {
	checks := make([]knownvalue.Check, len(want))
	for i, w := range want {
		checks[i] = knownvalue.StringExact(w)
	}
	return statecheck.ExpectKnownValue(addr, tfjsonpath.New(attr), knownvalue.ListExact(checks))
}

// sandboxIDs checks which sandboxes trueforge_sandboxes.name listed, in order.
func sandboxIDs(name string, want ...string) statecheck.StateCheck {
	checks := make([]knownvalue.Check, len(want))
	for i, w := range want {
		checks[i] = knownvalue.ObjectPartial(map[string]knownvalue.Check{"sandbox_id": knownvalue.StringExact(w)})
	}
	return statecheck.ExpectKnownValue("data.trueforge_sandboxes."+name, tfjsonpath.New("sandboxes"), knownvalue.ListExact(checks))
}

const harnessListsHCL = `
data "trueforge_sessions" "all" {}
data "trueforge_sessions" "carol" {
  owner = "carol"
}
data "trueforge_sessions" "chat" {
  agent = "chat"
}
data "trueforge_sessions" "nobody" {
  owner = "nobody"
}
data "trueforge_sandboxes" "all" {}
data "trueforge_sandboxes" "running" {
  state = "running"
}
data "trueforge_sandboxes" "coder" {
  agent = "coder"
}
data "trueforge_sandboxes" "dave_in_py" {
  owner       = "dave"
  environment = "py"
}
data "trueforge_sandboxes" "archived" {
  state = "archived"
}
`

// Sessions and sandboxes with each filter, on SQLite (one operator reads all of them).
func TestAccDataSourceSessionsAndSandboxes(t *testing.T) {
	f := newFixture(t)
	base := f.config(envHCL("", ""))
	accTest(t,
		resource.TestStep{Config: base},
		resource.TestStep{
			Config:      base + "data \"trueforge_sandboxes\" \"bad\" {\n  state = \"Running\"\n}\n",
			ExpectError: attrError("state", `value must be one of`),
		},
		resource.TestStep{
			PreConfig: func() { harnessRecords(t, f.store()) },
			Config:    base + harnessListsHCL,
			ConfigStateChecks: []statecheck.StateCheck{
				listedExactly("data.trueforge_sessions.all", "ids", "s3", "s2", "s1"),
				listedExactly("data.trueforge_sessions.carol", "ids", "s2", "s1"),
				listedExactly("data.trueforge_sessions.chat", "ids", "s3"),
				listedExactly("data.trueforge_sessions.nobody", "ids"),
				statecheck.ExpectKnownValue("data.trueforge_sessions.chat", tfjsonpath.New("sessions").AtSliceIndex(0), knownvalue.ObjectPartial(
					map[string]knownvalue.Check{"agent": knownvalue.StringExact("chat"), "owner": knownvalue.StringExact("dave"),
						"environment": knownvalue.Null(), "last_activity": knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT`))})),
				sandboxIDs("all", "box-1", "box-3"),
				sandboxIDs("running", "box-1"),
				sandboxIDs("coder", "box-1"),
				sandboxIDs("dave_in_py", "box-3"),
				sandboxIDs("archived"),
				statecheck.ExpectKnownValue("data.trueforge_sandboxes.running", tfjsonpath.New("sandboxes").AtSliceIndex(0), knownvalue.ObjectPartial(
					map[string]knownvalue.Check{"session_id": knownvalue.StringExact("s1"), "agent": knownvalue.StringExact("coder"),
						"owner": knownvalue.StringExact("carol"), "state": knownvalue.StringExact("running"),
						"environment": knownvalue.StringExact("py"), "sandbox_provider": knownvalue.StringExact("local"),
						"idle_since": knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT`))})),
			},
		},
	)
}

// coderHCL is agent "coder" on environment py.
const coderHCL = `
resource "trueforge_agent" "coder" {
  name    = "coder"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name }
}
`

// sessionsAndSandboxesAs lists every session and every sandbox as role, in a directory
// of its own, and returns what it listed: {"sessions":[ids],"sandboxes":[sandbox ids]}.
func sessionsAndSandboxesAs(t *testing.T, f *pgFixture, role string) string {
	t.Helper()
	r := newCLIRunner(t, f.providers)
	r.write("main.tf", f.providerBlock(role)+`
data "trueforge_sessions" "all" {}
data "trueforge_sandboxes" "all" {}
output "listed" {
  value = {
    sessions  = data.trueforge_sessions.all.ids
    sandboxes = [for b in data.trueforge_sandboxes.all.sandboxes : b.sandbox_id]
  }
}
`)
	r.init()
	r.apply()
	return strings.Join(strings.Fields(r.must("output", "-json", "-no-color", "listed")), "")
}

// On PostgreSQL row-level security decides what each role lists: a team role the
// sessions of the agents it owns and their sandboxes (alice's coder: s1 and s2, box-1;
// bob's chat: s3, box-3), a harness role all of them.
func TestAccDataSourceSessionsAndSandboxes_postgres(t *testing.T) {
	f := newPGFixture(t)
	base := f.config(envHCL("", "") + coderHCL)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: base},
			{
				// Bob's agent chat, on alice's py (it has no secrets to share), and what a
				// harness recorded; then the harness role and bob read them in
				// directories of their own (neither owns the resources above).
				PreConfig: func() {
					ctx := context.Background()
					if err := f.storeAs(f.bob).CreateAgent(ctx, store.Agent{ID: "chat-id", Name: "chat", Owner: f.bob, Environment: "py", Spec: []byte("{}")}); err != nil {
						t.Fatalf("bob's agent: %v", err)
					}
					harnessRecords(t, f.storeAs(f.harness))
					for role, want := range map[string]string{
						f.harness: `{"sandboxes":["box-1","box-3"],"sessions":["s3","s2","s1"]}`,
						f.bob:     `{"sandboxes":["box-3"],"sessions":["s3"]}`,
					} {
						if got := sessionsAndSandboxesAs(t, f, role); got != want {
							t.Errorf("as %s: %s, want %s", role, got, want)
						}
					}
				},
				Config: base + harnessListsHCL,
				ConfigStateChecks: []statecheck.StateCheck{
					listedExactly("data.trueforge_sessions.all", "ids", "s2", "s1"),
					listedExactly("data.trueforge_sessions.carol", "ids", "s2", "s1"),
					listedExactly("data.trueforge_sessions.chat", "ids"),
					sandboxIDs("all", "box-1"),
					sandboxIDs("running", "box-1"),
					sandboxIDs("coder", "box-1"),
					sandboxIDs("dave_in_py"),
				},
			},
			{
				// Bob's agent goes before alice's py can.
				PreConfig: func() {
					if err := f.storeAs(f.bob).DeleteAgent(context.Background(), "chat"); err != nil {
						t.Fatalf("deleting bob's agent: %v", err)
					}
				},
				Config: base,
			},
		},
	})
}

// The actions that run sessions or stop sandboxes change what the harness records,
// which a team role only reads: as one, they are refused up front, saying why and what
// to do instead, even on sessions of the role's own agent.
func TestAccActionsRefuseTeamRole_postgres(t *testing.T) {
	f := newPGFixture(t)
	base := f.config(envHCL("", "") + coderHCL)
	trigger := func(action, config string) string {
		return base + fmt.Sprintf(`
action %[1]q "x" {
  config {
    %[2]s
  }
}

resource "terraform_data" "go" {
  input      = %[1]q
  depends_on = [trueforge_agent.coder]
  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.%[1]s.x]
    }
  }
}
`, action, config)
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		TerraformVersionChecks:   actionVersionChecks,
		Steps: []resource.TestStep{
			{Config: base},
			{
				PreConfig:   func() { harnessRecords(t, f.storeAs(f.harness)) },
				Config:      trigger("trueforge_sandboxes_stop", `agent = "coder"`),
				ExpectError: regexp.MustCompile(fmt.Sprintf(`Sandboxes Not Stoppable By This Role(.|\n)*Role "%s" is a team role(.|\n)*ask\s+the\s+operator\s+of\s+the\s+harness`, f.alice)),
			},
			{
				Config:      trigger("trueforge_agent_check", `agent = "coder"`+"\n    check = jsonencode({name = \"c\", steps = [{name = \"s\", message = \"hi\", turns = [{text = \"hello\"}], expect = {no_sandbox = true}}]})"),
				ExpectError: regexp.MustCompile(`Agent Check Not Runnable By This Role(.|\n)*may not change them(.|\n)*trueforge-harness\s+check\s+coder\s+FILE`),
			},
			{
				// Nothing was stopped: box-1 of coder's session s1 still runs.
				Config: base,
				Check: func(*terraformState) error {
					b, err := f.storeAs(f.harness).GetSessionSandbox(context.Background(), "s1")
					if err != nil {
						return err
					}
					if b.State != store.SandboxStateRunning {
						return fmt.Errorf("box-1 is %s after a refused stop; want running", b.State)
					}
					return nil
				},
			},
		},
	})
}

// Snapshots with each filter: an advisory query finds the snapshot whose manifest holds
// the pinned package, and an orphan row (what the next collection removes) is the one
// nothing references.
func TestAccDataSourceSnapshots(t *testing.T) {
	f := newFixture(t)
	testSnapshotsDataSource(t, f, testAccProviders, f.config)
}

// On PostgreSQL snapshots, their manifests and the package index are shared: a team role,
// under row-level security, lists them all and queries the index.
func TestAccDataSourceSnapshots_postgres(t *testing.T) {
	f := newPGFixture(t)
	testSnapshotsDataSource(t, f.controlPlaneFixture, f.providers, f.config)
}

// testSnapshotsDataSource applies and lists with configurations built with config, on
// the control plane of f that providers serve.
func testSnapshotsDataSource(t *testing.T, f *controlPlaneFixture, providers providerFactories, config func(string) string) {
	base := config(`
resource "trueforge_environment" "pinned" {
  name             = "pinned"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = <<-EOT
    d=/usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info
    mkdir -p $d
    printf 'Metadata-Version: 2.1\nName: pinned_pkg\nVersion: 1.2.3\n' > $d/METADATA
  EOT
}
`)
	lists := base + `
data "trueforge_snapshots" "all" {
  depends_on = [trueforge_environment.pinned]
}
data "trueforge_snapshots" "affected" {
  affected_by = "pypi:pinned-pkg@<2"
  depends_on  = [trueforge_environment.pinned]
}
data "trueforge_snapshots" "fixed" {
  affected_by = "pypi:pinned-pkg@>=2"
  depends_on  = [trueforge_environment.pinned]
}
data "trueforge_snapshots" "unreferenced" {
  referenced = false
  depends_on = [trueforge_environment.pinned]
}
data "trueforge_snapshots" "nowhere" {
  sandbox_provider = "nowhere"
}
`
	const affected = "data.trueforge_snapshots.affected"
	resource.ParallelTest(t, resource.TestCase{PreCheck: func() { testAccPreCheck(t) }, ProtoV6ProviderFactories: providers, Steps: []resource.TestStep{
		{Config: base},
		{
			Config:      base + "data \"trueforge_snapshots\" \"bad\" {\n  affected_by = \"pypi:\"\n}\n",
			ExpectError: regexp.MustCompile(`Invalid Advisory Query(.|\n)*names\s+no\s+package`),
		},
		{
			PreConfig: func() {
				f.exec(`INSERT INTO snapshots(id, provider, build_hash, spec, status, created_at, updated_at) VALUES ('snap-orphan', 'local', 'h', '{}', 'Ready', 0, 0)`)
			},
			Config: lists,
			ConfigStateChecks: []statecheck.StateCheck{
				listedExactly("data.trueforge_snapshots.unreferenced", "ids", "snap-orphan"),
				listedExactly("data.trueforge_snapshots.fixed", "ids"),
				listedExactly("data.trueforge_snapshots.nowhere", "ids"),
				statecheck.ExpectKnownValue(affected, tfjsonpath.New("snapshots"), knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectPartial(
					map[string]knownvalue.Check{
						"referenced":       knownvalue.Bool(true),
						"environments":     knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("pinned")}),
						"manifest_digest":  knownvalue.StringRegexp(regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)),
						"status":           knownvalue.StringExact("Ready"),
						"sandbox_provider": knownvalue.StringExact("local"),
					})})),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttrPair(affected, "ids.0", "trueforge_environment.pinned", "snapshot_id"),
				// The release snapshot, default's build, pinned's build and the orphan.
				resource.TestCheckResourceAttr("data.trueforge_snapshots.all", "ids.#", "4"),
			),
		},
	}})
}
