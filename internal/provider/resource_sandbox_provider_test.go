package provider

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

const providerAddr = "trueforge_sandbox_provider.local"

func TestAccSandboxProvider_basic(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{
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
		resource.TestStep{
			ResourceName:            providerAddr,
			ImportState:             true,
			ImportStateId:           "local",
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		},
		resource.TestStep{
			// Renaming is a replacement; changing the target is in place.
			Config:           f.config("") + "",
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		},
	)
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
	accTest(t,
		resource.TestStep{Config: cfg("one", "eu")},
		resource.TestStep{
			Config:           cfg("one", "us"),
			ConfigPlanChecks: plannedAction(providerAddr, plancheck.ResourceActionUpdate),
		},
		resource.TestStep{
			Config:           cfg("two", "us"),
			ConfigPlanChecks: plannedAction(providerAddr, plancheck.ResourceActionReplace),
		},
	)
}

func TestAccSandboxProvider_disappears(t *testing.T) {
	f := newFixture(t)
	testDisappears(t, f, f.config(""), providerAddr, `DELETE FROM environments; DELETE FROM sandbox_providers`)
}

func TestAccSandboxProvider_drift(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{Config: f.config("")},
		resource.TestStep{
			PreConfig:        func() { f.exec(`UPDATE sandbox_providers SET target = 'elsewhere'`) },
			Config:           f.config(""),
			ConfigPlanChecks: plannedAction(providerAddr, plancheck.ResourceActionUpdate),
		},
	)
}

func TestAccSandboxProvider_repairsDefaultEnvironment(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{Config: f.config("")},
		resource.TestStep{
			// The reserved environment was removed outside Terraform: refresh marks the
			// provider Degraded, plan shows an update, apply recreates it.
			PreConfig:        func() { f.exec(`DELETE FROM environments WHERE name = 'default'`) },
			Config:           f.config(""),
			ConfigPlanChecks: plannedAction(providerAddr, plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
			Check: func(*terraformState) error {
				_, err := f.store().GetEnvironment(t.Context(), "default")
				return err
			},
		},
	)
}

func TestAccSandboxProvider_rules(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{
			Config:      f.providerBlock(f.owner) + "resource \"trueforge_sandbox_provider\" \"x\" {\n  name = \"x\"\n  type = \"kubernetes\"\n}\n",
			ExpectError: regexp.MustCompile(`(?s)Attribute type value must be one of`),
		},
		resource.TestStep{
			// The unknown type wrote nothing: no provider "x" (no provider at all), and no
			// default environment.
			PreConfig:   func() { expectNoSandboxProvider(t, f, "x") },
			Config:      f.providerBlock(f.owner) + "resource \"trueforge_sandbox_provider\" \"x\" {\n  name = \"Bad Name\"\n  type = \"local\"\n}\n",
			ExpectError: regexp.MustCompile(`(?s)"Bad Name" is not a valid name`),
		},
		resource.TestStep{
			// One per control plane: a second provider is refused and nothing is stored.
			Config: f.config(`
resource "trueforge_sandbox_provider" "second" {
  name       = "second"
  type       = "local"
  depends_on = [trueforge_sandbox_provider.local]
}`),
			ExpectError: regexp.MustCompile(`Sandbox Provider Already Configured`),
		},
		resource.TestStep{
			PreConfig: func() {
				if _, err := f.store().GetSandboxProvider(t.Context(), "second"); err == nil {
					t.Error("the refused provider was stored")
				}
			},
			Config: f.config(""),
		},
	)
}

// expectNoSandboxProvider asserts that a refused step stored nothing: no provider name,
// no provider at all and no environment.
func expectNoSandboxProvider(t *testing.T, f *controlPlaneFixture, name string) {
	t.Helper()
	st := f.store()
	if p, err := st.GetSandboxProvider(t.Context(), name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("sandbox provider %q after the refused step: %+v, %v", name, p, err)
	}
	var providers, envs int
	if err := st.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM sandbox_providers), (SELECT COUNT(*) FROM environments)`).Scan(&providers, &envs); err != nil {
		t.Fatal(err)
	}
	if providers != 0 || envs != 0 {
		t.Errorf("after the refused step: %d sandbox provider(s), %d environment(s); want none", providers, envs)
	}
}

// storedAPIKey opens the sandbox provider's sealed API key, as the control plane does.
func storedAPIKey(t *testing.T, f *controlPlaneFixture) (key string, sealed []byte) {
	t.Helper()
	cp, _ := f.controlPlane()
	p := mustProvider(t, cp)
	box, err := cp.plane.SecretBox(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	k, err := box.Open(p.APIKeyEnc, "sandbox_provider/"+p.Name)
	if err != nil {
		t.Fatalf("opening the stored API key: %v", err)
	}
	return string(k), p.APIKeyEnc
}

func TestAccSandboxProvider_writeOnlyKey(t *testing.T) {
	f := newFixture(t)
	cfg := func(key string, version int) string {
		return f.providerBlock(f.owner) + fmt.Sprintf(`
resource "trueforge_sandbox_provider" "local" {
  name               = "local"
  type               = "local"
  api_key_wo         = %q
  api_key_wo_version = %d
}
`, key, version)
	}
	var sealed [][]byte
	expectKey := func(want string) func(*terraformState) error {
		return func(*terraformState) error {
			got, enc := storedAPIKey(t, f)
			if got != want {
				return fmt.Errorf("stored API key opens to %q, want %q", got, want)
			}
			if bytes.Contains(enc, []byte(want)) {
				return fmt.Errorf("the API key is stored in plaintext")
			}
			sealed = append(sealed, enc)
			return f.dbFilesLack(want)
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: cfg("key-v1", 1),
				Check:  resource.ComposeTestCheckFunc(resource.TestCheckNoResourceAttr(providerAddr, "api_key_wo"), expectKey("key-v1")),
			},
			{
				// Bumping the version sends the new key: rotated in place.
				Config:           cfg("key-v2", 2),
				ConfigPlanChecks: plannedAction(providerAddr, plancheck.ResourceActionUpdate),
				Check:            resource.ComposeTestCheckFunc(resource.TestCheckNoResourceAttr(providerAddr, "api_key_wo"), expectKey("key-v2")),
			},
			{
				// A new key without a new version is not sent: write-only values never diff.
				Config:           cfg("key-v3-ignored", 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check:            expectKey("key-v2"),
			},
		},
	})
	if len(sealed) != 3 || bytes.Equal(sealed[0], sealed[1]) || !bytes.Equal(sealed[1], sealed[2]) {
		t.Fatalf("sealed keys over the steps = %x; want a new one at the rotation and the same one after", sealed)
	}
}
