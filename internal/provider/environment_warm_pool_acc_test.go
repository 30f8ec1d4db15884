package provider

import (
	"fmt"
	"regexp"
	"strings"
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

// warmPoolHCL is environment "py" on the Daytona emulator with env MODE, warm_pool (""
// for none), its secret GITHUB_TOKEN, and an agent on it.
func warmPoolHCL(mode, pool, secret string) string {
	extra := fmt.Sprintf("  env = { MODE = %q }\n", mode)
	if pool != "" {
		extra += "  warm_pool = " + pool + "\n"
	}
	return daytonaEnvHCL("py", "echo v1", extra) + daytonaSecretHCL(secret, "api.github.com") + `
resource "trueforge_agent" "live" {
  name    = "live"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name }
}

# Both environment data sources, read after py's apply (depends_on) so that they show it.
data "trueforge_environment" "py" {
  name       = trueforge_environment.py.name
  depends_on = [trueforge_environment.py]
}

data "trueforge_environments" "all" {
  depends_on = [trueforge_environment.py]
}
`
}

// expectDataWarmPool checks warm_pool as both environment data sources read it (the
// list's elements are default, then py).
func expectDataWarmPool(want knownvalue.Check) []statecheck.StateCheck {
	return []statecheck.StateCheck{
		statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("warm_pool"), want),
		statecheck.ExpectKnownValue("data.trueforge_environments.all", tfjsonpath.New("environments").AtSliceIndex(1).AtMapKey("name"), knownvalue.StringExact("py")),
		statecheck.ExpectKnownValue("data.trueforge_environments.all", tfjsonpath.New("environments").AtSliceIndex(1).AtMapKey("warm_pool"), want),
		statecheck.ExpectKnownValue("data.trueforge_environments.all", tfjsonpath.New("environments").AtSliceIndex(0).AtMapKey("warm_pool"), knownvalue.Null()),
	}
}

// poolPass runs one pass of a harness's pool keeper against the fixture's control plane
// and checks how many members it created and deleted.
func (f *daytonaFixture) poolPass(t *testing.T, wantCreated, wantDeleted int) resource.TestCheckFunc {
	return func(*terraformState) error {
		trs, err := f.manager().KeepPools(t.Context())
		if err != nil {
			return err
		}
		created, deleted := 0, 0
		for _, tr := range trs {
			switch {
			case tr.Err != nil:
				return fmt.Errorf("keeper: %w", tr.Err)
			case tr.To == store.SandboxStateDeleted:
				if f.srv.SandboxState(tr.SandboxID) != "" {
					return fmt.Errorf("deleted member %s is still in Daytona (%s)", tr.SandboxID, f.srv.SandboxState(tr.SandboxID))
				}
				deleted++
			case tr.From == "":
				created++
			}
		}
		if created != wantCreated || deleted != wantDeleted {
			return fmt.Errorf("keeper created %d and deleted %d members; want %d and %d", created, deleted, wantCreated, wantDeleted)
		}
		return nil
	}
}

func (f *daytonaFixture) manager() *lifecycle.Manager {
	rts := backend.New(controlplane.New(f.store()))
	rts.Backends[daytona.Type] = &daytona.Backend{Options: []daytona.Option{daytona.WithPollInterval(10 * time.Millisecond)}}
	return lifecycle.New(lifecycle.Config{Store: f.store(), Runtimes: rts})
}

// claims checks that session's first sandbox call claims a pool member whose secret
// variable carries the Daytona placeholder (never a value), while Daytona holds value.
func (f *daytonaFixture) claims(t *testing.T, session, value string) resource.TestCheckFunc {
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
		m := f.manager()
		lease, err := m.Acquire(ctx, session, a)
		if err != nil {
			return err
		}
		res, err := lease.Runtime.Exec(ctx, lease.Record.SandboxID, sandbox.ExecRequest{Shell: `printf %s "$GITHUB_TOKEN"`})
		lease.Release(ctx)
		t.Cleanup(func() { _ = m.Delete(t.Context(), session) })
		if err != nil {
			return err
		}
		if !strings.HasPrefix(lease.Record.SandboxID, lifecycle.PoolIDPrefix) {
			return fmt.Errorf("session %s got %s, not a warm pool member", session, lease.Record.SandboxID)
		}
		if tok := string(res.Stdout); tok == "" || strings.HasPrefix(tok, "ghp_") {
			return fmt.Errorf("the claimed sandbox's GITHUB_TOKEN is %q; want Daytona's placeholder", tok)
		}
		if v, _ := f.srv.SecretValue(daytona.SecretName("py", "GITHUB_TOKEN")); v != value {
			return fmt.Errorf("Daytona's secret is %q; want %q", v, value)
		}
		return nil
	}
}

