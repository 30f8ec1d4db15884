package store

import (
	"context"
	"errors"
	"testing"
)

func TestAgentLifecycle(t *testing.T) {
	st := openTest(t)
	seed(t, st)
	ctx := context.Background()
	a := Agent{ID: "agent-1", Name: "helper", Owner: "bob", Environment: "py", Spec: []byte(`{"name":"helper"}`)}
	if err := st.CreateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
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
	if err := st.UpdateAgent(ctx, Agent{Name: "helper", Environment: "py", Spec: []byte(`{"v":2}`)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetAgent(ctx, "helper"); string(got.Spec) != `{"v":2}` || got.ID != a.ID {
		t.Fatalf("after update: %+v", got)
	}
	if err := st.UpdateAgent(ctx, Agent{Name: "nobody", Environment: "py", Spec: []byte("{}")}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing agent: %v, want ErrNotFound", err)
	}
	if users, err := st.AgentsUsing(ctx, "py"); err != nil || len(users) != 1 || users[0] != "helper" {
		t.Fatalf("AgentsUsing(py) = %v, %v", users, err)
	}

	if err := st.DeleteAgent(ctx, "helper"); err != nil {
		t.Fatal(err)
	}
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
}
