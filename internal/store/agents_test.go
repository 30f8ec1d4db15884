package store

import (
	"context"
	"errors"
	"testing"
)

func TestAgentLifecycle(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		ctx := context.Background()
		a := Agent{ID: "agent-1", Name: "helper", Owner: "bob", Environment: "py", Spec: []byte(`{"name":"helper"}`)}
		must(t, st.CreateAgent(ctx, a))
		got, err := st.GetAgent(ctx, "helper")
		if err != nil || got.ID != a.ID || got.Owner != "bob" || got.Environment != "py" || string(got.Spec) != string(a.Spec) {
			t.Fatalf("GetAgent = %+v, %v; want %+v", got, err, a)
		}
		// Creating it registers its owner, as environments do.
		var owners int
		if err := st.DB().QueryRow(`SELECT COUNT(*) FROM owners WHERE name = 'bob'`).Scan(&owners); err != nil || owners != 1 {
			t.Fatalf("owner bob rows = %d, %v", owners, err)
		}
		if err := st.CreateAgent(ctx, Agent{ID: "agent-2", Name: "helper", Owner: "bob", Environment: "py", Spec: []byte("{}")}); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("second agent named helper: %v, want ErrAlreadyExists", err)
		}

		// An update may not point at a missing environment, and leaves the row alone when refused.
		if err := st.UpdateAgent(ctx, Agent{Name: "helper", Environment: "missing", Spec: []byte("{}")}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("update to a missing environment: %v, want ErrNotFound", err)
		}
		if got, _ := st.GetAgent(ctx, "helper"); got.Environment != "py" || string(got.Spec) != string(a.Spec) {
			t.Fatalf("refused update changed the agent: %+v", got)
		}
		must(t, st.UpdateAgent(ctx, Agent{Name: "helper", Environment: "py", Spec: []byte(`{"v":2}`)}))
		if got, _ := st.GetAgent(ctx, "helper"); string(got.Spec) != `{"v":2}` || got.ID != a.ID {
			t.Fatalf("after update: %+v", got)
		}
		if err := st.UpdateAgent(ctx, Agent{Name: "nobody", Environment: "py", Spec: []byte("{}")}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("update of a missing agent: %v, want ErrNotFound", err)
		}
		if users, err := st.AgentsUsing(ctx, "py"); err != nil || len(users) != 1 || users[0] != "helper" {
			t.Fatalf("AgentsUsing(py) = %v, %v", users, err)
		}

		must(t, st.DeleteAgent(ctx, "helper"))
		if _, err := st.GetAgent(ctx, "helper"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetAgent after delete: %v, want ErrNotFound", err)
		}
		if err := st.DeleteAgent(ctx, "helper"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		// With its last agent gone, the environment can be deleted.
		if err := st.DeleteEnvironment(ctx, "py"); err != nil {
			t.Fatalf("DeleteEnvironment after the agent is gone: %v", err)
		}
	})
}

// An agent whose sandbox is off references no environment: it is stored on a control
// plane with no sandbox provider, reads back with Environment "", may start and stop
// referencing one, and never keeps an environment from being deleted.
func TestAgentWithoutEnvironment(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		if err := st.CreateAgent(ctx, Agent{ID: "agent-qa", Name: "qa", Owner: "bob", Spec: []byte(`{"name":"qa"}`)}); err != nil {
			t.Fatalf("agent without environment on an empty control plane: %v", err)
		}
		if got, err := st.GetAgent(ctx, "qa"); err != nil || got.Environment != "" {
			t.Fatalf("GetAgent = %+v, %v; want no environment", got, err)
		}
		var null bool
		if err := st.DB().QueryRow(`SELECT environment IS NULL FROM agents WHERE name = 'qa'`).Scan(&null); err != nil || !null {
			t.Fatalf("environment column is NULL: %v, %v", null, err)
		}
		seed(t, st)
		must(t, st.UpdateAgent(ctx, Agent{Name: "qa", Environment: "py", Spec: []byte(`{}`)}))
		if users, err := st.AgentsUsing(ctx, "py"); err != nil || len(users) != 1 {
			t.Fatalf("AgentsUsing(py) = %v, %v; want qa", users, err)
		}
		must(t, st.UpdateAgent(ctx, Agent{Name: "qa", Environment: "", Spec: []byte(`{}`)}))
		if users, err := st.AgentsUsing(ctx, "py"); err != nil || len(users) != 0 {
			t.Fatalf("AgentsUsing(py) = %v, %v; want none", users, err)
		}
		if err := st.DeleteEnvironment(ctx, "py"); err != nil {
			t.Fatalf("deleting an environment no agent references: %v", err)
		}
	})
}

// Migration 6 drops the environment reference of agents saved with the sandbox off
// (which the harness never used) and keeps every other row as it was. SQLite only: no
// PostgreSQL control plane predates that migration (there it only drops NOT NULL).
func TestAgentEnvironmentMigration(t *testing.T) {
	ctx := context.Background()
	st := upgraded(t, sqlite, 5, `
INSERT INTO owners VALUES ('alice', 0);
INSERT INTO sandbox_providers(name, type, status, owner, created_at, updated_at) VALUES ('local', 'local', 'Ready', 'alice', 0, 0);
INSERT INTO snapshots(id, provider, build_hash, spec, status, created_at, updated_at) VALUES ('snap-1', 'local', 'h', '{}', 'Ready', 0, 0);
INSERT INTO environments(name, id, provider, owner, reserved, image, cpu, memory, disk, build_hash, snapshot_id, created_at, updated_at)
	VALUES ('default', 'e0', 'local', 'alice', 1, 'platform', 1, 1, 3, 'h', 'snap-1', 0, 0),
	       ('py', 'e1', 'local', 'alice', 0, 'platform', 1, 1, 3, 'h', 'snap-1', 0, 0);
INSERT INTO agents(name, id, owner, environment, spec, created_at, updated_at) VALUES
	('qa', 'a1', 'alice', 'default', '{"name":"qa","sandbox":{"enabled":false,"environment":"default"}}', 1, 2),
	('bare', 'a2', 'alice', 'py', '{"name":"bare"}', 1, 2),
	('coder', 'a3', 'alice', 'py', '{"name":"coder","sandbox":{"enabled":true,"environment":"py"}}', 1, 2),
	('broken', 'a4', 'alice', 'py', 'not json', 1, 2);
`)
	for name, want := range map[string]string{"qa": "", "bare": "", "coder": "py", "broken": "py"} {
		a, err := st.GetAgent(ctx, name)
		if err != nil || a.Environment != want {
			t.Errorf("agent %s after the migration: environment %q, %v; want %q", name, a.Environment, err, want)
		}
	}
	if a, _ := st.GetAgent(ctx, "coder"); a.ID != "a3" || a.Owner != "alice" || string(a.Spec) != `{"name":"coder","sandbox":{"enabled":true,"environment":"py"}}` {
		t.Errorf("agent coder changed: %+v", a)
	}
	if err := st.DeleteEnvironment(ctx, "py"); !errors.Is(err, ErrInUse) {
		t.Errorf("deleting py, still referenced by coder: %v; want ErrInUse", err)
	}
	if _, err := st.DB().Exec(`DELETE FROM environments WHERE name = 'default'`); err != nil {
		t.Errorf("the default environment, referenced only by agents without a sandbox before: %v", err)
	}
}
