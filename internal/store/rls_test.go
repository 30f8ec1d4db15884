package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
)

// rlsPlane is a PostgreSQL control plane migrated by its owner, with two team roles and
// a harness role set up by RolesSQL, and alice's configuration in it: a sandbox provider,
// an environment with a secret, an agent.
type rlsPlane struct {
	c                     *pgtest.Cluster
	db                    string
	alice, bob, harness   string
	owner, asAlice, asBob *Store
	asHarness             *Store
}

func newRLSPlane(t *testing.T) *rlsPlane {
	t.Helper()
	c := pgtest.Get(t)
	p := &rlsPlane{c: c}
	admin := c.Database(t)
	p.db = pgtest.Name(admin)
	p.owner = openAt(t, admin)
	p.alice, p.bob, p.harness = c.Role(t, "alice"), c.Role(t, "bob"), c.Role(t, "harness")
	ctx := context.Background()
	for name, kind := range map[string]RoleKind{p.alice: TeamRole, p.bob: TeamRole, p.harness: HarnessRole} {
		must(t, p.owner.ApplyRoles(ctx, kind, name))
	}
	p.asAlice = openAt(t, c.URL(p.db, p.alice))
	p.asBob = openAt(t, c.URL(p.db, p.bob))
	p.asHarness = openAt(t, c.URL(p.db, p.harness))
	a := p.asAlice
	must(t, a.CreateSandboxProvider(ctx, SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: p.alice}))
	if _, _, err := a.ClaimSnapshot(ctx, Snapshot{ID: "snap-1", Provider: "local", BuildHash: "h1", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	must(t, a.CreateEnvironment(ctx, Environment{ID: "e1", Name: "py", Provider: "local", Owner: p.alice, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}))
	must(t, a.CreateSecret(ctx, Secret{ID: SecretID("py", "TOKEN"), Environment: "py", EnvName: "TOKEN", Hosts: []string{"api.example.com"}, ValueEnc: []byte("sealed")}))
	must(t, a.CreateAgent(ctx, Agent{ID: "a1", Name: "helper", Owner: p.alice, Environment: "py", Spec: []byte("{}")}))
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The owner of what a connection writes is the role it authenticates as: a role cannot
// write rows in another's name.
func TestRLSOwnerIsTheRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	if p.asBob.Role() != p.bob {
		t.Fatalf("Role() = %q; want %q", p.asBob.Role(), p.bob)
	}
	err := p.asBob.CreateEnvironment(ctx, Environment{ID: "e2", Name: "forged", Provider: "local", Owner: p.alice, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"})
	if !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob creating an environment owned by alice: %v; want ErrForbidden", err)
	}
	if err := p.asBob.CreateEnvironment(ctx, Environment{ID: "e3", Name: "bobs", Provider: "local", Owner: p.bob, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}); err != nil {
		t.Fatalf("bob creating his own environment: %v", err)
	}
	if err := p.asBob.CreateAgent(ctx, Agent{ID: "a9", Name: "bobs-helper", Owner: p.bob, Environment: "bobs", Spec: []byte("{}")}); err != nil {
		t.Fatalf("bob's agent on his own environment: %v", err)
	}
	// Alice's py has a secret she has not shared: bob's agents may not use it
	// (TestRLSEnvironmentSecretsNeedSharing).
	if err := p.asBob.CreateAgent(ctx, Agent{ID: "a10", Name: "bobs-other", Owner: p.bob, Environment: "py", Spec: []byte("{}")}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob's agent on alice's environment with an unshared secret: %v; want ErrForbidden", err)
	}
}

// Bob can read what a plan needs from alice's configuration, and cannot change or
// delete any of it: not through the store, not with hand-written SQL.
func TestRLSAnotherTeamCannotChangeOrDelete(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	b := p.asBob
	if env, err := b.GetEnvironment(ctx, "py"); err != nil || env.Owner != p.alice {
		t.Fatalf("bob reading alice's environment: %+v, %v", env, err)
	}
	if a, err := b.GetAgent(ctx, "helper"); err != nil || a.Owner != p.alice {
		t.Fatalf("bob reading alice's agent: %+v, %v", a, err)
	}

	env, _ := p.asAlice.GetEnvironment(ctx, "py")
	env.Image = "evil"
	if err := b.UpdateEnvironment(ctx, env); err == nil {
		t.Error("bob updated alice's environment through the store")
	}
	if err := b.DeleteAgent(ctx, "helper"); err == nil {
		t.Error("bob deleted alice's agent through the store")
	}
	if err := b.DeleteSecret(ctx, SecretID("py", "TOKEN")); err == nil {
		t.Error("bob deleted alice's secret through the store")
	}
	if err := b.DeleteSandboxProvider(ctx, "local"); err == nil {
		t.Error("bob deleted alice's sandbox provider through the store")
	}

	raw := b.DB()
	changeNone(t, raw, "bob's", "alice's",
		`UPDATE environments SET image = 'evil', owner = current_user`,
		`UPDATE environments SET image = 'evil' WHERE name = 'py'`,
		`DELETE FROM environments WHERE name = 'py'`,
		`UPDATE agents SET spec = '{"model":"evil"}'`,
		`UPDATE agents SET owner = current_user WHERE name = 'helper'`,
		`DELETE FROM agents`,
		`UPDATE secrets SET hosts = '["evil.example"]'`,
		`DELETE FROM secrets`,
		`UPDATE sandbox_providers SET api_url = 'https://evil.example'`,
		`DELETE FROM sandbox_providers`,
	)
	refused(t, raw, "bob's",
		`INSERT INTO secrets(id, environment, env_name, hosts, value_enc, version, created_at, updated_at) VALUES ('py/EVIL', 'py', 'EVIL', '["evil.example"]', '\x00', 1, 0, 0)`,
		`INSERT INTO owners(name, created_at) VALUES ('someone_else', 0)`,
		`ALTER TABLE environments DISABLE ROW LEVEL SECURITY`,
		`DROP POLICY environments_update ON environments`,
		`SET row_security = off; SELECT COUNT(*) FROM secrets`,
		`SELECT COUNT(*) FROM sessions`,
		`CREATE TABLE mine (x int)`,
	)

	// What alice published is as she left it.
	if got, _ := p.asAlice.GetEnvironment(ctx, "py"); got.Image != "platform" || got.Owner != p.alice {
		t.Errorf("alice's environment after bob's attempts: %+v", got)
	}
	if a, err := p.asAlice.GetAgent(ctx, "helper"); err != nil || string(a.Spec) != "{}" || a.Owner != p.alice {
		t.Errorf("alice's agent after bob's attempts: %+v, %v", a, err)
	}
	if s, err := p.asAlice.GetSecret(ctx, SecretID("py", "TOKEN")); err != nil || len(s.Hosts) != 1 || s.Hosts[0] != "api.example.com" {
		t.Errorf("alice's secret after bob's attempts: %+v, %v", s, err)
	}
	if _, err := p.asAlice.GetSecret(ctx, "py/EVIL"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's secret in alice's environment: %v", err)
	}
	if pr, err := p.asAlice.GetSandboxProvider(ctx, "local"); err != nil || pr.APIURL != "" {
		t.Errorf("alice's sandbox provider after bob's attempts: %+v, %v", pr, err)
	}
}

// Sealed secret values are read only by their environment's owner and by harnesses.
func TestRLSSecretsReadByOwnerAndHarnessOnly(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	id := SecretID("py", "TOKEN")
	if _, err := p.asBob.GetSecret(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob reading alice's secret: %v; want it invisible (ErrNotFound)", err)
	}
	var n int
	if err := p.asBob.DB().QueryRow(`SELECT COUNT(*) FROM secrets`).Scan(&n); err != nil || n != 0 {
		t.Errorf("bob sees %d secret rows (%v); want 0", n, err)
	}
	if s, err := p.asHarness.GetSecret(ctx, id); err != nil || string(s.ValueEnc) != "sealed" {
		t.Errorf("the harness reading alice's secret: %+v, %v", s, err)
	}
	if s, err := p.asAlice.GetSecret(ctx, id); err != nil || string(s.ValueEnc) != "sealed" {
		t.Errorf("alice reading her secret: %+v, %v", s, err)
	}
}

// A harness role reads the configuration and owns the runtime tables, and cannot change
// what teams published.
func TestRLSHarnessRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	h := p.asHarness
	if err := h.CreateSession(ctx, Session{ID: "s1", Agent: "helper", Owner: "carol"}); err != nil {
		t.Fatalf("the harness creating a session: %v", err)
	}
	if _, err := h.AppendEvent(ctx, "s1", "", "user_message", []byte(`{}`)); err != nil {
		t.Fatalf("the harness appending an event: %v", err)
	}
	if _, err := h.GetAgent(ctx, "helper"); err != nil {
		t.Fatalf("the harness reading an agent: %v", err)
	}
	refused(t, h.DB(), "the harness's", `UPDATE agents SET spec = '{}'`, `DELETE FROM environments`, `INSERT INTO owners(name, created_at) VALUES ('x', 0)`)
	if _, err := p.asBob.GetSession(ctx, "s1"); err == nil || !errors.Is(err, ErrForbidden) && !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a team reading a session: %v; want permission denied", err)
	}
}

