package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

const providerAddr = "trueforge_sandbox_provider.local"

func TestAccSandboxProvider_basic(t *testing.T) {
	f := newFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{
			{
				Config: f.config(""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("default_environment"), knownvalue.StringExact("default")),
					statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("release_snapshot"), knownvalue.StringRegexp(regexp.MustCompile(`^release-[0-9a-f]{16}$`))),
					statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("scopes"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("write:sandboxes"), knownvalue.StringExact("write:snapshots"), knownvalue.StringExact("manage:secrets"),
					})),
				},
				Check: func(*terraformState) error {
					// The reserved default environment exists with the platform blueprint.
					env, err := f.store().GetEnvironment(t.Context(), "default")
					if err != nil {
						return err
					}
					if env.Image != "platform" || env.CPU != 1 || env.MemoryGB != 1 || env.DiskGB != 3 || !env.Reserved {
						t.Errorf("default environment = %+v, want platform, 1 CPU, 1 GB, 3 GB, reserved", env)
					}
					snap, err := f.store().GetSnapshot(t.Context(), env.SnapshotID)
					if err != nil || snap.Status != "Ready" {
						t.Errorf("default snapshot = %+v, %v; want Ready", snap, err)
					}
					return nil
				},
			},
			{
				ResourceName:            providerAddr,
				ImportState:             true,
				ImportStateId:           "local",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				// Renaming is a replacement; changing the target is in place.
				Config:           f.config("") + "",
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

func TestAccSandboxProvider_updateAndReplace(t *testing.T) {
	f := newFixture(t)
	cfg := func(name, target string) string {
		return f.providerBlock(f.owner) + `
resource "trueforge_sandbox_provider" "local" {
  name   = "` + name + `"
  type   = "local"
  target = "` + target + `"
}
`
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{
			{Config: cfg("one", "eu")},
			{
				Config:           cfg("one", "us"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(providerAddr, plancheck.ResourceActionUpdate)}},
			},
			{
				Config:           cfg("two", "us"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(providerAddr, plancheck.ResourceActionReplace)}},
			},
		},
	})
}

func TestAccSandboxProvider_disappears(t *testing.T) {
	f := newFixture(t)
	testDisappears(t, f, f.config(""), providerAddr, `DELETE FROM environments; DELETE FROM sandbox_providers`)
}

func TestAccSandboxProvider_drift(t *testing.T) {
	f := newFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{
			{Config: f.config("")},
			{
				PreConfig: func() { f.exec(`UPDATE sandbox_providers SET target = 'elsewhere'`) },
				Config:    f.config(""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(providerAddr, plancheck.ResourceActionUpdate)},
				},
			},
		},
	})
}

func TestAccSandboxProvider_repairsDefaultEnvironment(t *testing.T) {
	f := newFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{
			{Config: f.config("")},
			{
				// The reserved environment was removed outside Terraform: refresh marks the
				// provider Degraded, plan shows an update, apply recreates it.
				PreConfig: func() { f.exec(`DELETE FROM environments WHERE name = 'default'`) },
				Config:    f.config(""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(providerAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				},
				Check: func(*terraformState) error {
					_, err := f.store().GetEnvironment(t.Context(), "default")
					return err
				},
			},
		},
	})
}

func TestAccSandboxProvider_rules(t *testing.T) {
	f := newFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{
			{
				Config:      f.providerBlock(f.owner) + "resource \"trueforge_sandbox_provider\" \"x\" {\n  name = \"x\"\n  type = \"kubernetes\"\n}\n",
				ExpectError: regexp.MustCompile(`(?s)Attribute type value must be one of`),
			},
			{
				Config:      f.providerBlock(f.owner) + "resource \"trueforge_sandbox_provider\" \"x\" {\n  name = \"Bad Name\"\n  type = \"local\"\n}\n",
				ExpectError: regexp.MustCompile(`(?s)"Bad Name" is not a valid name`),
			},
			{
				// One per control plane: a second provider is refused and nothing is stored.
				Config: f.config(`
resource "trueforge_sandbox_provider" "second" {
  name       = "second"
  type       = "local"
  depends_on = [trueforge_sandbox_provider.local]
}`),
				ExpectError: regexp.MustCompile(`Sandbox Provider Already Configured`),
			},
			{
				PreConfig: func() {
					if _, err := f.store().GetSandboxProvider(t.Context(), "second"); err == nil {
						t.Error("the refused provider was stored")
					}
				},
				Config: f.config(""),
			},
		},
	})
}

func TestAccSandboxProvider_writeOnlyKey(t *testing.T) {
	f := newFixture(t)
	cfg := func(version int) string {
		return f.providerBlock(f.owner) + `
resource "trueforge_sandbox_provider" "local" {
  name               = "local"
  type               = "local"
  api_key_wo         = "key-v` + string(rune('0'+version)) + `"
  api_key_wo_version = ` + string(rune('0'+version)) + `
}
`
	}
	var sealed [][]byte
	grab := func(*terraformState) error {
		var b []byte
		if err := f.store().DB().QueryRow(`SELECT api_key_enc FROM sandbox_providers`).Scan(&b); err != nil {
			return err
		}
		sealed = append(sealed, b)
		return nil
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: cfg(1),
				Check:  resource.ComposeTestCheckFunc(resource.TestCheckNoResourceAttr(providerAddr, "api_key_wo"), grab),
			},
			{
				Config:           cfg(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(providerAddr, plancheck.ResourceActionUpdate)}},
				Check:            grab,
			},
		},
	})
	if len(sealed) != 2 || string(sealed[0]) == string(sealed[1]) || len(sealed[1]) == 0 {
		t.Fatalf("the write-only key was not rotated in the store: %q", sealed)
	}
	for _, s := range sealed {
		if regexp.MustCompile(`key-v`).Match(s) {
			t.Fatal("the API key is stored in plaintext")
		}
	}
}
