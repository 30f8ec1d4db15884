package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

const secretAddr = "trueforge_secret.gh"

func secretHCL(valueAttrs, hosts string) string {
	return fmt.Sprintf(`
resource "trueforge_secret" "gh" {
  environment = trueforge_environment.py.name
  env_name    = "GITHUB_TOKEN"
  hosts       = %s
%s
}
`, hosts, valueAttrs)
}

// sealedValue returns the stored ciphertext of the test secret and whether it opens to want.
func (f *controlPlaneFixture) secretOpensTo(want string) error {
	cp, _ := f.controlPlane()
	sec, err := cp.store.GetSecret(f.t.Context(), "py/GITHUB_TOKEN")
	if err != nil {
		return err
	}
	if bytes.Contains(sec.ValueEnc, []byte(want)) {
		return fmt.Errorf("the secret is stored in plaintext")
	}
	box, err := cp.plane.SecretBox(f.t.Context())
	if err != nil {
		return err
	}
	pt, err := box.Open(sec.ValueEnc, "secret/"+sec.ID)
	if err != nil {
		return err
	}
	if string(pt) != want {
		return fmt.Errorf("stored secret opens to %q, want %q", pt, want)
	}
	return nil
}

// dbFilesLack fails when plaintext occurs in the database file or, since the store runs
// in WAL mode and recent rows may live only in the log until a checkpoint, in its -wal and
// -shm files when they exist.
func (f *controlPlaneFixture) dbFilesLack(plaintext string) error {
	for _, name := range []string{f.dbURL, f.dbURL + "-wal", f.dbURL + "-shm"} {
		raw, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) && name != f.dbURL {
			continue
		}
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte(plaintext)) {
			return fmt.Errorf("%s contains the secret in plaintext", filepath.Base(name))
		}
	}
	return nil
}

func TestAccSecret_rotationAndHosts(t *testing.T) {
	f := newFixture(t)
	env := envHCL("", "")
	accTest(t,
		resource.TestStep{
			Config: f.config(env + secretHCL(`  value = "ghp_first"`, `["api.github.com"]`)),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(secretAddr, tfjsonpath.New("id"), knownvalue.StringExact("py/GITHUB_TOKEN")),
				statecheck.ExpectSensitiveValue(secretAddr, tfjsonpath.New("value")),
			},
			Check: func(*terraformState) error {
				if err := f.secretOpensTo("ghp_first"); err != nil {
					return err
				}
				return f.dbFilesLack("ghp_first")
			},
		},
		resource.TestStep{
			// Rotation is in place and never touches the environment's snapshot.
			Config: f.config(env + secretHCL(`  value = "ghp_second"`, `["api.github.com"]`)),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(secretAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionNoop),
			}},
			Check: func(*terraformState) error { return f.secretOpensTo("ghp_second") },
		},
		resource.TestStep{
			Config:           f.config(env + secretHCL(`  value = "ghp_second"`, `["api.github.com", "*.githubusercontent.com"]`)),
			ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
		},
		resource.TestStep{
			ResourceName:            secretAddr,
			ImportState:             true,
			ImportStateId:           "py/GITHUB_TOKEN",
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"value"},
		},
		resource.TestStep{
			// Hosts changed outside Terraform: plan reverts them in place.
			PreConfig:        func() { f.exec(`UPDATE secrets SET hosts = '["evil.example.com"]'`) },
			Config:           f.config(env + secretHCL(`  value = "ghp_second"`, `["api.github.com", "*.githubusercontent.com"]`)),
			ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
		},
		resource.TestStep{
			// A value re-sealed outside Terraform is drift too.
			PreConfig: func() {
				cp, _ := f.controlPlane()
				box, err := cp.plane.SecretBox(f.t.Context())
				if err != nil {
					t.Fatal(err)
				}
				sealed, _ := box.Seal([]byte("tampered"), "secret/py/GITHUB_TOKEN")
				f.exec(`UPDATE secrets SET value_enc = ?`, sealed)
			},
			Config:           f.config(env + secretHCL(`  value = "ghp_second"`, `["api.github.com", "*.githubusercontent.com"]`)),
			ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
			Check:            func(*terraformState) error { return f.secretOpensTo("ghp_second") },
		},
		resource.TestStep{
			// Renaming the variable replaces the secret.
			Config: f.config(env + `
resource "trueforge_secret" "gh" {
  environment = trueforge_environment.py.name
  env_name    = "GH_TOKEN"
  hosts       = ["api.github.com"]
  value       = "ghp_second"
}`),
			ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionReplace),
		},
	)
}

