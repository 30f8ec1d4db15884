package daytona_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// A snapshot lives only in its region (Daytona answers a sandbox create elsewhere with
// 400), so the builder creates snapshots in the target's region (resolving a region name
// to its id, which snapshot create requires) or the environment's, replaces one found in
// another region when asked to build it, and sandboxes are created where their snapshot
// lives.
func TestSnapshotsFollowTheTargetRegion(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t, daytonatest.WithRegions(
		daytonatest.Region{ID: "r-us-1", Name: "us"}, daytonatest.Region{ID: "r-eu-1", Name: "eu"}))
	ctx := testCtx(t)
	client := func(target string) *daytona.Client {
		return daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithRetryPolicy(fastRetry),
			daytona.WithPollInterval(5*time.Millisecond), daytona.WithTarget(target))
	}
	def, eu := client(""), client("eu")

	// Built with no target: in the organization's default region, where Daytona refuses
	// sandboxes of other regions.
	snap := readySnapshot(t, ctx, def, "echo regions")
	if s, err := def.GetSnapshot(ctx, snap); err != nil || strings.Join(s.RegionIDs, ",") != "r-us-1" {
		t.Fatalf("snapshot without a target: %+v %v", s, err)
	}
	_, err := eu.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "raw", Snapshot: snap})
	if err == nil || !strings.Contains(err.Error(), "400 Snapshot "+snap+" is not available in region r-eu-1") {
		t.Fatalf("raw create in eu from a snapshot in us: %v; want Daytona's 400", err)
	}
	// The runtime creates the sandbox where the snapshot lives, and the snapshot reads as
	// Ready (it is usable: no rebuild on every plan).
	rt := &daytona.Runtime{C: eu}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "follows", SnapshotID: snap}); err != nil {
		t.Fatalf("create from a snapshot in another region: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "follows") })
	if sb, err := eu.GetSandbox(ctx, "follows"); err != nil || sb.Target != "r-us-1" {
		t.Fatalf("sandbox: %+v %v; want it in the snapshot's region", sb, err)
	}
	b := daytona.NewBuilder(eu)
	if st, err := b.BuildState(ctx, snap); err != nil || st.Status != sandbox.StatusReady {
		t.Fatalf("build state: %+v %v", st, err)
	}

	// Asked to build it with the target eu (a second sandbox provider on the same
	// organization), the builder refuses (issue 24 M3): names are unique per
	// organization, so replacing it would take the other provider's snapshot from under
	// its sandboxes. The refusal says how to get a snapshot of its own; the snapshot and
	// its sandboxes are left alone.
	req := buildReq("echo regions")
	err = b.StartBuild(ctx, req)
	if !errors.Is(err, daytona.ErrOtherRegion) || !strings.Contains(err.Error(), "Set region on the environment") {
		t.Fatalf("building in eu a snapshot that lives in us: %v; want ErrOtherRegion with the fix", err)
	}
	if s, err := eu.GetSnapshot(ctx, snap); err != nil || strings.Join(s.RegionIDs, ",") != "r-us-1" || s.State != daytona.SnapshotActive {
		t.Fatalf("the other region's snapshot after the refusal: %+v %v; want it untouched", s, err)
	}
	if res, err := rt.Exec(ctx, "follows", sandbox.ExecRequest{Shell: "true"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("the other provider's sandbox after the refusal: %+v %v", res, err)
	}

	// Each target gets a release of its own, so two providers never replace each other's.
	relDef, err := daytona.NewBuilder(def).PrepareRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	relEU, err := daytona.NewBuilder(client("r-eu-1")).PrepareRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if relDef != daytona.NewBuilder(def).ReleaseName() || relEU == relDef {
		t.Fatalf("releases: default %q, eu %q; want the default name and another for eu", relDef, relEU)
	}
	if again, err := daytona.NewBuilder(eu).PrepareRelease(ctx); err != nil || again != relEU {
		t.Fatalf("eu by name: %q %v; want %q (a region name resolves to its id)", again, err, relEU)
	}
	for name, want := range map[string]string{relDef: "r-us-1", relEU: "r-eu-1"} {
		if s, err := eu.GetSnapshot(ctx, name); err != nil || strings.Join(s.RegionIDs, ",") != want || s.State != daytona.SnapshotActive {
			t.Fatalf("release %s: %+v %v; want active in %s", name, s, err, want)
		}
	}
	if ref, err := eu.ResolveRegion(ctx, "r-eu-1"); err != nil || ref.ByName || ref.String() != "region r-eu-1 (given as its id)" {
		t.Fatalf("resolve an id: %+v %v", ref, err)
	}

	// An environment's region wins over the target.
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: "echo us", Region: "us"}
	pinned := sandbox.BuildRequest{ID: sandbox.SnapshotID(spec.BuildHash()), Spec: spec, Base: "release"}
	if st := build(t, ctx, b, pinned); st.Status != sandbox.StatusReady {
		t.Fatalf("build in us: %+v", st)
	}
	if s, err := eu.GetSnapshot(ctx, pinned.ID); err != nil || strings.Join(s.RegionIDs, ",") != "r-us-1" {
		t.Fatalf("snapshot with its own region: %+v %v", s, err)
	}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "pinned", SnapshotID: pinned.ID}); err != nil {
		t.Fatalf("create from the pinned snapshot: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "pinned") })
	if sb, err := eu.GetSandbox(ctx, "pinned"); err != nil || sb.Target != "r-us-1" {
		t.Fatalf("sandbox of the pinned snapshot: %+v %v", sb, err)
	}

	// A region the organization does not have is refused, naming those it has.
	err = daytona.NewBuilder(client("mars")).StartBuild(ctx, buildReq("echo mars"))
	if err == nil || !strings.Contains(err.Error(), `region "mars" is neither the id nor the name`) || !strings.Contains(err.Error(), "eu (id r-eu-1)") {
		t.Fatalf("unknown region: %v", err)
	}
}

// TestRegionNameBeforeID (issue 24 L14): a sandbox create resolves its target by name
// first, then by id (v0.190 sandbox.service.ts:2825-2828). Where one region's name is
// another's id, the builder resolves the same way, so the snapshot is made in the region
// the provider's sandboxes are created in, and they run there.
func TestRegionNameBeforeID(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t, daytonatest.WithRegions(
		daytonatest.Region{ID: "r-1", Name: "main"}, daytonatest.Region{ID: "eu", Name: "us"}, daytonatest.Region{ID: "us", Name: "west"}))
	ctx := testCtx(t)
	c := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithRetryPolicy(fastRetry),
		daytona.WithPollInterval(5*time.Millisecond), daytona.WithTarget("us"))
	ref, err := c.ResolveRegion(ctx, "us")
	if err != nil || ref.ID != "eu" || !ref.ByName {
		t.Fatalf(`resolving "us": %+v %v; want region eu, by its name as Daytona's sandbox create does`, ref, err)
	}
	snap := readySnapshot(t, ctx, c, "echo l14")
	if s, err := c.GetSnapshot(ctx, snap); err != nil || strings.Join(s.RegionIDs, ",") != "eu" {
		t.Fatalf("snapshot of target us: %+v %v; want it in eu (the region named us)", s, err)
	}
	rt := &daytona.Runtime{C: c}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "l14", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "l14") })
	if sb, err := c.GetSandbox(ctx, "l14"); err != nil || sb.Target != "eu" {
		t.Fatalf("sandbox: %+v %v; want it in eu with its snapshot", sb, err)
	}
}
