package daytona_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

func testBackend() *daytona.Backend {
	return daytona.NewBackend(daytona.WithRetryPolicy(fastRetry), daytona.WithPollInterval(5*time.Millisecond))
}

// A key with exactly the three scopes the product asks for is accepted, with a warning
// that names the delete scopes it lacks and what that costs; a key with them gets none;
// a key missing a required scope is refused, naming each missing one.
func TestCheckCredentials(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t)
	srv.AddKey("dtn_three_scopes", "write:sandboxes", "write:snapshots", "manage:secrets")
	srv.AddKey("dtn_partial_scopes_key", "write:sandboxes", "read:volumes")
	b := testBackend()
	p := sandbox.ProviderConfig{Name: "daytona", Type: daytona.Type, APIURL: srv.URL()}

	p.APIKey = "dtn_three_scopes"
	scopes, problems := b.CheckCredentials(testCtx(t), p)
	if len(problems) != 1 || !problems[0].Warning || problems[0].Summary != "Daytona API Key Cannot Delete" ||
		!strings.Contains(problems[0].Detail, "delete:snapshots and delete:sandboxes") || len(scopes) != 3 {
		t.Fatalf("three scopes: scopes %v, problems %+v; want one warning naming both delete scopes", scopes, problems)
	}
	p.APIKey = daytonatest.DefaultKey
	if _, problems := b.CheckCredentials(testCtx(t), p); len(problems) != 0 {
		t.Fatalf("the full key: problems %+v; want none", problems)
	}
	p.APIKey = "dtn_partial_scopes_key"
	_, problems = b.CheckCredentials(testCtx(t), p)
	if len(problems) != 1 || problems[0].Warning || problems[0].Attribute != "api_key" ||
		problems[0].Detail != daytona.MissingScopesDetail("key-dtn_…_key", []string{"write:snapshots", "manage:secrets"}) {
		t.Fatalf("partial key: %+v; want one error naming write:snapshots and manage:secrets", problems)
	}
	p.APIKey = "dtn_unknown"
	if _, problems := b.CheckCredentials(testCtx(t), p); len(problems) != 1 || problems[0].Summary != "Invalid Daytona API Key" {
		t.Fatalf("unknown key: %+v", problems)
	}
	p.APIKey = ""
	if _, problems := b.CheckCredentials(testCtx(t), p); len(problems) != 1 || problems[0].Summary != "Missing API Key" {
		t.Fatalf("no key: %+v", problems)
	}
}

// CheckEnvironment refuses more allowed domains than domainAllowList takes and warns
// about sizes above an organization's default caps.
func TestCheckEnvironment(t *testing.T) {
	t.Parallel()
	b := testBackend()
	var domains []string
	for i := range daytona.MaxDomains + 1 {
		domains = append(domains, fmt.Sprintf("h%d.example.com", i))
	}
	got := b.CheckEnvironment(t.Context(), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Name: "big",
		Spec: sandbox.SnapshotSpec{CPU: 8, MemoryGB: 1, DiskGB: 3}, AllowDomains: domains})
	if len(got) != 2 || got[0].Warning || got[0].Attribute != "network.allow_domains" || !got[1].Warning ||
		!strings.Contains(got[1].Detail, "cpu = 8 (default cap 4)") {
		t.Fatalf("problems %+v", got)
	}
	if got := b.CheckEnvironment(t.Context(), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Name: "ok",
		Spec: sandbox.SnapshotSpec{CPU: 1, MemoryGB: 1, DiskGB: 3}, AllowDomains: domains[:daytona.MaxDomains]}); len(got) != 0 {
		t.Fatalf("a default-sized environment with %d domains: %+v", daytona.MaxDomains, got)
	}
}

// TestCheckEnvironmentAllowDomains: the plan check applies Daytona's domainAllowList
// pattern (network-validation.util.ts:49, v0.190) to every allowed domain: an entry it
// refuses is an error on network.allow_domains naming the entry and the fix.
func TestCheckEnvironmentAllowDomains(t *testing.T) {
	t.Parallel()
	b := testBackend()
	check := func(domains ...string) []sandbox.Problem {
		return b.CheckEnvironment(t.Context(), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Name: "net",
			Spec: sandbox.SnapshotSpec{CPU: 1, MemoryGB: 1, DiskGB: 3}, AllowDomains: domains})
	}
	for _, d := range []string{"localhost", "10.0.0.1", "example.com.", "bücher.de", "example.xn--p1ai", "*.com", "a_b.example.com", "-a.example.com"} {
		got := check("api.example.com", d)
		if len(got) != 1 || got[0].Warning || got[0].Attribute != "network.allow_domains" ||
			!strings.Contains(got[0].Detail, fmt.Sprintf("%q", d)) || !strings.Contains(got[0].Detail, "Give the host's full name") {
			t.Errorf("%q: %+v; want one error on network.allow_domains naming it and the fix", d, got)
		}
	}
	if got := check("api.example.com", "*.example.com", "A.EXAMPLE.COM", "xn--bcher-kva.de"); len(got) != 0 {
		t.Errorf("domains Daytona accepts: %+v", got)
	}
}

