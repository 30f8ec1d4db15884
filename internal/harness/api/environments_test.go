package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// secretCanary is a secret's stored value in these tests: it must never be answered.
const secretCanary = "CANARY-5ecret-value-9f3a"

// seedEnvironments stores, beside the fixture's default: alice's "alices" (Ready, with a
// secret, an allow list and a warm pool with one member ready), bob's "bobs" (Failed,
// block-all, not shared), bob's "shared" (shared with alice), and carol's "carols",
// which an agent of alice's references.
func seedEnvironments(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	snap := func(id, status, reason string) {
		_, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: id, Provider: "local", BuildHash: "h-" + id, Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed)
		must(t, err)
		must(t, st.SetSnapshotState(ctx, id, status, reason, ""))
	}
	snap("snap-a", sandbox.StatusReady, "")
	snap("snap-b", sandbox.StatusFailed, "the build script exited 1")
	env := func(e store.Environment) {
		e.ID, e.Provider, e.Image = "id-"+e.Name, "local", "platform"
		e.CPU, e.MemoryGB, e.DiskGB = 2, 4, 10
		if e.SnapshotID == "" {
			e.SnapshotID, e.BuildHash = "snap-a", "h-snap-a"
		}
		must(t, st.CreateEnvironment(ctx, e))
	}
	env(store.Environment{Name: "alices", Owner: "alice", Env: map[string]string{"LOG_LEVEL": "debug"}, AllowDomains: []string{"api.github.com"},
		Settings: store.EnvironmentSettings{WarmPool: &store.WarmPool{Size: 2, MaxAgeSeconds: 600}}})
	must(t, st.CreateSecret(ctx, store.Secret{ID: store.SecretID("alices", "GH_TOKEN"), Environment: "alices", EnvName: "GH_TOKEN",
		Hosts: []string{"api.github.com"}, ValueEnc: []byte(secretCanary)}))
	must(t, st.PutPoolSandbox(ctx, store.PoolSandbox{SandboxID: "pool-1", Environment: "alices", Provider: "local", SnapshotID: "snap-a",
		State: store.PoolReady, CreatedAt: time.Now()}))
	must(t, st.PutPoolSandbox(ctx, store.PoolSandbox{SandboxID: "pool-2", Environment: "alices", Provider: "local", SnapshotID: "snap-a",
		State: store.PoolCreating, CreatedAt: time.Now()}))
	env(store.Environment{Name: "bobs", Owner: "bob", BlockAll: true, SnapshotID: "snap-b", BuildHash: "h-snap-b"})
	must(t, st.CreateSecret(ctx, store.Secret{ID: store.SecretID("bobs", "BOB_KEY"), Environment: "bobs", EnvName: "BOB_KEY",
		ValueEnc: []byte(secretCanary)}))
	env(store.Environment{Name: "shared", Owner: "bob", SharedWith: []string{"alice"}})
	env(store.Environment{Name: "carols", Owner: "carol"})
	must(t, st.CreateAgent(ctx, store.Agent{ID: "a-alices-bot", Name: "alices-bot", Owner: "alice", Environment: "carols", Spec: []byte("{}")}))
}

func cardsOf(t *testing.T, r response) map[string]api.EnvironmentCard {
	t.Helper()
	want(t, "environments overview", r, http.StatusOK, "")
	if strings.Contains(string(r.body), secretCanary) {
		t.Fatalf("a secret's value is in the answer: %s", r.body)
	}
	var body struct{ Environments []api.EnvironmentCard }
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.EnvironmentCard{}
	for _, c := range body.Environments {
		out[c.Name] = c
	}
	return out
}

func TestEnvironmentsOverview(t *testing.T) {
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)
	seedEnvironments(t, st)
	f := newFixture(t, fixtureOpts{st: st})

	alice := cardsOf(t, f.req("GET", "/api/v1/environments/overview", "alice", nil))
	for _, name := range []string{"alices", "shared", "carols"} {
		if _, ok := alice[name]; !ok {
			t.Errorf("alice does not see %q: %v", name, alice)
		}
	}
	if _, ok := alice["bobs"]; ok {
		t.Error("alice sees bob's unshared environment")
	}
	a := alice["alices"]
	if a.Status != sandbox.StatusReady || a.Resources != (api.CardResources{CPU: 2, MemoryGB: 4, DiskGB: 10}) ||
		!strings.Contains(a.Network.Summary, "api.github.com") || !slices.Equal(a.EnvNames, []string{"LOG_LEVEL"}) ||
		len(a.Secrets) != 1 || a.Secrets[0].Name != "GH_TOKEN" || a.Secrets[0].Inert || a.UpdatedAt.IsZero() ||
		len(a.Versions) == 0 || !a.Versions[len(a.Versions)-1].Current ||
		a.WarmPool == nil || *a.WarmPool != (api.CardWarmPool{Size: 2, MaxAgeSeconds: 600, Ready: 1, Creating: 1}) {
		t.Errorf("alice's environment: %+v", a)
	}
	if alice["shared"].WarmPool != nil {
		t.Errorf("an environment without a pool shows one: %+v", alice["shared"].WarmPool)
	}

	bob := cardsOf(t, f.req("GET", "/api/v1/environments/overview", "bob", nil))
	if _, ok := bob["alices"]; ok {
		t.Error("bob sees alice's environment")
	}
	b := bob["bobs"]
	if b.Status != sandbox.StatusFailed || b.StatusReason == "" || !b.Network.BlockAll || !strings.HasPrefix(b.Network.Summary, "Block all") ||
		len(b.Secrets) != 1 || !b.Secrets[0].Inert {
		t.Errorf("bob's failed block-all environment: %+v", b)
	}

	root := cardsOf(t, f.req("GET", "/api/v1/environments/overview", "root", nil))
	if len(root) != 5 {
		t.Errorf("the admin sees %d environments, want all 5: %v", len(root), root)
	}
	want(t, "no token", f.req("GET", "/api/v1/environments/overview", "", nil), http.StatusUnauthorized, api.CodeUnauthorized)
}

// The same on PostgreSQL, through a harness role.
func TestEnvironmentsOverviewOnPostgreSQL(t *testing.T) {
	_, harnessURL := harnessRoleDB(t, func(owner *store.Store) { seedEnvironments(t, owner) })
	f := newFixture(t, fixtureOpts{st: storetest.Open(t, harnessURL)})
	alice := cardsOf(t, f.req("GET", "/api/v1/environments/overview", "alice", nil))
	if _, ok := alice["bobs"]; ok || len(alice["alices"].Secrets) != 1 || alice["alices"].WarmPool == nil || alice["alices"].WarmPool.Ready != 1 {
		t.Errorf("alice's environments on PostgreSQL: %+v", alice)
	}
	if root := cardsOf(t, f.req("GET", "/api/v1/environments/overview", "root", nil)); len(root) != 5 {
		t.Errorf("the admin sees %d environments on PostgreSQL, want 5", len(root))
	}
}
