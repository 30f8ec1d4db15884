package daytona_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

func TestDockerfile(t *testing.T) {
	t.Parallel()
	if got := daytona.Dockerfile("ubuntu:24.04", "", "  \n"); got != "FROM ubuntu:24.04\n" {
		t.Fatalf("no script: %q", got)
	}
	if got := daytona.Dockerfile("img:1", daytona.PlatformImageUser, "  \n"); got != "FROM img:1\n" {
		t.Fatalf("no script, platform user: %q", got)
	}
	script := "set -x\necho 'quoted' \"$HOME\" \\\n  && apt-get install -y jq\n"
	got := daytona.Dockerfile("ubuntu:24.04", "", script)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 || lines[0] != "FROM ubuntu:24.04" || !strings.HasPrefix(lines[1], "RUN echo ") {
		t.Fatalf("dockerfile:\n%s", got)
	}
	enc := strings.Fields(lines[1])[2]
	dec, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || string(dec) != script {
		t.Fatalf("script does not round-trip: %q %v", dec, err)
	}
	// root needs no switch.
	if got := daytona.Dockerfile("ubuntu:24.04", "root", script); strings.Contains(got, "USER") {
		t.Fatalf("root image user:\n%s", got)
	}
}

// TestDockerfileRunsScriptAsRoot: on an image whose user is not root (the platform
// image's daytona), the script's RUN is between USER root and USER <the image's user>,
// so that the script runs as root and the sandboxes as the image's user (M2).
func TestDockerfileRunsScriptAsRoot(t *testing.T) {
	t.Parallel()
	if daytona.PlatformImageUser != "daytona" {
		t.Fatalf("PlatformImageUser = %q", daytona.PlatformImageUser)
	}
	got := daytona.Dockerfile("daytonaio/sandbox:0.4.3", daytona.PlatformImageUser, "apt-get install -y jq\n")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 || lines[0] != "FROM daytonaio/sandbox:0.4.3" || lines[1] != "USER root" ||
		!strings.HasPrefix(lines[2], "RUN echo ") || lines[3] != "USER daytona" {
		t.Fatalf("dockerfile:\n%s", got)
	}
}

func TestBuildToReadyAndReuse(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t)

	rel, err := b.PrepareRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rel, "trueforge-release-") || srv.SnapshotState(rel) != "active" {
		t.Fatalf("release %q is %q", rel, srv.SnapshotState(rel))
	}
	if again, err := b.PrepareRelease(ctx); err != nil || again != rel {
		t.Fatalf("second PrepareRelease = %q, %v", again, err)
	}
	if n := srv.Count("POST /snapshots"); n != 1 {
		t.Fatalf("release: POST /snapshots = %d, want 1", n)
	}

	req := buildReq("echo hello > /etc/motd")
	req.Base = rel
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("state %+v", st)
	}
	df := srv.SnapshotDockerfile(req.ID)
	if !strings.HasPrefix(df, "FROM "+daytona.DefaultReleaseImage+"\nUSER root\nRUN ") {
		t.Fatalf("dockerfile:\n%s", df)
	}

	// Reuse: an active snapshot with the same id issues zero POST /snapshots.
	srv.ResetCounts()
	if err := b.StartBuild(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("POST /snapshots"); n != 0 {
		t.Fatalf("reuse: POST /snapshots = %d, want 0", n)
	}

	// Inactive: StartBuild re-activates instead of rebuilding.
	srv.DeactivateSnapshot(req.ID)
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("state %+v", st)
	}
	if a, p := srv.Count("POST /snapshots/{id}/activate"), srv.Count("POST /snapshots"); a != 1 || p != 0 {
		t.Fatalf("activate = %d, POST /snapshots = %d", a, p)
	}

	// Inactive seen by BuildState: it only reads (a refresh never writes) and reports
	// Failed with the reason, so the next apply re-activates it.
	srv.ResetCounts()
	srv.DeactivateSnapshot(req.ID)
	st, err := b.BuildState(ctx, req.ID)
	if err != nil || st.Status != sandbox.StatusFailed || st.Reason != daytona.InactiveReason {
		t.Fatalf("BuildState on inactive = %+v, %v", st, err)
	}
	if n := srv.Count("POST /snapshots/{id}/activate"); n != 0 {
		t.Fatalf("BuildState wrote: activate = %d", n)
	}
}

