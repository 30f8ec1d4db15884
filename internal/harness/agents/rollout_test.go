package agents_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The rollout's share is close to its percent over many sessions, and a session always
// makes the same choice.
func TestInRolloutShare(t *testing.T) {
	in := 0
	for i := range 1000 {
		id := fmt.Sprintf("sess-%04d", i)
		got := agents.InRolloutShare(id, 30)
		if got {
			in++
		}
		for range 3 {
			if agents.InRolloutShare(id, 30) != got {
				t.Fatalf("session %s chose differently on a later call", id)
			}
		}
		if !agents.InRolloutShare(id, 100) {
			t.Fatalf("session %s is outside a 100%% rollout", id)
		}
	}
	if in < 250 || in > 350 {
		t.Fatalf("%d of 1000 sessions use the current version at 30%%; want 250 to 350", in)
	}
}

// ForSession sends a session outside the rollout's share to the latest previous kept
// version and one inside it to the current version, the same on every call; an
// environment without a previous kept version, or an agent that pins a version, uses
// no rollout's previous version.
func TestForSessionFollowsRollout(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	harnesstest.AddEnvironment(t, st, "py", "Ready") // v1: snap-py
	env, err := st.GetEnvironment(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	env.Settings.Rollout = &store.Rollout{Percent: 30}
	if err := st.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	sandbox := func(pin string) map[string]any {
		sb := harnesstest.Sandbox("py", 15, 60, 120)
		if pin != "" {
			sb["environment_version"] = pin
		}
		return sb
	}
	harnesstest.AddAgent(t, st, "follower", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": sandbox("")})
	harnesstest.AddAgent(t, st, "pinned", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": sandbox("h-py")})
	load := func(name string) *agents.Agent {
		t.Helper()
		a, err := agents.Load(ctx, st, name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	// One version only: every session uses it, and the event says current.
	a := load("follower")
	for i := range 50 {
		got, r := a.ForSession(ctx, st, fmt.Sprintf("s-%d", i))
		if got.Environment.SnapshotID != "snap-py" || r != (agents.Rollout{Version: agents.VersionCurrent, Percent: 30}) {
			t.Fatalf("without a previous version: %s, %+v", got.Environment.SnapshotID, r)
		}
	}

	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-v2", Provider: "local", BuildHash: "h-v2", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSnapshotState(ctx, "snap-v2", "Ready", "", ""); err != nil {
		t.Fatal(err)
	}
	env.SnapshotID, env.BuildHash = "snap-v2", "h-v2"
	if err := st.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}

	a = load("follower")
	current := 0
	for i := range 1000 {
		id := fmt.Sprintf("s-%d", i)
		got, r := a.ForSession(ctx, st, id)
		want, wantSnap := agents.VersionPrevious, "snap-py"
		if agents.InRolloutShare(id, 30) {
			want, wantSnap = agents.VersionCurrent, "snap-v2"
			current++
		}
		if r.Version != want || r.Percent != 30 || got.Environment.SnapshotID != wantSnap || got.Snapshot.ID != wantSnap || got.Environment.BuildHash != "h-"+wantSnap[len("snap-"):] {
			t.Fatalf("session %s: %+v on %s (%s); want %s on %s", id, r, got.Environment.SnapshotID, got.Environment.BuildHash, want, wantSnap)
		}
		if again, r2 := a.ForSession(ctx, st, id); r2 != r || again.Environment.SnapshotID != wantSnap {
			t.Fatalf("session %s chose %+v, then %+v", id, r, r2)
		}
	}
	if current < 250 || current > 350 {
		t.Fatalf("%d of 1000 sessions on the current version at 30%%; want 250 to 350", current)
	}
	if a.Environment.SnapshotID != "snap-v2" {
		t.Fatalf("ForSession changed the agent it was given: %s", a.Environment.SnapshotID)
	}

	// A pinned agent ignores the rollout, whichever side a session falls on.
	p := load("pinned")
	for i := range 50 {
		got, r := p.ForSession(ctx, st, fmt.Sprintf("s-%d", i))
		if got.Environment.SnapshotID != "snap-py" || r != (agents.Rollout{}) {
			t.Fatalf("pinned agent: %s, %+v", got.Environment.SnapshotID, r)
		}
	}

	// No rollout: the agent as it is.
	env.Settings.Rollout = nil
	if err := st.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	a = load("follower")
	for i := range 50 {
		if got, r := a.ForSession(ctx, st, fmt.Sprintf("s-%d", i)); got != a || r != (agents.Rollout{}) {
			t.Fatalf("without a rollout: %s, %+v", got.Environment.SnapshotID, r)
		}
	}
}
