package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// seedSharing adds, beside seedNoSandbox's, Ready environments gpu (no secrets) and b-env
// (team_b's, with a secret), and two agents on gpu: a-agent of team_a and b-agent of
// team_b. Owners are set by hand, as another team's apply would have written them.
func seedSharing(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	harnesstest.AddEnvironment(t, st, "gpu", "Ready")
	harnesstest.AddEnvironment(t, st, "b-env", "Ready")
	harnesstest.AddAgent(t, st, "a-agent", "gpu", harnesstest.AgentSpec{"model": script(), "sandbox": harnesstest.Sandbox("gpu", 5, 10, 20)})
	harnesstest.AddAgent(t, st, "b-agent", "gpu", harnesstest.AgentSpec{"model": script(), "sandbox": harnesstest.Sandbox("gpu", 5, 10, 20)})
	for _, q := range []string{
		`INSERT INTO owners(name, created_at) VALUES ('team_a', 0), ('team_b', 0) ON CONFLICT DO NOTHING`,
		`UPDATE environments SET owner = 'team_b' WHERE name = 'b-env'`,
		`UPDATE agents SET owner = 'team_a' WHERE name = 'a-agent'`,
		`UPDATE agents SET owner = 'team_b' WHERE name = 'b-agent'`,
	} {
		if _, err := st.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	must(t, st.CreateSecret(ctx, store.Secret{ID: store.SecretID("b-env", "B_TOKEN"), Environment: "b-env", EnvName: "B_TOKEN",
		Hosts: []string{"b.example.com"}, ValueEnc: []byte("sealed")}))
}

func envNames(t *testing.T, f *fixture, query string) []string {
	t.Helper()
	r := f.req("GET", "/api/v1/environments"+query, "alice", nil)
	want(t, "environments"+query, r, http.StatusOK, "")
	var body struct{ Environments []struct{ Name string } }
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range body.Environments {
		out = append(out, e.Name)
	}
	return out
}

// checkSharingAPI is issue 23's attack through the API: a user's session of team A's
// agent cannot pick team B's environment, which has a secret (422 naming the field),
// and the environment list does not offer it; once team B shares it, both do. owner is
// a store that may change team B's environment.
func checkSharingAPI(t *testing.T, f *fixture, owner *store.Store) {
	ctx := context.Background()
	if got := envNames(t, f, "?agent=a-agent"); !slices.Contains(got, "gpu") || slices.Contains(got, "b-env") {
		t.Fatalf("environments for team A's agent: %v; want gpu and not b-env", got)
	}
	if got := envNames(t, f, ""); slices.Contains(got, "b-env") {
		t.Fatalf("environments for no agent: %v; want no environment with unshared secrets", got)
	}
	if got := envNames(t, f, "?agent=b-agent"); !slices.Contains(got, "b-env") {
		t.Fatalf("environments for team B's agent: %v; want b-env", got)
	}
	want(t, "an unknown agent", f.req("GET", "/api/v1/environments?agent=nope", "alice", nil), http.StatusUnprocessableEntity, api.CodeUnknownAgent)

	r := f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "a-agent", "environment": "b-env"})
	want(t, "team A's agent on team B's environment", r, http.StatusUnprocessableEntity, api.CodeBadEnvironment)
	if msg := string(r.body); !strings.Contains(msg, `field \"environment\"`) || !strings.Contains(msg, `\"team_b\" does not share with \"team_a\"`) {
		t.Fatalf("refusal %s; want the field and both owners named", msg)
	}
	want(t, "team B's agent on its own environment", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "b-agent", "environment": "b-env"}),
		http.StatusCreated, "")

	env, err := owner.GetEnvironment(ctx, "b-env")
	must(t, err)
	env.SharedWith = []string{"team_a"}
	must(t, owner.UpdateEnvironment(ctx, env))
	if got := envNames(t, f, "?agent=a-agent"); !slices.Contains(got, "b-env") {
		t.Fatalf("environments for team A's agent once shared: %v; want b-env", got)
	}
	want(t, "team A's agent on team B's shared environment", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "a-agent", "environment": "b-env"}),
		http.StatusCreated, "")
}

func TestSessionEnvironmentMustBeShared(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	seedSharing(t, f.st)
	checkSharingAPI(t, f, f.st)
}

// The same on PostgreSQL, the API serving as a harness role.
func TestSessionEnvironmentMustBeSharedOnPostgreSQL(t *testing.T) {
	owner, harnessURL := harnessRoleDB(t, func(owner *store.Store) { seedSharing(t, owner) })
	checkSharingAPI(t, newFixture(t, fixtureOpts{st: storetest.Open(t, harnessURL)}), owner)
}

// The volume route: team B's environment v-env has no secrets (anyone may use it) but
// mounts team B's volume cache, which it does not share. Team A's agent is not offered
// v-env and may not pick it (422 naming the field and the volume); team B's agent may;
// once team B shares the volume with team A, team A's may too.
func TestSessionEnvironmentVolumesMustBeShared(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	seedSharing(t, f.st)
	ctx := context.Background()
	harnesstest.AddEnvironment(t, f.st, "v-env", "Ready")
	must(t, f.st.CreateVolume(ctx, store.Volume{Name: "cache", Provider: "local", Owner: "team_b", RemoteID: "cache"}))
	env, err := f.st.GetEnvironment(ctx, "v-env")
	must(t, err)
	env.Owner = "team_b"
	env.Settings.Volumes = []store.EnvironmentVolume{{Volume: "cache", MountPath: "/data"}}
	must(t, f.st.UpdateEnvironment(ctx, env))
	if _, err := f.st.Exec(ctx, `UPDATE environments SET owner = 'team_b' WHERE name = 'v-env'`); err != nil {
		t.Fatal(err)
	}

	if got := envNames(t, f, "?agent=a-agent"); slices.Contains(got, "v-env") {
		t.Fatalf("environments for team A's agent: %v; want no v-env (it mounts team B's unshared volume)", got)
	}
	if got := envNames(t, f, "?agent=b-agent"); !slices.Contains(got, "v-env") {
		t.Fatalf("environments for team B's agent: %v; want v-env", got)
	}
	r := f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "a-agent", "environment": "v-env"})
	want(t, "team A's agent on an environment mounting team B's volume", r, http.StatusUnprocessableEntity, api.CodeBadEnvironment)
	if msg := string(r.body); !strings.Contains(msg, `field \"environment\"`) || !strings.Contains(msg, `volume \"cache\"`) {
		t.Fatalf("refusal %s; want the field and the volume named", msg)
	}
	want(t, "team B's agent on its own environment", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "b-agent", "environment": "v-env"}),
		http.StatusCreated, "")

	must(t, f.st.UpdateVolume(ctx, "cache", 10, []string{"team_a"}))
	want(t, "team A's agent once the volume is shared", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "a-agent", "environment": "v-env"}),
		http.StatusCreated, "")
}
