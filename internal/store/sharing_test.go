package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestUsableBy(t *testing.T) {
	for _, c := range []struct {
		owner      string
		sharedWith []string
		who        string
		want       bool
	}{
		{"team_b", nil, "team_b", true},
		{"team_b", nil, "team_a", false},
		{"team_b", []string{"team_c"}, "team_a", false},
		{"team_b", []string{"team_a"}, "team_a", true},
		{"team_b", []string{ShareAll}, "team_a", true},
		{"team_b", []string{"Team_A"}, "team_a", false}, // exact, as PostgreSQL compares role names
	} {
		if got := UsableBy(c.owner, c.sharedWith, c.who); got != c.want {
			t.Errorf("UsableBy(%q, %q, %q) = %v; want %v", c.owner, c.sharedWith, c.who, got, c.want)
		}
		e := Environment{Owner: c.owner, SharedWith: c.sharedWith}
		if !e.UsableBy(c.who) {
			t.Errorf("an environment without secrets of %q is a blueprint; UsableBy(%q) = false", c.owner, c.who)
		}
		e.HasSecrets = true
		if got := e.UsableBy(c.who); got != c.want {
			t.Errorf("environment with secrets of %q shared with %q: UsableBy(%q) = %v; want %v", c.owner, c.sharedWith, c.who, got, c.want)
		}
	}
}

// shared_with and HasSecrets are stored and read back on SQLite, and HasSecrets follows
// the secrets as they are added and removed.
func TestEnvironmentSharingStored(t *testing.T) {
	ctx := context.Background()
	st := openAt(t, filepath.Join(t.TempDir(), "tf.db"))
	must(t, st.CreateSandboxProvider(ctx, SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: "team_b"}))
	if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-1", Provider: "local", BuildHash: "h1", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	env := Environment{ID: "e1", Name: "b-env", Provider: "local", Owner: "team_b", Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}
	must(t, st.CreateEnvironment(ctx, env))
	got, err := st.GetEnvironment(ctx, "b-env")
	must(t, err)
	if got.HasSecrets || len(got.SharedWith) != 0 || !got.UsableBy("team_a") {
		t.Fatalf("new environment: HasSecrets %v, SharedWith %q, UsableBy(team_a) %v; want a blueprint shared with nobody", got.HasSecrets, got.SharedWith, got.UsableBy("team_a"))
	}
	must(t, st.CreateSecret(ctx, Secret{ID: SecretID("b-env", "TOKEN"), Environment: "b-env", EnvName: "TOKEN", ValueEnc: []byte("sealed")}))
	if got, _ = st.GetEnvironment(ctx, "b-env"); !got.HasSecrets || got.UsableBy("team_a") || !got.UsableBy("team_b") {
		t.Fatalf("with a secret: HasSecrets %v, UsableBy(team_a) %v, UsableBy(team_b) %v; want true, false, true", got.HasSecrets, got.UsableBy("team_a"), got.UsableBy("team_b"))
	}
	got.SharedWith = []string{"team_a"}
	must(t, st.UpdateEnvironment(ctx, got))
	envs, err := st.ListEnvironments(ctx)
	must(t, err)
	if len(envs) != 1 || !envs[0].UsableBy("team_a") || envs[0].UsableBy("team_c") {
		t.Fatalf("shared with team_a: %+v", envs)
	}
	must(t, st.DeleteSecret(ctx, SecretID("b-env", "TOKEN")))
	if got, _ = st.GetEnvironment(ctx, "b-env"); got.HasSecrets {
		t.Fatal("HasSecrets after its only secret was deleted")
	}
}