func TestAccSecret_writeOnly(t *testing.T) {
	f := newFixture(t)
	env := envHCL("", "")
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: f.config(env + secretHCL("  value_wo = \"wo-one\"\n  value_wo_version = 1", `["api.github.com"]`)),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckNoResourceAttr(secretAddr, "value_wo"),
					resource.TestCheckNoResourceAttr(secretAddr, "value"),
					func(*terraformState) error { return f.secretOpensTo("wo-one") },
				),
			},
			{
				// A new value with the same version is not sent: write-only values never diff.
				Config:           f.config(env + secretHCL("  value_wo = \"wo-ignored\"\n  value_wo_version = 1", `["api.github.com"]`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check:            func(*terraformState) error { return f.secretOpensTo("wo-one") },
			},
			{
				// Bumping the version rotates in place.
				Config:           f.config(env + secretHCL("  value_wo = \"wo-two\"\n  value_wo_version = 2", `["api.github.com"]`)),
				ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
				Check:            func(*terraformState) error { return f.secretOpensTo("wo-two") },
			},
			{
				// Switching to the legacy attribute works and re-seals.
				Config: f.config(env + secretHCL(`  value = "legacy"`, `["api.github.com"]`)),
				Check:  func(*terraformState) error { return f.secretOpensTo("legacy") },
			},
		},
	})
}

func TestAccSecret_disappears(t *testing.T) {
	f := newFixture(t)
	testDisappears(t, f, f.config(envHCL("", "")+secretHCL(`  value = "x-123"`, `["api.github.com"]`)), secretAddr, `DELETE FROM secrets`)
}

func TestAccSecret_rules(t *testing.T) {
	f := newFixture(t)
	blocked := envHCL("", `  network = { block_all = true }`)
	accTest(t,
		resource.TestStep{Config: f.config(envHCL("", "") + secretHCL(`  value = "x"`, `["https://api.github.com"]`)), ExpectError: attrError("hosts", `hosts\[0\]: "https://api\.github\.com" has a scheme`)},
		resource.TestStep{Config: f.config(envHCL("", "") + secretHCL(`  value = "x"`, `["api.github.com:443"]`)), ExpectError: attrError("hosts", `hosts\[0\]: "api\.github\.com:443" has a port`)},
		resource.TestStep{Config: f.config(envHCL("", "") + secretHCL(`  value = "x"`, `["api.github.com/v3"]`)), ExpectError: attrError("hosts", `hosts\[0\]: "api\.github\.com/v3" has a path`)},
		resource.TestStep{Config: f.config(envHCL("", "") + secretHCL(`  value = "x"`, `["10.0.0.1"]`)), ExpectError: attrError("hosts", `hosts\[0\]: "10\.0\.0\.1" is an IP address`)},
		resource.TestStep{Config: f.config(envHCL("", "") + secretHCL(`  value = "x"`, `[]`)), ExpectError: attrError("hosts", `Attribute hosts list must contain at least 1 elements`)},
		resource.TestStep{Config: f.config(envHCL("", "") + secretHCL(``, `["api.github.com"]`)), ExpectError: regexp.MustCompile(`Missing Secret Value`)},
		resource.TestStep{
			Config: f.config(envHCL("", "") + `
resource "trueforge_secret" "gh" {
  environment = trueforge_environment.py.name
  env_name    = "1BAD"
  hosts       = ["api.github.com"]
  value       = "x"
}`),
			ExpectError: attrError("env_name", `env_name: "1BAD" is not an environment variable name`),
		},
		// The environment exists with block_all on: the plan warns (this apply might turn
		// block_all off first) and apply refuses to add the secret, writing nothing.
		resource.TestStep{Config: f.config(blocked)},
		resource.TestStep{
			Config:      f.config(blocked + secretHCL(`  value = "x"`, `["api.github.com"]`)),
			ExpectError: regexp.MustCompile(`Secrets Cannot Be Added While Block All Network Is On`),
		},
		resource.TestStep{
			PreConfig: func() {
				secs, err := f.store().ListSecrets(t.Context(), "py")
				if err != nil || len(secs) != 0 {
					t.Errorf("a refused secret was stored: %v, %v", secs, err)
				}
			},
			Config: f.config(envHCL("", "") + secretHCL(`  value = "x"`, `["api.github.com"]`)),
		},
		resource.TestStep{
			// Turning block_all on afterwards is allowed, with a warning that the secret is inert.
			Config:           f.config(blocked + secretHCL(`  value = "x"`, `["api.github.com"]`)),
			ConfigPlanChecks: plannedAction(envAddr, plancheck.ResourceActionUpdate),
		},
	)
}
