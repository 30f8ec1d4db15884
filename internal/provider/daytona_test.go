package provider

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// The acceptance suite of type = "daytona": the provider runs in-process against the
// Daytona emulator (daytonatest), whose per-route counters show exactly which API calls
// each plan and apply made.

// daytonaTestRetry keeps client backoff short; server-requested waits (Retry-After on
// 429s) are still honoured, so the fault tests really wait them out.
var daytonaTestRetry = daytona.RetryPolicy{MaxAttempts: 6, BaseDelay: 5 * time.Millisecond,
	MaxDelay: 50 * time.Millisecond, MaxServerWait: 5 * time.Second, StateChangeWait: 10 * time.Second}

// daytonaFixture is a control plane whose sandbox provider is the emulator.
type daytonaFixture struct {
	*controlPlaneFixture
	srv       *daytonatest.Server
	key       string
	providers map[string]func() (tfprotov6.ProviderServer, error)
	// warnings are the refresh warnings of the providers' servers (warnings_acc_test.go).
	warnings *warningRecorder
}

func newDaytonaFixture(t testing.TB, opts ...daytonatest.Option) *daytonaFixture {
	t.Helper()
	srv := daytonatest.NewServer(t, opts...)
	reg := backends.Default()
	reg[daytona.Type] = daytona.NewBackend(daytona.WithPollInterval(10*time.Millisecond), daytona.WithRetryPolicy(daytonaTestRetry))
	p := &trueforgeProvider{version: "test", backends: reg}
	w := &warningRecorder{}
	return &daytonaFixture{
		controlPlaneFixture: newFixture(t),
		srv:                 srv,
		key:                 daytonatest.DefaultKey,
		providers:           map[string]func() (tfprotov6.ProviderServer, error){"trueforge": w.wrap(providerserver.NewProtocol6WithError(p))},
		warnings:            w,
	}
}

// config joins the provider block, the Daytona sandbox provider and body.
func (f *daytonaFixture) config(body string) string {
	return f.providerBlock(f.owner) + fmt.Sprintf(`
resource "trueforge_sandbox_provider" "daytona" {
  name    = "daytona"
  type    = "daytona"
  api_url = %q
  api_key = %q
}
`, f.srv.URL(), f.key) + body
}

// envHCL renders environment name on the Daytona provider.
func daytonaEnvHCL(name, script, extra string) string {
	return fmt.Sprintf(`
resource "trueforge_environment" %[1]q {
  name             = %[1]q
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  build_script     = %[2]q
%[3]s
}
`, name, script, extra)
}

func daytonaSecretHCL(value string, hosts ...string) string {
	q := make([]string, len(hosts))
	for i, h := range hosts {
		q[i] = fmt.Sprintf("%q", h)
	}
	return fmt.Sprintf(`
resource "trueforge_secret" "gh" {
  environment = trueforge_environment.py.name
  env_name    = "GITHUB_TOKEN"
  hosts       = [%s]
  value       = %q
}
`, strings.Join(q, ", "), value)
}

// expectCounts checks the emulator's per-route counters since the last reset, then resets
// them for the next step.
func (f *daytonaFixture) expectCounts(want map[string]int) func(*terraformState) error {
	return func(*terraformState) error {
		defer f.srv.ResetCounts()
		var errs []string
		for route, n := range want {
			if got := f.srv.Count(route); got != n {
				errs = append(errs, fmt.Sprintf("%s: %d requests, want %d", route, got, n))
			}
		}
		if len(errs) > 0 {
			slices.Sort(errs)
			return fmt.Errorf("unexpected Daytona API requests:\n%s", strings.Join(errs, "\n"))
		}
		return nil
	}
}

// snapshotWrites are the routes that create, change or remove a snapshot.
func snapshotWrites(create, activate, del int) map[string]int {
	return map[string]int{
		"POST /snapshots":               create,
		"POST /snapshots/{id}/activate": activate,
		"DELETE /snapshots/{id}":        del,
	}
}

func merge(ms ...map[string]int) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// spaced turns a literal text into a pattern that matches it however Terraform wrapped it.
func spaced(text string) *regexp.Regexp {
	words := strings.Fields(text)
	for i, w := range words {
		words[i] = regexp.QuoteMeta(w)
	}
	return regexp.MustCompile(strings.Join(words, `\s+`))
}

