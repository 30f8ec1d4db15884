package store

import (
	"context"
	"database/sql"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

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
		`SELECT COUNT(*) FROM session_runs`,
		`SET row_security = off; SELECT COUNT(*) FROM sessions`,
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
	// A team reads only its own agents' sessions (TestRLSSessionsReadByTheirAgentsTeam):
	// helper is alice's, so bob finds no s1, and nobody outside the harness may read its
	// events.
	if _, err := p.asBob.GetSession(ctx, "s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob reading alice's agent's session: %v; want ErrNotFound", err)
	}
	refused(t, p.asAlice.DB(), "alice's", `SELECT * FROM session_events`)
}

// A team reads, and only reads, the sessions of the agents it owns and their sandbox
// records (session_visibility.go); the harness reads and writes them all.
func TestRLSSessionsReadByTheirAgentsTeam(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	must(t, p.asBob.CreateEnvironment(ctx, Environment{ID: "e3", Name: "bobs", Provider: "local", Owner: p.bob, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}))
	must(t, p.asBob.CreateAgent(ctx, Agent{ID: "a9", Name: "bobs-helper", Owner: p.bob, Environment: "bobs", Spec: []byte("{}")}))
	h := p.asHarness
	now := time.Now()
	for _, s := range []Session{{ID: "sa", Agent: "helper", Owner: "carol"}, {ID: "sb", Agent: "bobs-helper", Owner: "dave"},
		{ID: "sx", Agent: "gone", Owner: "erin"}} {
		must(t, h.CreateSession(ctx, s))
		must(t, h.PutSessionSandbox(ctx, SessionSandbox{SessionID: s.ID, Provider: "local", ProviderType: "local", SandboxID: "box-" + s.ID,
			Environment: "py", SnapshotID: "snap-1", State: SandboxStateRunning, Generation: 1, CreatedAt: now, LastUsedAt: now, StateAt: now}))
	}
	sessionIDs := func(st *Store) string {
		t.Helper()
		ss, err := st.ListSessions(ctx, "", "")
		must(t, err)
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.ID)
		}
		sort.Strings(ids)
		return strings.Join(ids, ",")
	}
	sandboxIDs := func(st *Store) string {
		t.Helper()
		bs, err := st.ListSessionSandboxes(ctx)
		must(t, err)
		var ids []string
		for _, b := range bs {
			ids = append(ids, b.SandboxID)
		}
		sort.Strings(ids)
		return strings.Join(ids, ",")
	}
	for _, c := range []struct {
		who                 string
		st                  *Store
		sessions, sandboxes string
	}{
		{"alice", p.asAlice, "sa", "box-sa"},
		{"bob", p.asBob, "sb", "box-sb"},
		{"the harness", h, "sa,sb,sx", "box-sa,box-sb,box-sx"},
	} {
		if got := sessionIDs(c.st); got != c.sessions {
			t.Errorf("%s lists sessions %q; want %q", c.who, got, c.sessions)
		}
		if got := sandboxIDs(c.st); got != c.sandboxes {
			t.Errorf("%s lists sandboxes %q; want %q", c.who, got, c.sandboxes)
		}
	}
	if s, err := p.asAlice.GetSession(ctx, "sa"); err != nil || s.Agent != "helper" {
		t.Errorf("alice reading her agent's session: %+v, %v", s, err)
	}
	if _, err := p.asAlice.GetSession(ctx, "sb"); !errors.Is(err, ErrNotFound) {
		t.Errorf("alice reading bob's agent's session: %v; want ErrNotFound", err)
	}
	// Read only, even her own: no team writes what the harness records.
	if err := p.asAlice.CreateSession(ctx, Session{ID: "forged", Agent: "helper", Owner: "carol"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("alice creating a session: %v; want ErrForbidden", err)
	}
	if _, err := p.asAlice.SwapSandboxState(ctx, "sa", []string{SandboxStateRunning}, SandboxStateStopped, now, now.Add(time.Hour)); !errors.Is(err, ErrForbidden) {
		t.Errorf("alice stopping her agent's sandbox: %v; want ErrForbidden", err)
	}
	refused(t, p.asAlice.DB(), "alice's", `UPDATE sessions SET owner = 'x' WHERE id = 'sa'`, `DELETE FROM sessions WHERE id = 'sa'`,
		`UPDATE session_sandboxes SET state = 'stopped' WHERE session_id = 'sa'`, `DELETE FROM session_sandboxes`,
		`INSERT INTO session_sandboxes(session_id, provider, provider_type, sandbox_id, environment, snapshot_id, state, created_at, last_used_at, state_at) VALUES ('sa', 'l', 'l', 'b', 'py', 's', 'running', 0, 0, 0)`)
	for who, c := range map[string]struct {
		st   *Store
		want bool
	}{"alice": {p.asAlice, false}, "the harness": {h, true}, "the owner": {p.owner, true}} {
		if got, err := c.st.RunsSessions(ctx); err != nil || got != c.want {
			t.Errorf("RunsSessions as %s = %v, %v; want %v", who, got, err, c.want)
		}
	}
	// The harness still writes every row: stopping bob's sandbox and deleting a session
	// of an agent nobody owns any more.
	if ok, err := h.SwapSandboxState(ctx, "sb", []string{SandboxStateRunning}, SandboxStateStopped, now, now.Add(time.Hour)); err != nil || !ok {
		t.Errorf("the harness stopping a sandbox: %v, %v", ok, err)
	}
	must(t, h.DeleteSession(ctx, "sx"))
	if got := sessionIDs(h); got != "sa,sb" {
		t.Errorf("after the harness's delete it lists %q", got)
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