// TestSecretName pins the naming rule of Daytona secrets: Daytona's name pattern, and
// unambiguous across environment and variable names.
func TestSecretName(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)
	seen := map[string]string{}
	for _, c := range [][2]string{{"py", "GITHUB_TOKEN"}, {"a--b", "C"}, {"a", "b__C"}, {"py_github", "TOKEN"}, {"0env", "_X"}} {
		n := daytona.SecretName(c[0], c[1])
		if !re.MatchString(n) {
			t.Errorf("%v -> %q does not match Daytona's secret name rule", c, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("%v and %s both map to %q", c, prev, n)
		}
		seen[n] = fmt.Sprint(c)
		i := strings.LastIndex(n, "--")
		if n[len("trueforge-"):i] != c[0] || n[i+2:] != c[1] {
			t.Errorf("%q does not split back into %v", n, c)
		}
	}
}

// The secret store creates, reads, rotates (one update), recreates what was deleted
// outside, and deletes; a name left behind by a lost answer is adopted.
func TestSecretStore(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t)
	ctx := testCtx(t)
	ss, err := testBackend().Secrets(ctx, sandbox.ProviderConfig{Name: "d", APIURL: srv.URL(), APIKey: daytonatest.DefaultKey})
	if err != nil {
		t.Fatal(err)
	}
	v := sandbox.SecretValue{Environment: "py", EnvName: "TOKEN", Value: "v1", Hosts: []string{"api.github.com"}}
	rs, err := ss.Create(ctx, v)
	if err != nil || rs.ID == "" || len(rs.Hosts) != 1 {
		t.Fatalf("create: %+v %v", rs, err)
	}
	got, err := ss.Get(ctx, sandbox.RemoteSecret{}, "py", "TOKEN") // by name
	if err != nil || got == nil || got.ID != rs.ID {
		t.Fatalf("get by name: %+v %v", got, err)
	}
	// A create whose answer was lost: the second create adopts the first secret.
	again, err := ss.Create(ctx, sandbox.SecretValue{Environment: "py", EnvName: "TOKEN", Value: "v2", Hosts: []string{"x.example.com"}})
	if err != nil || again.ID != rs.ID || again.Hosts[0] != "x.example.com" {
		t.Fatalf("adopting create: %+v %v", again, err)
	}
	v.Value = "v3"
	up, err := ss.Update(ctx, again, v, true)
	if err != nil || up.ID != rs.ID || !up.Updated.After(again.Updated) && !up.Updated.Equal(again.Updated) {
		t.Fatalf("rotate: %+v %v", up, err)
	}
	if err := ss.Delete(ctx, up, "py", "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if got, err := ss.Get(ctx, up, "py", "TOKEN"); err != nil || got != nil {
		t.Fatalf("after delete: %+v %v", got, err)
	}
	// Deleted outside: an update makes it again.
	re, err := ss.Update(ctx, up, v, false)
	if err != nil || re.ID == "" || re.ID == up.ID {
		t.Fatalf("update of a deleted secret: %+v %v", re, err)
	}
	if err := ss.Delete(ctx, sandbox.RemoteSecret{}, "py", "TOKEN"); err != nil {
		t.Fatalf("delete by name: %v", err)
	}
	if err := ss.Delete(ctx, sandbox.RemoteSecret{}, "py", "TOKEN"); err != nil {
		t.Fatalf("delete of a missing secret: %v", err)
	}
}

// Daytona's API errors are sandbox.APIErrors: callers say what to check by the backend's
// name without knowing the backend.
func TestAPIErrorIsBackendError(t *testing.T) {
	var err error = &daytona.APIError{Status: 403}
	var api sandbox.APIError
	if !errors.As(err, &api) || api.Backend() != "Daytona" {
		t.Fatalf("%T is not a sandbox.APIError naming Daytona", err)
	}
}
