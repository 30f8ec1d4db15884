package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// versionsPlane is what the versions tests need of a control plane: its configuration,
// its store and the provider that serves it (SQLite or PostgreSQL).
type versionsPlane struct {
	config    func(body string) string
	store     func() *store.Store
	providers map[string]func() (tfprotov6.ProviderServer, error)
}

func TestAccEnvironmentVersions_sqlite(t *testing.T) {
	f := newFixture(t)
	testEnvironmentVersions(t, versionsPlane{config: f.config, store: f.store, providers: testAccProviders})
}

func TestAccEnvironmentVersions_postgres(t *testing.T) {
	f := newPGFixture(t)
	testEnvironmentVersions(t, versionsPlane{config: f.config, store: f.store, providers: f.providers})
}

// versionsHCL is environment py at build script v, keeping 2 previous versions, the
// data source reading it, and agents: "pinned" on version pin when pin is not "" (a
// build hash or snapshot id), and "follower" on the current version.
func versionsHCL(v, pin string) string {
	hcl := envHCL(versionScript(v), "  keep_versions = 2") + `
data "trueforge_environment" "py" {
  name = trueforge_environment.py.name
}

# Read after py's apply whenever it builds (status is unknown until then).
data "trueforge_environments" "ready" {
  status = trueforge_environment.py.status
}

resource "trueforge_agent" "follower" {
  name    = "follower"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name }
}
`
	if pin != "" {
		hcl += fmt.Sprintf(`
resource "trueforge_agent" "pinned" {
  name    = "pinned"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name, environment_version = %q }
}
`, pin)
	}
	return hcl
}

func versionScript(v string) string { return "echo " + v + " > /usr/local/share/marker" }

// versionHash is the build hash of environment py at version v, as the provider computes
// it (the test checks it against the state), so that a configuration can pin it before
// an apply names it.
func versionHash(v string) string {
	return sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: versionScript(v), CPU: 1, MemoryGB: 1, DiskGB: 3}.BuildHash()
}

// Apply v1, v2 (a build), revert to v1: no build planned or started, and the snapshot is
// v1's; then v3 and v4: collection keeps exactly keep_versions previous snapshots.
func testEnvironmentVersions(t *testing.T, p versionsPlane) {
	snaps := map[string]string{} // version -> snapshot id
	record := func(v string) resource.TestCheckFunc {
		return func(s *terraformState) error {
			snaps[v] = s.RootModule().Resources[envAddr].Primary.Attributes["snapshot_id"]
			return nil
		}
	}
	var started time.Time
	builds := int64(0)
	countBuilds := func(want int64) resource.TestCheckFunc {
		return func(*terraformState) error {
			n, err := p.store().CountBuilds(t.Context())
			if err != nil {
				return err
			}
			if n-builds != want {
				return fmt.Errorf("builds started = %d, want %d", n-builds, want)
			}
			builds = n
			return nil
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: p.providers,
		Steps: []resource.TestStep{
			{
				Config: p.config(versionsHCL("v1", "")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions"), knownvalue.ListSizeExact(1)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(0).AtMapKey("current"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(0).AtMapKey("current_until"), knownvalue.Null()),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("keep_versions"), knownvalue.Int64Exact(2)),
				},
				Check: resource.ComposeTestCheckFunc(record("v1"), countBuilds(2), // the default environment and py
					resource.TestCheckResourceAttr(envAddr, "build_hash", versionHash("v1"))),
			},
			{
				PreConfig:        func() { started = time.Now() },
				Config:           p.config(versionsHCL("v2", "")),
				ConfigPlanChecks: rebuildPlanned(envAddr, "versions"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions"), knownvalue.ListSizeExact(2)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(1).AtMapKey("kept"), knownvalue.Bool(true)),
				},
				Check: resource.ComposeTestCheckFunc(record("v2"), countBuilds(1), p.expectVersions(t, snaps, "v2", "v1"), func(*terraformState) error {
					t.Logf("v2, a build: plan and apply took %s", time.Since(started).Round(time.Millisecond))
					return nil
				}),
			},
			{
				// Back to v1's inputs: the plan names v1's snapshot (no build), and so does the state.
				PreConfig: func() { started = time.Now() },
				Config:    p.config(versionsHCL("v1", "")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
					expectKnownSnapshot(envAddr, func() string { return snaps["v1"] }),
					plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				}},
				Check: resource.ComposeTestCheckFunc(countBuilds(0), p.expectVersions(t, snaps, "v1", "v2"), func(s *terraformState) error {
					t.Logf("revert to v1: plan and apply took %s", time.Since(started).Round(time.Millisecond))
					if got := s.RootModule().Resources[envAddr].Primary.Attributes["snapshot_id"]; got != snaps["v1"] {
						return fmt.Errorf("snapshot_id after the revert = %s, want v1's %s", got, snaps["v1"])
					}
					return nil
				}),
			},
			{
				// v3, and an agent pinned to v1: its sessions keep v1's snapshot, the follower's move on.
				Config: p.config(versionsHCL("v3", versionHash("v1"))),
				Check: resource.ComposeTestCheckFunc(record("v3"), countBuilds(1), p.expectVersions(t, snaps, "v3", "v1", "v2"),
					p.expectAgentSnapshot(t, "pinned", snaps, "v1"), p.expectAgentSnapshot(t, "follower", snaps, "v3")),
			},
			{
				// v4: v3 and v1 stay kept (latest current first), v2 is collected.
				Config: p.config(versionsHCL("v4", versionHash("v1"))),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("versions"), knownvalue.ListSizeExact(4)),
					statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("versions").AtSliceIndex(3).AtMapKey("kept"), knownvalue.Bool(false)),
					// The list data source: default, then py.
					statecheck.ExpectKnownValue("data.trueforge_environments.ready", tfjsonpath.New("environments").AtSliceIndex(1).AtMapKey("versions"), knownvalue.ListSizeExact(4)),
					statecheck.ExpectKnownValue("data.trueforge_environments.ready", tfjsonpath.New("environments").AtSliceIndex(1).AtMapKey("keep_versions"), knownvalue.Int64Exact(2)),
				},
				Check: resource.ComposeTestCheckFunc(record("v4"), countBuilds(1), p.expectVersions(t, snaps, "v4", "v3", "v1"),
					p.expectAgentSnapshot(t, "pinned", snaps, "v1"), p.expectAgentSnapshot(t, "follower", snaps, "v4"), func(*terraformState) error {
						if _, err := p.store().GetSnapshot(t.Context(), snaps["v2"]); !errors.Is(err, store.ErrNotFound) {
							return fmt.Errorf("v2's snapshot %s, past keep_versions, was not collected: %v", snaps["v2"], err)
						}
						return nil
					}),
			},
			{
				// A pin on v2, collected: the plan refuses it, naming the field, the version and the fix.
				Config:      p.config(versionsHCL("v4", versionHash("v2"))),
				PlanOnly:    true,
				ExpectError: expectError(`Environment Version Not Kept.*sandbox.environment_version of agent "pinned" pins version snap-.*keep_versions.*Pin a kept version`),
			},
			{
				// Not a version at all.
				Config:      p.config(versionsHCL("v4", "snap-00000000000000000000")),
				PlanOnly:    true,
				ExpectError: expectError(`Environment Version Not Found.*"snap-00000000000000000000"`),
			},
		},
	})
}

