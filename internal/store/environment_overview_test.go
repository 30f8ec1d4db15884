package store

import (
	"context"
	"slices"
	"testing"
)

// SecretNames lists names and hosts, never values; EnvironmentsOfOwner the environments
// an owner's agents reference; EnvironmentsUpdatedAt every environment's last change.
func TestEnvironmentOverviewQueries(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		ctx := context.Background()
		must(t, st.CreateSecret(ctx, Secret{ID: SecretID("py", "TOKEN"), Environment: "py", EnvName: "TOKEN", Hosts: []string{"api.example.com"}, ValueEnc: []byte("sealed")}))
		must(t, st.CreateAgent(ctx, Agent{ID: "a1", Name: "helper", Owner: "bob", Environment: "py", Spec: []byte("{}")}))
		names, err := st.SecretNames(ctx, "py")
		must(t, err)
		if len(names) != 1 || names[0].EnvName != "TOKEN" || !slices.Equal(names[0].Hosts, []string{"api.example.com"}) || names[0].Version != 1 {
			t.Errorf("secret names: %+v", names)
		}
		envs, err := st.EnvironmentsOfOwner(ctx, "bob")
		must(t, err)
		if !slices.Equal(envs, []string{"py"}) {
			t.Errorf("bob's agents' environments: %v", envs)
		}
		if envs, _ := st.EnvironmentsOfOwner(ctx, "carol"); len(envs) != 0 {
			t.Errorf("carol has no agents, yet: %v", envs)
		}
		at, err := st.EnvironmentsUpdatedAt(ctx)
		must(t, err)
		if at["py"].IsZero() || len(at) != 1 {
			t.Errorf("updated at: %v", at)
		}
	})
}

// On PostgreSQL a team role lists the secret names of its own environments only, as
// row-level security lets it read secrets.
func TestSecretNamesUnderRLS(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	if names, err := p.asAlice.SecretNames(ctx, "py"); err != nil || len(names) != 1 {
		t.Errorf("alice's own secret names: %+v %v", names, err)
	}
	if names, err := p.asBob.SecretNames(ctx, "py"); err != nil || len(names) != 0 {
		t.Errorf("bob reads alice's secret names: %+v %v", names, err)
	}
}
