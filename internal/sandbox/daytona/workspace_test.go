package daytona_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestWorkspaceForEveryImageUser (issue 24 M1): a Daytona sandbox runs as its image's
// USER (v0.190 runner container_configs.go:143-172), who cannot create a directory in / or
// in another user's home. Every build makes /workspace its user's (withWorkspace), so the
// sandboxes of an image that ends with `USER app`, of an image whose user trueforge does
// not know (node, set in the image's configuration), and of the platform image all create,
// and the agent writes its files through the file API and through commands.
func TestWorkspaceForEveryImageUser(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	srv.ImageUser("ghcr.io/acme/node-tools:1", "node")
	b := daytona.NewBuilder(c)
	rt := daytona.NewRuntime(c)
	for _, tc := range []struct {
		name, user string
		spec       sandbox.SnapshotSpec
	}{
		{"dockerfile-user-app", "app", sandbox.SnapshotSpec{Dockerfile: "FROM platform\nRUN useradd -m app\nUSER app\n"}},
		{"image-user-node", "node", sandbox.SnapshotSpec{Image: "ghcr.io/acme/node-tools:1", BuildScript: "echo built > /tmp/built"}},
		{"platform", daytona.PlatformImageUser, sandbox.SnapshotSpec{Image: sandbox.PlatformImage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := specReq(tc.spec, "")
			if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
				t.Fatalf("build: %+v", st)
			}
			if in, _ := srv.SnapshotInputs(req.ID); in.User != tc.user {
				t.Fatalf("the image runs as %q; want %q:\n%s", in.User, tc.user, in.Dockerfile)
			}
			if err := rt.Create(ctx, sandbox.CreateRequest{ID: tc.name, SnapshotID: req.ID}); err != nil {
				t.Fatalf("creating a sandbox of an image that runs as %s: %v", tc.user, err)
			}
			t.Cleanup(func() { _ = rt.Delete(context.Background(), tc.name) })
			if err := rt.WriteFile(ctx, tc.name, "notes.txt", strings.NewReader("by the file API\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			res := mustExec(t, rt, tc.name, sandbox.ExecRequest{Shell: "echo by a command > made.txt && cat notes.txt made.txt"})
			if res.ExitCode != 0 || string(res.Stdout) != "by the file API\nby a command\n" {
				t.Fatalf("exec in the workspace as %s: %+v (stderr %q)", tc.user, res, res.Stderr)
			}
		})
	}
}

// TestEmulatorRefusesAWorkspaceTheUserCannotMake: the emulator's model of the image's user
// (daytonatest/workspace.go), against which TestWorkspaceForEveryImageUser holds: a
// snapshot whose Dockerfile makes no /workspace, as trueforge's builds did before
// withWorkspace, gives sandboxes that run as daytona and fail at `mkdir -p /workspace`;
// BuildState reads such a snapshot as one to rebuild (OutdatedReason), and StartBuild
// replaces it by one whose sandboxes work.
func TestEmulatorRefusesAWorkspaceTheUserCannotMake(t *testing.T) {
	t.Parallel()
	srv, c, ctx, b := setupBuilder(t)
	req := buildReq("true")
	old := daytona.CreateSnapshotRequest{Name: req.ID, BuildInfo: &daytona.BuildInfo{DockerfileContent: "FROM " + daytona.DefaultReleaseImage + "\n"}}
	if _, err := c.CreateSnapshot(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSnapshot(ctx, req.ID); err != nil {
		t.Fatal(err)
	}
	rt := daytona.NewRuntime(c)
	err := rt.Create(ctx, sandbox.CreateRequest{ID: "old", SnapshotID: req.ID})
	if err == nil || !strings.Contains(err.Error(), "work directory") || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("a sandbox of a snapshot without /workspace: %v; want the work directory refused", err)
	}
	st, err := b.BuildState(ctx, req.ID)
	if err != nil || st.Status != sandbox.StatusFailed || st.Reason != daytona.OutdatedReason {
		t.Fatalf("BuildState of the old snapshot: %+v, %v; want Failed with OutdatedReason", st, err)
	}
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("rebuild: %+v", st)
	}
	if in, _ := srv.SnapshotInputs(req.ID); !strings.Contains(in.Dockerfile, "WORKDIR /workspace") {
		t.Fatalf("the rebuilt snapshot's Dockerfile lacks the workspace:\n%s", in.Dockerfile)
	}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "new", SnapshotID: req.ID}); err != nil {
		t.Fatalf("a sandbox of the rebuilt snapshot: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "new") })
	if err := rt.WriteFile(ctx, "new", "x", strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