// On PostgreSQL the database itself refuses a team's agent row on another team's
// environment with secrets, unless that team shares it: by the store and by hand-written
// SQL alike, on insert and on update. Unsharing later is the owner's right: the row
// stays, and the harness refuses it at run time (Environment.UsableBy).
func TestRLSEnvironmentSecretsNeedSharing(t *testing.T) {
	p := newRLSPlane(t) // alice's "py" has a secret
	ctx := context.Background()
	a, b := p.asAlice, p.asBob

	env, err := b.GetEnvironment(ctx, "py")
	must(t, err)
	if !env.HasSecrets || env.UsableBy(p.bob) {
		t.Fatalf("bob reads alice's py: HasSecrets %v, UsableBy(bob) %v; want true, false (he cannot read the secret itself, only that it exists)", env.HasSecrets, env.UsableBy(p.bob))
	}
	if secrets, _ := b.ListSecrets(ctx, "py"); len(secrets) != 0 {
		t.Fatalf("bob reads alice's secrets: %v", secrets)
	}
	err = b.CreateAgent(ctx, Agent{ID: "a2", Name: "bobs", Owner: p.bob, Environment: "py", Spec: []byte("{}")})
	if !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob's agent on alice's py: %v; want ErrForbidden", err)
	}
	if _, err := b.Exec(ctx, `INSERT INTO agents(id, name, owner, environment, spec, created_at, updated_at) VALUES ('a3', 'bobs-sql', ?, 'py', '{}', 0, 0)`, p.bob); err == nil {
		t.Fatal("bob inserted an agent row on alice's py with SQL")
	}

	// An environment without secrets is a blueprint: bob may use it, and moving his
	// agent onto py from there is refused as well.
	must(t, a.CreateEnvironment(ctx, Environment{ID: "e2", Name: "plain", Provider: "local", Owner: p.alice, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}))
	must(t, b.CreateAgent(ctx, Agent{ID: "a4", Name: "bobs", Owner: p.bob, Environment: "plain", Spec: []byte("{}")}))
	if err := b.UpdateAgent(ctx, Agent{Name: "bobs", Environment: "py", Spec: []byte("{}")}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob moving his agent onto alice's py: %v; want ErrForbidden", err)
	}
	if _, err := b.Exec(ctx, `UPDATE agents SET environment = 'py' WHERE name = 'bobs'`); err == nil {
		t.Fatal("bob moved his agent onto alice's py with SQL")
	}

	// Alice shares py with bob: now he may.
	env, err = a.GetEnvironment(ctx, "py")
	must(t, err)
	env.SharedWith = []string{p.bob}
	must(t, a.UpdateEnvironment(ctx, env))
	must(t, b.UpdateAgent(ctx, Agent{Name: "bobs", Environment: "py", Spec: []byte("{}")}))
	if env, _ = b.GetEnvironment(ctx, "py"); !env.UsableBy(p.bob) {
		t.Fatal("py shared with bob: UsableBy(bob) = false")
	}

	// Bob cannot share alice's environment with himself.
	if _, err := b.Exec(ctx, `UPDATE environments SET shared_with = '["*"]' WHERE name = 'plain'`); err != nil {
		t.Fatalf("an UPDATE of another team's rows matches none: %v", err)
	}
	if env, _ := b.GetEnvironment(ctx, "plain"); len(env.SharedWith) != 0 {
		t.Fatalf("bob changed alice's shared_with: %q", env.SharedWith)
	}

	// Alice unshares: bob's row stays (it is not hers to change), but no longer passes
	// the rule, so the harness refuses it; his next write of it is refused too.
	env, _ = a.GetEnvironment(ctx, "py")
	env.SharedWith = nil
	must(t, a.UpdateEnvironment(ctx, env))
	if env, _ = p.asHarness.GetEnvironment(ctx, "py"); env.UsableBy(p.bob) {
		t.Fatal("py unshared: the harness still finds it usable by bob")
	}
	if err := b.UpdateAgent(ctx, Agent{Name: "bobs", Environment: "py", Spec: []byte(`{"v":2}`)}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob rewriting his agent on py after alice unshared it: %v; want ErrForbidden", err)
	}

	// Alice adds a secret to plain, which bob's agent already uses: not refused (the
	// row is bob's), but the harness no longer finds plain usable by bob.
	must(t, b.CreateAgent(ctx, Agent{ID: "a5", Name: "bobs-plain", Owner: p.bob, Environment: "plain", Spec: []byte("{}")}))
	must(t, a.CreateSecret(ctx, Secret{ID: SecretID("plain", "LATE"), Environment: "plain", EnvName: "LATE", ValueEnc: []byte("sealed")}))
	if plain, err := p.asHarness.GetEnvironment(ctx, "plain"); err != nil || !plain.HasSecrets || plain.UsableBy(p.bob) {
		t.Fatalf("plain after alice added a secret, as the harness reads it: %+v, %v; want HasSecrets and not usable by bob", plain, err)
	}

	// "*" shares with every team.
	env.SharedWith = []string{ShareAll}
	must(t, a.UpdateEnvironment(ctx, env))
	must(t, b.UpdateAgent(ctx, Agent{Name: "bobs", Environment: "py", Spec: []byte(`{"v":3}`)}))

	// What the egress proxy reads, as the harness role, before it lends a secret: plain's
	// secret with the consent of bob's session's agent, which plain does not give.
	h := p.asHarness
	must(t, h.CreateSession(ctx, Session{ID: "s-bob", Agent: "bobs-plain", Owner: p.bob}))
	secrets, c, err := h.SessionSecrets(ctx, "s-bob", "plain")
	if err != nil || len(secrets) != 1 || secrets[0].EnvName != "LATE" || c.AgentOwner != p.bob || c.EnvOwner != p.alice || c.Allowed() {
		t.Fatalf("SessionSecrets(s-bob, plain) = %+v, %+v, %v; want LATE, owners bob and alice, not allowed", secrets, c, err)
	}
	if secrets, c, err = h.SessionSecrets(ctx, "s-bob", "py"); err != nil || len(secrets) != 1 || !c.Allowed() {
		t.Fatalf("SessionSecrets(s-bob, py), py shared with everyone: %+v, %+v, %v; want its secret, allowed", secrets, c, err)
	}
	if _, _, err := h.SessionSecrets(ctx, "no-such-session", "py"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SessionSecrets of a missing session: %v; want ErrNotFound", err)
	}
}