func TestBuildFailed(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t)

	req := buildReq("make all")
	srv.FailNextBuild("Build failed: make: *** [all] Error 2", "step 2/2: make all\nmake: *** [all] Error 2")
	st := build(t, ctx, b, req)
	if st.Status != sandbox.StatusFailed || st.Reason != "Build failed: make: *** [all] Error 2" {
		t.Fatalf("state %+v", st)
	}
	if !strings.Contains(st.LogTail, "step 2/2: make all") {
		t.Fatalf("log tail %q", st.LogTail)
	}

	// A rerun deletes the failed snapshot and builds again.
	srv.ResetCounts()
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("rebuild %+v", st)
	}
	if d, p := srv.Count("DELETE /snapshots/{id}"), srv.Count("POST /snapshots"); d != 1 || p != 1 {
		t.Fatalf("DELETE = %d, POST = %d", d, p)
	}

	// The marker in the build script fails the build too.
	req2 := buildReq("echo " + daytonatest.DefaultFailMarker)
	if st := build(t, ctx, b, req2); st.Status != sandbox.StatusFailed || st.Reason == "" {
		t.Fatalf("marker build %+v", st)
	}
}

func TestBuilderNotFoundAndDelete(t *testing.T) {
	t.Parallel()
	srv, c, ctx, b := setupBuilder(t, daytonatest.WithRemovalDelay(30*time.Millisecond))
	if _, err := b.BuildState(ctx, "snap-missing"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	if err := b.DeleteSnapshot(ctx, "snap-missing"); err != nil {
		t.Fatalf("delete missing: %v", err)
	}

	id := readySnapshot(t, ctx, c, "true")
	// Deleted out of band: BuildState says not found.
	srv.DeleteSnapshot(id)
	if _, err := b.BuildState(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}

	// Delete through the builder; while `removing` it reads as not found; a rebuild waits for
	// the name to be free.
	id = readySnapshot(t, ctx, c, "true")
	if err := b.DeleteSnapshot(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.BuildState(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("removing: want ErrNotFound, got %v", err)
	}
	if err := b.DeleteSnapshot(ctx, id); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := b.StartBuild(ctx, buildReq("true")); err != nil {
		t.Fatalf("rebuild after delete: %v", err)
	}
}

func TestBuildSurvivesFaults(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t)
	req := buildReq("true")
	srv.InjectFaults("GET /snapshots/{id}", 3, 503)
	srv.InjectFaults("POST /snapshots", 1, 429)
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("state %+v", st)
	}
	if n := srv.Count("POST /snapshots"); n != 2 {
		t.Fatalf("POST /snapshots = %d, want 2 (one 429, one created)", n)
	}
}

func TestIdleSnapshotBecomesInactive(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, daytonatest.WithIdleTimeout(200*time.Millisecond))
	ctx := testCtx(t)
	id := readySnapshot(t, ctx, c, "true")
	for srv.SnapshotState(id) != "inactive" {
		select {
		case <-ctx.Done():
			t.Fatalf("snapshot never went inactive: %s", srv.SnapshotState(id))
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Creating a sandbox from an inactive snapshot is a documented 400.
	_, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Snapshot: id})
	if !hasStatus(err, 400) || !strings.Contains(err.Error(), "is inactive") {
		t.Fatalf("want 400 inactive, got %v", err)
	}
	srv.ResetCounts()
	b := daytona.NewBuilder(c)
	if err := b.StartBuild(ctx, buildReq("true")); err != nil {
		t.Fatal(err)
	}
	if a, p := srv.Count("POST /snapshots/{id}/activate"), srv.Count("POST /snapshots"); a != 1 || p != 0 {
		t.Fatalf("activate = %d, POST /snapshots = %d", a, p)
	}
}