// expectAgentSnapshot checks that the harness loads agent name on the snapshot of
// version v: the one its new sessions' sandboxes are created from.
func (p versionsPlane) expectAgentSnapshot(t *testing.T, name string, snaps map[string]string, v string) resource.TestCheckFunc {
	return func(*terraformState) error {
		a, err := agents.Load(t.Context(), p.store(), name)
		if err != nil {
			return fmt.Errorf("the harness cannot load agent %s: %w", name, err)
		}
		if a.Environment.SnapshotID != snaps[v] || a.Snapshot.ID != snaps[v] {
			return fmt.Errorf("agent %s's sandboxes would come from %s (%s), want %s's %s", name, a.Environment.SnapshotID, a.Snapshot.ID, v, snaps[v])
		}
		return nil
	}
}

// expectVersions checks that environment py's kept versions are exactly want (names of
// snapshots in snaps, the current first), that the state lists the store's versions,
// and that the kept snapshots exist, Ready.
func (p versionsPlane) expectVersions(t *testing.T, snaps map[string]string, want ...string) resource.TestCheckFunc {
	return func(s *terraformState) error {
		ctx := t.Context()
		vs, err := p.store().EnvironmentVersions(ctx, "py")
		if err != nil {
			return err
		}
		attrs := s.RootModule().Resources[envAddr].Primary.Attributes
		var kept, wantIDs []string
		for i, v := range vs {
			if v.Kept {
				kept = append(kept, v.SnapshotID)
			}
			if got := attrs[fmt.Sprintf("versions.%d.snapshot_id", i)]; got != v.SnapshotID {
				return fmt.Errorf("versions.%d.snapshot_id in state = %s, in the store %s", i, got, v.SnapshotID)
			}
		}
		for _, w := range want {
			wantIDs = append(wantIDs, snaps[w])
		}
		if !slices.Equal(kept, wantIDs) {
			return fmt.Errorf("kept versions = %v, want %v (%v: the current one and keep_versions previous)", kept, wantIDs, want)
		}
		for _, id := range kept {
			if snap, err := p.store().GetSnapshot(ctx, id); err != nil || snap.Status != "Ready" {
				return fmt.Errorf("kept version %s: %+v, %v", id, snap, err)
			}
		}
		return nil
	}
}

// expectKnownSnapshot is the plan check that addr's planned snapshot_id is known and is
// want() (read when the plan is checked: an earlier step records it).
func expectKnownSnapshot(addr string, want func() string) plancheck.PlanCheck {
	return snapshotPlanCheck{addr: addr, want: want}
}

type snapshotPlanCheck struct {
	addr string
	want func() string
}

func (c snapshotPlanCheck) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		after, _ := rc.Change.After.(map[string]any)
		if unknown, _ := rc.Change.AfterUnknown.(map[string]any); unknown["snapshot_id"] == true {
			resp.Error = fmt.Errorf("%s: snapshot_id is unknown in the plan (a build is planned), want %s", c.addr, c.want())
			return
		}
		if got := after["snapshot_id"]; got != c.want() {
			resp.Error = fmt.Errorf("%s: planned snapshot_id = %v, want %s", c.addr, got, c.want())
		}
		return
	}
	resp.Error = fmt.Errorf("%s is not in the plan", c.addr)
}