func TestAccDaytona_missingScopesStoresNothing(t *testing.T) {
	f := newDaytonaFixture(t)
	f.key = "dtn_partial_scopes_key"
	f.srv.AddKey(f.key, "write:sandboxes", "read:volumes")
	// The emulator names keys "key-<first 4>…<last 4>" in GET /api-keys/current.
	detail := daytona.MissingScopesDetail("key-dtn_…_key", []string{"write:snapshots", "manage:secrets"})
	want := regexp.MustCompile(`Error: Daytona API Key Missing Scopes[\s\S]*` + spaced(detail).String())
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{{
			Config:      f.config(""),
			ExpectError: want,
		}},
		CheckDestroy: func(*terraformState) error {
			if _, err := f.store().OnlySandboxProvider(t.Context()); err == nil {
				return fmt.Errorf("a sandbox provider was stored although the key lacks scopes")
			}
			if n := f.srv.Count("POST /snapshots") + f.srv.Count("POST /secret"); n != 0 {
				return fmt.Errorf("%d writes reached Daytona although the key lacks scopes", n)
			}
			if n := f.srv.Count("GET /api-keys/current"); n == 0 {
				return fmt.Errorf("the key was never checked")
			}
			return nil
		},
	})
}

// TestAccDaytona_keyRotationChecksScopes: a new key is checked like the first one; one
// lacking a scope is refused and the stored key stays the old one.
func TestAccDaytona_keyRotationChecksScopes(t *testing.T) {
	f := newDaytonaFixture(t)
	good := f.config("")
	f.srv.AddKey("dtn_rotated_partial", "write:sandboxes", "write:snapshots")
	f.key = "dtn_rotated_partial"
	partial := f.config("")
	f.key = daytonatest.DefaultKey
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: good},
			{
				Config:      partial,
				ExpectError: regexp.MustCompile(`Daytona API Key Missing Scopes[\s\S]*lacks the scope\(s\)\s+manage:secrets\.`),
			},
			{
				PreConfig: func() {
					if k, _ := storedAPIKey(t, f.controlPlaneFixture); k != daytonatest.DefaultKey {
						t.Fatalf("the refused key replaced the stored one (%q)", k)
					}
				},
				Config:   good,
				PlanOnly: true,
			},
		},
	})
}

