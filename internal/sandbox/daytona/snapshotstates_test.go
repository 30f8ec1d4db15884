package daytona_test

import (
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// Daytona refuses to activate a snapshot soon after its deactivation (400 "deactivation
// is still in progress"): the builder waits that out and activates it then, without
// building again.
func TestActivationWaitsOutTheCooldown(t *testing.T) {
	t.Parallel()
	srv, c, ctx, b := setupBuilder(t, daytonatest.WithActivationCooldown(300*time.Millisecond))
	req := buildReq("echo cooldown")
	name := readySnapshot(t, ctx, c, "echo cooldown")
	srv.DeactivateSnapshot(name) // as Daytona's idle cron does
	srv.ResetCounts()
	start := time.Now()
	if err := b.StartBuild(ctx, req); err != nil {
		t.Fatalf("start build of a just-deactivated snapshot: %v", err)
	}
	if n := srv.Count("POST /snapshots/{id}/activate"); n < 2 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("%d activations in %s; want a refused one, then one after the cooldown", n, time.Since(start))
	}
	if st := waitBuild(t, ctx, b, req.ID); st.Status != sandbox.StatusReady || srv.Count("POST /snapshots") != 0 {
		t.Fatalf("after activation: %+v, %d creates", st, srv.Count("POST /snapshots"))
	}
}

// A snapshot on its way to active (here v0.205's `snapshotting`) is left alone: no
// delete, no second create.
func TestInProgressSnapshotIsNotRebuilt(t *testing.T) {
	t.Parallel()
	srv, c, ctx, b := setupBuilder(t)
	req := buildReq("echo capturing")
	readySnapshot(t, ctx, c, "echo capturing")
	srv.SetSnapshotState(req.ID, daytona.SnapshotSnapshotting)
	srv.ResetCounts()
	if err := b.StartBuild(ctx, req); err != nil {
		t.Fatal(err)
	}
	if d, p := srv.Count("DELETE /snapshots/{id}"), srv.Count("POST /snapshots"); d != 0 || p != 0 {
		t.Fatalf("a snapshotting snapshot was rebuilt: %d deletes, %d creates", d, p)
	}
	if st, err := b.BuildState(ctx, req.ID); err != nil || st.Status != sandbox.StatusBuilding {
		t.Fatalf("state of a snapshotting snapshot: %+v %v", st, err)
	}
}

// The build log of a failed build is fetched once per failure, however often the state is
// read (build-logs-url may take 30 s), and never for a snapshot made from an image, which
// has none (404 "has no build info").
func TestFailedBuildLogFetchedOnce(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t, daytonatest.WithBuildLogsURLDelay(50*time.Millisecond))
	req := buildReq("make all")
	srv.FailNextBuild("Build failed: exit 2", "step 2/2: make all")
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusFailed || !strings.Contains(st.LogTail, "step 2/2: make all") {
		t.Fatalf("failed build: %+v", st)
	}
	for range 3 {
		if st, err := b.BuildState(ctx, req.ID); err != nil || !strings.Contains(st.LogTail, "step 2/2: make all") {
			t.Fatalf("failed build read again: %+v %v", st, err)
		}
	}
	if n := srv.Count("GET /snapshots/{id}/build-logs-url"); n != 1 {
		t.Fatalf("build-logs-url asked %d times for one failure; want 1", n)
	}

	srv.FailNextBuild("pull access denied", "")
	if _, err := b.PrepareRelease(ctx); err == nil {
		t.Fatal("the failing release was prepared")
	}
	srv.ResetCounts()
	if st, err := b.BuildState(ctx, b.ReleaseName()); err != nil || st.Status != sandbox.StatusFailed || st.LogTail != "" {
		t.Fatalf("failed image snapshot: %+v %v", st, err)
	}
	if n := srv.Count("GET /snapshots/{id}/build-logs-url"); n != 0 {
		t.Fatalf("build-logs-url asked %d times for an image snapshot; want 0", n)
	}
}

// A JWT as api_key is refused as what it is: Daytona answers it with 401, like a bad key.
func TestCheckCredentialsJWT(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t)
	p := sandbox.ProviderConfig{Name: "daytona", Type: daytona.Type, APIURL: srv.URL(),
		APIKey: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJl"}
	_, problems := testBackend().CheckCredentials(testCtx(t), p)
	if len(problems) != 1 || problems[0].Summary != "Daytona API Key Required" || !strings.Contains(problems[0].Detail, "looks like a JWT") ||
		!strings.Contains(problems[0].Detail, "(401)") {
		t.Fatalf("JWT: %+v; want it named as a JWT", problems)
	}
}