// changeNone runs each of stmts on raw, the connection of a role (who: "bob's"), and
// fails t for any that changes a row: the rows are another's (whose: "alice's"), which
// row-level security hides; a statement refused outright is as good.
func changeNone(t *testing.T, raw *sql.DB, who, whose string, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		res, err := raw.Exec(q)
		if err != nil {
			continue // refused outright is as good
		}
		if n, _ := res.RowsAffected(); n != 0 {
			t.Errorf("%s %q changed %d of %s rows", who, q, n, whose)
		}
	}
}

// refused runs each of stmts on raw, the connection of a role (who: "bob's"), and
// fails t for any the database accepts.
func refused(t *testing.T, raw *sql.DB, who string, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := raw.Exec(q); err == nil {
			t.Errorf("%s %q was accepted", who, q)
		}
	}
}

// RolesSQL refuses names it would have to quote, and the group roles' names.
func TestRolesSQLNames(t *testing.T) {
	for _, bad := range []string{"", "Alice", "a-b", "x; DROP TABLE agents", TeamGroup, strings.Repeat("a", 64)} {
		if _, err := RolesSQL("public", TeamRole, bad); err == nil {
			t.Errorf("RolesSQL accepted %q", bad)
		}
	}
	if _, err := RolesSQL("public", "admin", "ok"); err == nil {
		t.Error("RolesSQL accepted kind admin")
	}
	q, err := RolesSQL("public", HarnessRole, "harness_1")
	if err != nil || !strings.Contains(q, "GRANT "+HarnessGroup+" TO harness_1") {
		t.Fatalf("RolesSQL: %v\n%s", err, q)
	}
}
