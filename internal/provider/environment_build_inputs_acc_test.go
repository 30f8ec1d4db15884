package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// contextUploads is the emulator's route for a build context tarball's upload.
const contextUploads = "PUT /storage/{bucket}/{key...}"

// dockerfileEnvHCL renders a Daytona environment "df" built from dockerfile with the
// build context folder dir, gpu GPUs of type H100 (none when gpu is 0) and entrypoint.
func dockerfileEnvHCL(dockerfile, dir string, gpu int, entrypoint ...string) string {
	q := make([]string, len(entrypoint))
	for i, e := range entrypoint {
		q[i] = fmt.Sprintf("%q", e)
	}
	gpus := ""
	if gpu != 0 {
		gpus = fmt.Sprintf("  gpu              = %d\n  gpu_type         = \"H100\"\n", gpu)
	}
	return fmt.Sprintf(`
resource "trueforge_environment" "df" {
  name             = "df"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  dockerfile       = %q
  build_context    = %q
%s  entrypoint       = [%s]
  # Each rebuild's predecessor is collected at once, so every step counts its delete;
  # kept versions are TestAccEnvironmentVersions_*'s.
  keep_versions    = 0
}
`, dockerfile, dir, gpus, strings.Join(q, ", "))
}

// TestAccDaytona_buildInputsBakeOnce: each of gpu, dockerfile, a file of build_context
// (with the configuration unchanged) and entrypoint is a build input: changing it plans a
// new snapshot and bakes exactly one, whose CreateSnapshot carries the new value; the
// context is uploaded only when its content is new, and an unchanged configuration and
// folder plan nothing.
func TestAccDaytona_buildInputsBakeOnce(t *testing.T) {
	f := newDaytonaFixture(t)
	const addr = "trueforge_environment.df"
	dir := t.TempDir()
	writeFile := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("v1\n")
	df1 := "FROM platform\nCOPY app.txt /workspace/app.txt\n"
	df2 := "FROM ubuntu:24.04\nCOPY app.txt /opt/app.txt\nRUN true\n"
	snapshotChanges := statecheck.CompareValue(compare.ValuesDiffer())
	// built checks the environment's snapshot as the emulator got it, then counts one
	// create and one delete (of the snapshot it replaced) and uploads new contexts.
	built := func(check func(gpu int64, dockerfile string, hashes []string) error, creates, deletes, uploads int) resource.TestCheckFunc {
		counts := merge(snapshotWrites(creates, 0, deletes), map[string]int{contextUploads: uploads})
		if creates < 0 { // the first apply also makes the release and the default environment
			counts = map[string]int{contextUploads: uploads}
		}
		return resource.ComposeTestCheckFunc(func(*terraformState) error {
			env, err := f.store().GetEnvironment(t.Context(), "df")
			if err != nil {
				return err
			}
			in, ok := f.srv.SnapshotInputs(env.SnapshotID)
			if !ok {
				return fmt.Errorf("the emulator has no snapshot %s", env.SnapshotID)
			}
			return check(in.GPU, in.Dockerfile, in.ContextHashes)
		}, f.expectCounts(counts))
	}
	var firstHashes []string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config:            f.config(dockerfileEnvHCL(df1, dir, 0, "sleep", "infinity")),
				ConfigStateChecks: []statecheck.StateCheck{snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id"))},
				Check: built(func(gpu int64, d string, hashes []string) error {
					firstHashes = hashes
					if gpu != 0 || len(hashes) != 1 || !strings.HasSuffix(d, "ENTRYPOINT [\"sleep\",\"infinity\"]\n") {
						return fmt.Errorf("gpu %d, contextHashes %v, Dockerfile:\n%s", gpu, hashes, d)
					}
					return nil
				}, -1, 0, 1),
			},
			{
				// Daytona allows one GPU at most (buildcheck.go): the change is 0 to 1.
				Config:            f.config(dockerfileEnvHCL(df1, dir, 1, "sleep", "infinity")),
				ConfigPlanChecks:  rebuildPlanned(addr),
				ConfigStateChecks: []statecheck.StateCheck{snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id"))},
				Check: built(func(gpu int64, _ string, _ []string) error {
					if gpu != 1 {
						return fmt.Errorf("gpu %d, want 1", gpu)
					}
					return nil
				}, 1, 1, 0),
			},
			{
				Config:            f.config(dockerfileEnvHCL(df2, dir, 1, "sleep", "infinity")),
				ConfigPlanChecks:  rebuildPlanned(addr),
				ConfigStateChecks: []statecheck.StateCheck{snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id"))},
				Check: built(func(_ int64, d string, hashes []string) error {
					if !strings.HasPrefix(d, df2) || !slices.Equal(hashes, firstHashes) {
						return fmt.Errorf("contextHashes %v (first %v), Dockerfile:\n%s", hashes, firstHashes, d)
					}
					return nil
				}, 1, 1, 0),
			},
			{
				// The configuration is the same; one file of the folder changed.
				PreConfig:         func() { writeFile("v2\n") },
				Config:            f.config(dockerfileEnvHCL(df2, dir, 1, "sleep", "infinity")),
				ConfigPlanChecks:  rebuildPlanned(addr),
				ConfigStateChecks: []statecheck.StateCheck{snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id"))},
				Check: built(func(_ int64, _ string, hashes []string) error {
					if len(hashes) != 1 || slices.Equal(hashes, firstHashes) {
						return fmt.Errorf("contextHashes %v after a file changed (before %v)", hashes, firstHashes)
					}
					return nil
				}, 1, 1, 1),
			},
			{
				Config:            f.config(dockerfileEnvHCL(df2, dir, 1, "/usr/bin/env", "serve")),
				ConfigPlanChecks:  rebuildPlanned(addr),
				ConfigStateChecks: []statecheck.StateCheck{snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id"))},
				Check: built(func(_ int64, d string, _ []string) error {
					if !strings.HasSuffix(d, "ENTRYPOINT [\"/usr/bin/env\",\"serve\"]\n") {
						return fmt.Errorf("Dockerfile does not end with the new entrypoint:\n%s", d)
					}
					return nil
				}, 1, 1, 0),
			},
			{
				Config: f.config(dockerfileEnvHCL(df2, dir, 1, "/usr/bin/env", "serve")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: f.expectCounts(merge(snapshotWrites(0, 0, 0), map[string]int{contextUploads: 0})),
			},
		},
	})
}

// TestAccDaytona_refusesMoreThanOneGPU: Daytona's CreateSnapshot takes gpu 1 at most
// (@Max(1), create-snapshot.dto.ts:69-73, v0.190), so gpu = 2 on a Daytona provider is
// refused at plan, on gpu, saying so, and nothing is built.
func TestAccDaytona_refusesMoreThanOneGPU(t *testing.T) {
	f := newDaytonaFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config(""), Check: func(*terraformState) error { f.srv.ResetCounts(); return nil }},
			{
				Config: f.config(dockerfileEnvHCL("FROM platform\n", t.TempDir(), 2, "sleep", "infinity")),
				ExpectError: regexp.MustCompile(`(?s)` + spaced("Too Many GPUs").String() + ".*" +
					spaced("gpu = 2, but Daytona allows at most 1 GPU per sandbox").String() + ".*" + spaced("Set gpu = 1.").String()),
			},
		},
	})
	if n := f.srv.Count("POST /snapshots"); n != 0 {
		t.Fatalf("%d snapshot creates after the refused plan; want none", n)
	}
}

// TestAccEnvironment_localRefusesGPU: a GPU on the local backend is refused (at plan time
// once the sandbox provider exists, here where it is created with the environment) with
// the attribute named and the way out.
func TestAccEnvironment_localRefusesGPU(t *testing.T) {
	f := newFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{{
			Config:      f.config(envHCL("true", "  gpu = 1")),
			ExpectError: spaced("The local backend has no GPUs"),
		}},
	})
}
