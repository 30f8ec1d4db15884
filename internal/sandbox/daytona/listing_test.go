package daytona_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// TestListLeavesOutDeletedSandboxes: Daytona keeps listing a deleted sandbox, renamed
// DESTROYED_<name>_<ms>, with its labels, desiredState destroyed and state destroying,
// until the runner has destroyed it, and its list items carry no env. Runtime.List leaves
// the deleted sandbox out, so a sandbox created again under the same id lists once, as
// the new one; Get still reports the env.
func TestListLeavesOutDeletedSandboxes(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t, daytonatest.WithTransitionDelay("destroying", time.Hour))
	ctx := testCtx(t)
	mk := func(env string) {
		t.Helper()
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: "again", SnapshotID: snap, Env: map[string]string{"FOO": env}}); err != nil {
			t.Fatal(err)
		}
	}
	mk("old")
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "again") })
	old, err := c.GetSandbox(ctx, "again")
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Delete(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	if st := srv.SandboxState(old.ID); st != daytona.SandboxDestroying {
		t.Fatalf("the emulator has the deleted sandbox %q, want destroying until it is destroyed", st)
	}
	byLabel := daytona.SandboxListOptions{Labels: map[string]string{daytona.LabelID: "again"}}
	items, err := c.AllSandboxes(ctx, byLabel)
	if err != nil || len(items) != 1 {
		t.Fatalf("GET /sandbox after the delete: %+v %v, want the deleted sandbox", items, err)
	}
	if it := items[0]; it.ID != old.ID || !strings.HasPrefix(it.Name, "DESTROYED_again_") || it.DesiredState != daytona.SandboxDestroyed ||
		it.State != daytona.SandboxDestroying || it.Env != nil {
		t.Fatalf("deleted sandbox listed as %+v; want renamed, desiredState destroyed, state destroying, no env", it)
	}
	if list, err := rt.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List just after the delete: %+v %v, want nothing", list, err)
	}

	mk("new")
	list, err := rt.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "again" || list[0].Status != sandbox.SandboxRunning || list[0].Env != nil {
		t.Fatalf("List after the create again: %+v %v, want one running sandbox again (no env)", list, err)
	}
	if items, err := c.AllSandboxes(ctx, byLabel); err != nil || len(items) != 2 {
		t.Fatalf("GET /sandbox: %d items %v, want the new sandbox and the one being destroyed", len(items), err)
	}
	// A sandbox made outside the runtime with the same labels (a copy) is not a second "again".
	if _, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "again-copy", Snapshot: snap,
		Labels: map[string]string{daytona.LabelManaged: "true", daytona.LabelID: "again", "trueforge.plane": "test"}}); err != nil {
		t.Fatal(err)
	}
	cur, err := c.GetSandbox(ctx, "again")
	if err != nil {
		t.Fatal(err)
	}
	if list, err := rt.List(ctx); err != nil || len(list) != 1 || list[0].ID != "again" || !list[0].Created.Equal(*cur.CreatedAt) {
		t.Fatalf("List with a copy labelled again: %+v %v, want one again, the sandbox named again", list, err)
	}
	info, err := rt.Get(ctx, "again")
	if err != nil || info.Env["FOO"] != "new" {
		t.Fatalf("Get: %+v %v, want the new sandbox's env", info, err)
	}
}