// TestAccEnvironment_warmPool: warm_pool is a live setting (no snapshot baked, snapshot_id
// known at plan, max_age spelled as configured); the keeper fills the pool, resizes it,
// keeps its members through a secret's rotation (Daytona resolves the placeholder they
// carry), replaces them after an env change, and drains the pool when warm_pool goes.
func TestAccEnvironment_warmPool(t *testing.T) {
	f := newDaytonaFixture(t)
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	noBuild := func(*terraformState) error {
		if n := f.srv.Count("POST /snapshots"); n != 0 {
			return fmt.Errorf("POST /snapshots %d times after the first apply; warm_pool must not bake a snapshot", n)
		}
		return nil
	}
	live := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
	}}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(warmPoolHCL("a", `{ size = 1 }`, "ghp_first")),
				ConfigStateChecks: append([]statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("warm_pool"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"size": knownvalue.Int64Exact(1), "max_age": knownvalue.StringExact("1h"),
					})),
					snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				}, expectDataWarmPool(knownvalue.ObjectExact(map[string]knownvalue.Check{
					"size": knownvalue.Int64Exact(1), "max_age": knownvalue.StringExact("1h"),
				}))...),
				Check: resource.ComposeTestCheckFunc(f.poolPass(t, 1, 0), f.poolPass(t, 0, 0),
					func(*terraformState) error { f.srv.ResetCounts(); return nil }),
			},
			{
				Config:           f.config(warmPoolHCL("a", `{ size = 2, max_age = "90m" }`, "ghp_first")),
				ConfigPlanChecks: live,
				ConfigStateChecks: append([]statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("warm_pool").AtMapKey("max_age"), knownvalue.StringExact("90m")),
					snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				}, expectDataWarmPool(knownvalue.ObjectExact(map[string]knownvalue.Check{
					"size": knownvalue.Int64Exact(2), "max_age": knownvalue.StringExact("90m"),
				}))...),
				Check: resource.ComposeTestCheckFunc(noBuild, f.poolPass(t, 1, 0), func(*terraformState) error {
					env, err := f.store().GetEnvironment(t.Context(), "py")
					if err != nil || env.Settings.WarmPool == nil || *env.Settings.WarmPool != (store.WarmPool{Size: 2, MaxAgeSeconds: 5400}) {
						return fmt.Errorf("stored warm pool %+v, %v", env.Settings.WarmPool, err)
					}
					return nil
				}),
			},
			{
				// A rotation keeps the members: they carry the secret's placeholder.
				Config: f.config(warmPoolHCL("a", `{ size = 2, max_age = "90m" }`, "ghp_second")),
				Check:  resource.ComposeTestCheckFunc(noBuild, f.poolPass(t, 0, 0), f.claims(t, "s-1", "ghp_second"), f.poolPass(t, 1, 0)),
			},
			{
				Config:           f.config(warmPoolHCL("b", `{ size = 2, max_age = "90m" }`, "ghp_second")),
				ConfigPlanChecks: live,
				Check:            resource.ComposeTestCheckFunc(noBuild, f.poolPass(t, 2, 2), f.claims(t, "s-2", "ghp_second")),
			},
			{
				Config:           f.config(warmPoolHCL("b", "", "ghp_second")),
				ConfigPlanChecks: live,
				ConfigStateChecks: append([]statecheck.StateCheck{statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("warm_pool"), knownvalue.Null())},
					expectDataWarmPool(knownvalue.Null())...),
				Check: resource.ComposeTestCheckFunc(noBuild, f.poolPass(t, 0, 1), func(*terraformState) error {
					if ms, err := f.store().ListPoolSandboxes(t.Context()); err != nil || len(ms) != 0 {
						return fmt.Errorf("pool members left: %+v, %v", ms, err)
					}
					return nil
				}),
			},
		},
	})
}
