package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// liveSettingsHCL is environment "py" on the Daytona emulator with labels and CIDRs, and
// an agent whose sandboxes are made from it.
func liveSettingsHCL(labels, cidrs string) string {
	return daytonaEnvHCL("py", "echo v1", fmt.Sprintf("  labels  = %s\n  network = { allow_cidrs = %s }", labels, cidrs)) + `
resource "trueforge_agent" "live" {
  name    = "live"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name, idle_stop_minutes = 5, archive_after_minutes = 60, delete_after_minutes = 120 }
}
`
}

// TestAccEnvironment_liveSettingsNoRebuild: changing labels or network.allow_cidrs plans
// an in-place update with snapshot_id known (the plan's "New Snapshot Will Be Baked"
// warning comes only with an unknown snapshot_id), bakes nothing, and the next sandbox
// the harness makes carries the new labels (beside its own) and CIDRs, with the agent's
// timings as Daytona's intervals.
func TestAccEnvironment_liveSettingsNoRebuild(t *testing.T) {
	f := newDaytonaFixture(t)
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	snapshotCreates := 0
	noNewSnapshot := func(*terraformState) error {
		if n := f.srv.Count("POST /snapshots"); n != snapshotCreates {
			return fmt.Errorf("POST /snapshots %d times in all, %d before this step; a live setting must not bake a snapshot", n, snapshotCreates)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(liveSettingsHCL(`{ team = "ml" }`, `["192.30.252.0/22"]`)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				},
				Check: resource.ComposeTestCheckFunc(
					func(*terraformState) error { snapshotCreates = f.srv.Count("POST /snapshots"); return nil },
					f.newSandboxGets(t, "s-1", map[string]string{"team": "ml"}, "192.30.252.0/22"),
				),
			},
			{
				Config: f.config(liveSettingsHCL(`{ team = "ml", cost_center = "42" }`, `["192.30.252.0/22", "140.82.112.0/20"]`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
					plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))},
				Check: resource.ComposeTestCheckFunc(noNewSnapshot,
					f.newSandboxGets(t, "s-2", map[string]string{"team": "ml", "cost_center": "42"}, "192.30.252.0/22,140.82.112.0/20")),
			},
			{
				// Removing both is live as well.
				Config: f.config(daytonaEnvHCL("py", "echo v1", "") + `
resource "trueforge_agent" "live" {
  name    = "live"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name, idle_stop_minutes = 5, archive_after_minutes = 60, delete_after_minutes = 120 }
}
`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
				}},
				ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))},
				Check:             resource.ComposeTestCheckFunc(noNewSnapshot, f.newSandboxGets(t, "s-3", nil, "")),
			},
		},
	})
}

// newSandboxGets makes session's sandbox as the harness does (agent "live", read from the
// store that apply wrote) and checks what Daytona received: the environment's labels
// (exactly those besides the trueforge.* ones), its CIDRs as networkAllowList, and the
// agent's timings (5, 60, 120 minutes) as intervals.
func (f *daytonaFixture) newSandboxGets(t *testing.T, session string, labels map[string]string, cidrs string) resource.TestCheckFunc {
	return func(*terraformState) error {
		ctx := t.Context()
		st := f.store()
		if err := st.CreateSession(ctx, store.Session{ID: session, Agent: "live", Owner: f.owner}); err != nil {
			return err
		}
		a, err := agents.Load(ctx, st, "live")
		if err != nil {
			return err
		}
		rts := backend.New(controlplane.New(st))
		// A short poll keeps the test quick.
		rts.Backends[daytona.Type] = &daytona.Backend{Options: []daytona.Option{daytona.WithPollInterval(10 * time.Millisecond)}}
		m := lifecycle.New(lifecycle.Config{Store: st, Runtimes: rts})
		lease, err := m.Acquire(ctx, session, a)
		if err != nil {
			return fmt.Errorf("provisioning: %w", err)
		}
		lease.Release(ctx)
		t.Cleanup(func() { _ = m.Delete(context.Background(), session) })
		sb, err := daytona.New(f.srv.URL(), f.key).GetSandbox(ctx, lease.Record.SandboxID)
		if err != nil {
			return err
		}
		got := maps.Clone(sb.Labels)
		maps.DeleteFunc(got, func(k, _ string) bool { return sandbox.ReservedLabel(k) })
		if !maps.Equal(got, labels) && (len(got) != 0 || len(labels) != 0) {
			return fmt.Errorf("sandbox labels %v; want %v beside the trueforge.* ones", sb.Labels, labels)
		}
		if sb.Labels[lifecycle.LabelSession] != session {
			return fmt.Errorf("sandbox labels %v lack the harness's session label", sb.Labels)
		}
		if sb.NetworkAllowList != cidrs {
			return fmt.Errorf("networkAllowList %q; want %q", sb.NetworkAllowList, cidrs)
		}
		if *sb.AutoStopInterval != 5 || *sb.AutoArchiveInterval != daytona.MaxAutoArchive || *sb.AutoDeleteInterval != 115 {
			return fmt.Errorf("intervals stop=%d archive=%d delete=%d; want 5, %d, 115", *sb.AutoStopInterval, *sb.AutoArchiveInterval, *sb.AutoDeleteInterval, daytona.MaxAutoArchive)
		}
		return nil
	}
}
