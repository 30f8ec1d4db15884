package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// addForeignAgent stores agent name, owned by owner, on the fixture's environment
// (default, owned by harnesstest.Owner, with secret API_TOKEN bound to the loopback
// host), the way an attacker with the SQLite file writes it: past the provider, whose
// plan refuses it.
func addForeignAgent(t *testing.T, f *egressFixture, name, owner string, turns ...map[string]any) {
	t.Helper()
	ctx := context.Background()
	harnesstest.AddAgent(t, f.env.Store, name, "default", harnesstest.AgentSpec{
		"model":   harnesstest.Script(turns...),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	if _, err := f.env.Store.Exec(ctx, `INSERT INTO owners(name, created_at) VALUES (?, 0) ON CONFLICT DO NOTHING`, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Store.Exec(ctx, `UPDATE agents SET owner = ? WHERE name = ?`, owner, name); err != nil {
		t.Fatal(err)
	}
}

// resultsText is every tool result of a session, as JSON.
func resultsText(t *testing.T, f *egressFixture, sid string) string {
	t.Helper()
	raw, _ := json.Marshal(results(t, f.env.Store, sid))
	return string(raw)
}

// Issue 23's attack at the harness: team A's agent row names team B's environment,
// which has a network-scoped secret. The run's tool call fails with the reason, no
// sandbox is created, and the loopback server standing in for B's host receives no
// Bearer <secret>.
func TestSharingForeignAgentGetsNoSandboxNorSecret(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	addForeignAgent(t, f, "thief", "team_a", exec(curlAuth(f.up.port)), text("done"))
	r := f.runner(t, "thief")
	sid, err := r.NewSession(ctx, "someone")
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, r, sid, "go")
	got := resultsText(t, f, sid)
	if !strings.Contains(got, `may not run on environment \"default\"`) || !strings.Contains(got, "shared_with") {
		t.Fatalf("tool result %s; want the refusal naming the environment and shared_with", got)
	}
	if h := f.up.headers(); len(h) != 0 {
		t.Fatalf("team B's host received %q from team A's agent", h)
	}
	if _, err := f.env.Store.GetSessionSandbox(ctx, sid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a sandbox was recorded for team A's session: %v", err)
	}
	if n := f.env.Runtime.Calls("Create"); n != 0 {
		t.Fatalf("%d sandboxes created for team A's agent; want none", n)
	}
}

// Consent can be withdrawn: shared with team A, its agent's sandbox reaches B's host
// with the secret; once B unshares, the next tool call is refused before the existing
// sandbox is used, and the host receives nothing more.
func TestSharingUnshareStopsARunningSession(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	editEnvironment(t, f.env.Store, "default", func(env *store.Environment) {
		env.SharedWith = []string{"team_a"}
	})
	addForeignAgent(t, f, "borrower", "team_a",
		exec(curlAuth(f.up.port)), text("turn 1 done"),
		exec(curlAuth(f.up.port)), text("turn 2 done"))
	r := f.runner(t, "borrower")
	sid, err := r.NewSession(ctx, "someone")
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, r, sid, "go")
	if h := f.up.headers(); len(h) != 1 || h[0] != "Bearer "+secretV1 {
		t.Fatalf("shared: the host saw %q; want the secret once", h)
	}
	editEnvironment(t, f.env.Store, "default", func(env *store.Environment) { env.SharedWith = nil })
	mustRun(t, r, sid, "again")
	if got := resultsText(t, f, sid); !strings.Contains(got, "may not run on environment") {
		t.Fatalf("after unsharing, tool results %s; want the refusal", got)
	}
	if h := f.up.headers(); len(h) != 1 {
		t.Fatalf("after unsharing the host saw %q; want nothing more", h)
	}
}
