package agents_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// An agent pinned to a kept version loads on its snapshot while the environment moves
// on (even to a failed build, and past keep_versions: a pin keeps its version), and one
// pinned to no version of the environment is refused with the reason; an unpinned
// agent follows the current version.
func TestPinnedAgentLoadsItsVersion(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	harnesstest.AddEnvironment(t, st, "py", "Ready") // v1: snap-py, build hash h-py
	keep := int64(1)
	env, err := st.GetEnvironment(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	env.Settings.KeepVersions = &keep
	move := func(id, status string) {
		t.Helper()
		if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: id, Provider: "local", BuildHash: "h-" + id, Spec: "{}"}, "Building", "Failed"); err != nil {
			t.Fatal(err)
		}
		if err := st.SetSnapshotState(ctx, id, status, "", ""); err != nil {
			t.Fatal(err)
		}
		env.SnapshotID, env.BuildHash = id, "h-"+id
		if err := st.UpdateEnvironment(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	sandbox := func(pin string) map[string]any {
		sb := harnesstest.Sandbox("py", 15, 60, 120)
		if pin != "" {
			sb["environment_version"] = pin
		}
		return sb
	}
	harnesstest.AddAgent(t, st, "pinned", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": sandbox("h-py")})
	harnesstest.AddAgent(t, st, "follower", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": sandbox("")})

	move("snap-v2", "Failed") // the current build failed: the pinned agent does not care
	a, err := agents.Load(ctx, st, "pinned")
	if err != nil || a.Environment.SnapshotID != "snap-py" || a.Snapshot.ID != "snap-py" {
		t.Fatalf("pinned agent after a failed v2: %v, %+v", err, a)
	}
	if _, err := agents.Load(ctx, st, "follower"); !errors.Is(err, agents.ErrNotReady) {
		t.Fatalf("follower on a failed current version: %v, want ErrNotReady", err)
	}

	move("snap-v3", "Ready") // keep_versions = 1: v2 is kept, and v1 too while an agent pins it
	if a, err := agents.Load(ctx, st, "follower"); err != nil || a.Environment.SnapshotID != "snap-v3" {
		t.Fatalf("follower after v3: %v, %+v", err, a)
	}
	move("snap-v4", "Ready")
	if a, err := agents.Load(ctx, st, "pinned"); err != nil || a.Environment.SnapshotID != "snap-py" {
		t.Fatalf("a pin past keep_versions: %v, %+v; want its version kept and loaded", err, a)
	}
	harnesstest.AddAgent(t, st, "stray", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": sandbox("h-nope")})
	_, err = agents.Load(ctx, st, "stray")
	if !errors.Is(err, agents.ErrNotReady) || !strings.Contains(err.Error(), "h-nope") || !strings.Contains(err.Error(), "not one of its versions") {
		t.Fatalf("a pin of no version: %v; want a refusal naming it", err)
	}
}