func TestAccDaytona_environmentAndSecretMapping(t *testing.T) {
	f := newDaytonaFixture(t)
	const envAddrPy = "trueforge_environment.py"
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	secretName := daytona.SecretName("py", "GITHUB_TOKEN")
	var snapName string
	remember := func(*terraformState) error {
		env, err := f.store().GetEnvironment(t.Context(), "py")
		snapName = env.SnapshotID
		return err
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		// Destroying everything leaves nothing behind in Daytona.
		CheckDestroy: func(*terraformState) error {
			if names := f.srv.SnapshotNames(); len(names) != 0 {
				return fmt.Errorf("snapshots left in Daytona after destroy: %v", names)
			}
			if _, ok := f.srv.SecretValue(secretName); ok {
				return fmt.Errorf("secret %s left in Daytona after destroy", secretName)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: f.config(daytonaEnvHCL("py", "pip install requests", `  env = { MODE = "a" }`) + daytonaSecretHCL("ghp_first", "api.github.com")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("trueforge_sandbox_provider.daytona", tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					statecheck.ExpectKnownValue("trueforge_sandbox_provider.daytona", tfjsonpath.New("scopes"), knownvalue.ListSizeExact(len(daytonatest.AllPermissions))),
					statecheck.ExpectKnownValue(envAddrPy, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					snapshotStable.AddStateValue(envAddrPy, tfjsonpath.New("snapshot_id")),
				},
				Check: func(s *terraformState) error {
					if err := remember(s); err != nil {
						return err
					}
					// The snapshot is the Daytona snapshot named by the build hash, built from
					// a Dockerfile carrying the build script, run as root.
					if st := f.srv.SnapshotState(snapName); st != "active" {
						return fmt.Errorf("Daytona snapshot %s is %q, want active", snapName, st)
					}
					if df := f.srv.SnapshotDockerfile(snapName); !strings.HasPrefix(df, "FROM "+daytona.DefaultReleaseImage+"\nUSER root\nRUN ") {
						return fmt.Errorf("dockerfile:\n%s", df)
					}
					// Release, default environment, py.
					if n := len(f.srv.SnapshotNames()); n != 3 {
						return fmt.Errorf("Daytona has %d snapshots (%v), want 3", n, f.srv.SnapshotNames())
					}
					if v, ok := f.srv.SecretValue(secretName); !ok || v != "ghp_first" {
						return fmt.Errorf("Daytona secret %s = %q, %v", secretName, v, ok)
					}
					if h, _ := f.srv.SecretHosts(secretName); !slices.Equal(h, []string{"api.github.com"}) {
						return fmt.Errorf("Daytona secret hosts %v", h)
					}
					f.srv.ResetCounts()
					return nil
				},
			},
			{
				// env is applied live: zero snapshot writes and no build log reads. (Each
				// refresh reads the snapshot once; that is the only snapshot traffic.)
				Config:            f.config(daytonaEnvHCL("py", "pip install requests", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_first", "api.github.com")),
				ConfigPlanChecks:  plannedAction(envAddrPy, plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(envAddrPy, tfjsonpath.New("snapshot_id"))},
				Check: f.expectCounts(merge(snapshotWrites(0, 0, 0), map[string]int{
					"GET /snapshots/{id}/build-logs-url": 0, "PATCH /secret/{id}": 0, "POST /secret": 0,
				})),
			},
			{
				// A build_script change: exactly one POST /snapshots; the old snapshot is
				// kept as a previous version (keep_versions defaults to 3), not deleted.
				Config: f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_first", "api.github.com")),
				Check: resource.ComposeTestCheckFunc(
					f.expectCounts(merge(snapshotWrites(1, 0, 0), map[string]int{"PATCH /secret/{id}": 0})),
					remember,
				),
			},
			{
				// A secret rotation: one PATCH, no rebuild, no new secret.
				Config: f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(secretAddr, plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction(envAddrPy, plancheck.ResourceActionNoop),
					},
				},
				Check: resource.ComposeTestCheckFunc(
					f.expectCounts(merge(snapshotWrites(0, 0, 0), map[string]int{"PATCH /secret/{id}": 1, "POST /secret": 0, "DELETE /secret/{id}": 0})),
					func(*terraformState) error {
						if v, _ := f.srv.SecretValue(secretName); v != "ghp_second" {
							return fmt.Errorf("Daytona secret value after rotation = %q", v)
						}
						return nil
					},
				),
			},
			{
				// Import finds the Daytona secret by its derived name (the import has no id).
				ResourceName:            secretAddr,
				ImportState:             true,
				ImportStateId:           "py/GITHUB_TOKEN",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"value"},
			},
			{
				// Drift: the snapshot deleted in Daytona. Refresh sees it, the plan rebuilds
				// it, and apply converges with one POST /snapshots.
				PreConfig: func() {
					if !f.srv.DeleteSnapshot(snapName) {
						t.Fatalf("snapshot %s not in the emulator", snapName)
					}
					f.srv.ResetCounts()
				},
				Config: f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(envAddrPy, plancheck.ResourceActionUpdate),
						plancheck.ExpectUnknownValue(envAddrPy, tfjsonpath.New("snapshot_id")),
					},
				},
				Check: f.expectCounts(snapshotWrites(1, 0, 0)),
			},
			{
				// Drift: the snapshot went inactive. The plan proposes a rebuild; apply
				// re-activates it instead (no POST /snapshots).
				PreConfig:        func() { f.srv.DeactivateSnapshot(snapName) },
				Config:           f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: plannedAction(envAddrPy, plancheck.ResourceActionUpdate),
				Check: resource.ComposeTestCheckFunc(
					f.expectCounts(snapshotWrites(0, 1, 0)),
					func(*terraformState) error {
						if st := f.srv.SnapshotState(snapName); st != "active" {
							return fmt.Errorf("snapshot is %q after apply, want active", st)
						}
						return nil
					},
				),
			},
			{
				// Drift: the Daytona secret's hosts changed there. The plan restores them.
				PreConfig:        func() { f.srv.SetSecretHosts(secretName, "evil.example.com") },
				Config:           f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
				Check: func(*terraformState) error {
					if h, _ := f.srv.SecretHosts(secretName); !slices.Equal(h, []string{"api.github.com"}) {
						return fmt.Errorf("hosts after repair: %v", h)
					}
					return nil
				},
			},
			{
				// Drift: the Daytona secret deleted there. Apply recreates it with the value,
				// and the refresh warns that running sandboxes keep the old placeholder
				// (Daytona fixes a sandbox's placeholders when it starts).
				PreConfig: func() {
					f.srv.DeleteSecret(secretName)
					f.warnings.reset()
				},
				Config:           f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
				Check: func(*terraformState) error {
					if v, ok := f.srv.SecretValue(secretName); !ok || v != "ghp_second" {
						return fmt.Errorf("secret after repair = %q, %v", v, ok)
					}
					if f.warnings.find("Daytona Secret Deleted Outside Terraform", secretName, "new placeholder", "keep the old one") == nil {
						return fmt.Errorf("no warning that running sandboxes keep the old placeholder; warnings: %q", f.warnings.summaries())
					}
					return nil
				},
			},
			{
				// Drift: the secret's value rotated in Daytona. A state `value` reads as
				// changed, and apply sends the configured one again.
				PreConfig:        func() { f.srv.SetSecretValue(secretName, "tampered") },
				Config:           f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: plannedAction(secretAddr, plancheck.ResourceActionUpdate),
				Check: func(*terraformState) error {
					if v, _ := f.srv.SecretValue(secretName); v != "ghp_second" {
						return fmt.Errorf("secret after repair = %q", v)
					}
					return nil
				},
			},
			{
				// Drift: the default environment's snapshot deleted in Daytona. The provider
				// reads as Degraded and apply rebuilds it (one POST /snapshots).
				PreConfig: func() {
					def, err := f.store().GetEnvironment(t.Context(), defaultEnvironmentName)
					if err != nil || !f.srv.DeleteSnapshot(def.SnapshotID) {
						t.Fatalf("deleting the default snapshot: %v", err)
					}
					f.srv.ResetCounts()
				},
				Config:           f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`) + daytonaSecretHCL("ghp_second", "api.github.com")),
				ConfigPlanChecks: plannedAction("trueforge_sandbox_provider.daytona", plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("trueforge_sandbox_provider.daytona", tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				},
				Check: f.expectCounts(snapshotWrites(1, 0, 0)),
			},
			{
				// Removing the secret deletes the Daytona secret.
				Config: f.config(daytonaEnvHCL("py", "pip install requests httpx", `  env = { MODE = "b" }`)),
				Check: func(*terraformState) error {
					if _, ok := f.srv.SecretValue(secretName); ok {
						return fmt.Errorf("Daytona secret %s survived the delete", secretName)
					}
					return nil
				},
			},
		},
	})
}

func TestAccDaytona_identicalInputsShareOneSnapshot(t *testing.T) {
	f := newDaytonaFixture(t)
	same := statecheck.CompareValuePairs("trueforge_environment.a", tfjsonpath.New("snapshot_id"),
		"trueforge_environment.b", tfjsonpath.New("snapshot_id"), compare.ValuesSame())
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{{
			Config: f.config(daytonaEnvHCL("a", "apt-get install -y jq", `  env = { WHO = "a" }`) +
				daytonaEnvHCL("b", "apt-get install -y jq", `  env = { WHO = "b" }`)),
			ConfigStateChecks: []statecheck.StateCheck{same},
			Check: func(*terraformState) error {
				// Release + default environment + one snapshot shared by a and b.
				if n := f.srv.Count("POST /snapshots"); n != 3 {
					return fmt.Errorf("POST /snapshots = %d, want 3", n)
				}
				if names := f.srv.SnapshotNames(); len(names) != 3 {
					return fmt.Errorf("Daytona snapshots %v, want 3", names)
				}
				return nil
			},
		}},
	})
}

func TestAccDaytona_buildTimeoutThenRerunConverges(t *testing.T) {
	f := newDaytonaFixture(t)
	withTimeout := func(d string) string {
		return f.config(daytonaEnvHCL("slow", "make world", fmt.Sprintf("  timeouts = { create = %q }", d)))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config("")},
			{
				// The build takes 4 s; the apply gives it 1 s and fails cleanly: the error
				// says the build goes on, and the environment is saved as Building.
				PreConfig:   func() { f.srv.DelayNextBuild(4 * time.Second) },
				Config:      withTimeout("1s"),
				ExpectError: spaced("is still Building when the wait ended"),
			},
			{
				// The rerun picks the running build up: no second POST /snapshots, one
				// snapshot per build input.
				Config: withTimeout("2m"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("trueforge_environment.slow", tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				},
				Check: func(*terraformState) error {
					if n := f.srv.Count("POST /snapshots"); n != 3 {
						return fmt.Errorf("POST /snapshots = %d over the test, want 3 (release, default, slow)", n)
					}
					if names := f.srv.SnapshotNames(); len(names) != 3 {
						return fmt.Errorf("Daytona snapshots %v, want 3", names)
					}
					return nil
				},
			},
		},
	})
}

func TestAccDaytona_survivesServerErrorsAndRateLimits(t *testing.T) {
	f := newDaytonaFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{{
			PreConfig: func() {
				f.srv.InjectFaults("GET /api-keys/current", 2, 503)
				f.srv.InjectFaults("POST /snapshots", 2, 429)
				f.srv.InjectFaults("GET /snapshots/{id}", 4, 502)
				f.srv.InjectFaults("POST /secret", 1, 429)
			},
			Config: f.config(daytonaEnvHCL("py", "true", "") + daytonaSecretHCL("ghp_x", "api.github.com")),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("trueforge_environment.py", tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
			Check: func(*terraformState) error {
				// Every fault was met and retried to a success on each route.
				for route, faults := range map[string]int{"GET /api-keys/current": 2, "POST /snapshots": 2, "GET /snapshots/{id}": 4, "POST /secret": 1} {
					if n := f.srv.Count(route); n <= faults {
						return fmt.Errorf("%s: %d requests, want more than the %d faults", route, n, faults)
					}
				}
				// Retried 429s on POST /snapshots did not create duplicates.
				if names := f.srv.SnapshotNames(); len(names) != 3 {
					return fmt.Errorf("Daytona snapshots %v, want 3", names)
				}
				return nil
			},
		}},
	})
}

// TestAccDaytona_unreachableRefreshFails: when Daytona keeps failing (past the retries),
// the refresh fails with a diagnostic instead of reading the snapshot as Failed and
// planning a rebuild; once Daytona answers again the plan is empty.
func TestAccDaytona_unreachableRefreshFails(t *testing.T) {
	f := newDaytonaFixture(t)
	cfg := f.config(daytonaEnvHCL("py", "true", ""))
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: cfg},
			{
				PreConfig:   func() { f.srv.InjectFaults("GET /snapshots/{id}", daytonaTestRetry.MaxAttempts, 503) },
				Config:      cfg,
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`Error Reading Environment Snapshot`),
			},
			{Config: cfg, PlanOnly: true},
		},
	})
}

func TestAccDaytona_planTimeLimits(t *testing.T) {
	f := newDaytonaFixture(t)
	domains := make([]string, 11)
	for i := range domains {
		domains[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example.com", i))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config("")},
			{
				Config:      f.config(daytonaEnvHCL("net", "", fmt.Sprintf("  network = { allow_domains = [%s] }", strings.Join(domains, ", ")))),
				PlanOnly:    true,
				ExpectError: spaced("network.allow_domains has 11 entries; Daytona's domainAllowList takes at most 10."),
			},
			{
				// Ten is allowed, and block_all maps through as well.
				Config: f.config(daytonaEnvHCL("net", "", fmt.Sprintf("  network = { allow_domains = [%s] }", strings.Join(domains[:10], ", ")))),
				Check: func(*terraformState) error {
					env, err := f.store().GetEnvironment(t.Context(), "net")
					if err != nil {
						return err
					}
					if len(env.AllowDomains) != 10 {
						return fmt.Errorf("stored allow list %v", env.AllowDomains)
					}
					return nil
				},
			},
		},
	})
}

// TestAccDaytona_imageChangeBakesNewSnapshot: image is a build input like the others (the
// local backend accepts only "platform", so it is covered here): changing it alone plans an
// in-place update with snapshot_id unknown and bakes one snapshot FROM the new image.
func TestAccDaytona_imageChangeBakesNewSnapshot(t *testing.T) {
	f := newDaytonaFixture(t)
	const addr = "trueforge_environment.img"
	snapshotChanges := statecheck.CompareValue(compare.ValuesDiffer())
	dockerfileFrom := func(image string) func(*terraformState) error {
		return func(*terraformState) error {
			env, err := f.store().GetEnvironment(t.Context(), "img")
			if err != nil {
				return err
			}
			if df := f.srv.SnapshotDockerfile(env.SnapshotID); !strings.HasPrefix(df, "FROM "+image+"\n") {
				return fmt.Errorf("snapshot %s dockerfile:\n%s\nwant FROM %s", env.SnapshotID, df, image)
			}
			return nil
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(daytonaEnvHCL("img", "true", `  image = "python:3.12-slim"`)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id")),
				},
				Check: resource.ComposeTestCheckFunc(dockerfileFrom("python:3.12-slim"), func(*terraformState) error {
					f.srv.ResetCounts()
					return nil
				}),
			},
			{
				Config:           f.config(daytonaEnvHCL("img", "true", `  image = "python:3.13-slim"`)),
				ConfigPlanChecks: rebuildPlanned(addr, "status"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("image"), knownvalue.StringExact("python:3.13-slim")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					snapshotChanges.AddStateValue(addr, tfjsonpath.New("snapshot_id")),
				},
				// One new snapshot; the old one is kept as a previous version.
				Check: resource.ComposeTestCheckFunc(dockerfileFrom("python:3.13-slim"), f.expectCounts(snapshotWrites(1, 0, 0))),
			},
		},
	})
}
