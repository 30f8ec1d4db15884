package daytona_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestLifecycleIntervals pins the mapping of an agent's timings onto Daytona's intervals:
// whole minutes rounded up, archive left at Daytona's maximum so that a stopped sandbox is
// deleted before Daytona would archive it (an archived one is never auto-deleted), and
// the agent's archive timing kept only when the delete timing is beyond that maximum.
func TestLifecycleIntervals(t *testing.T) {
	t.Parallel()
	_, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	for i, tc := range []struct {
		l                     sandbox.Lifecycle
		stop, archive, delete int
	}{
		{sandbox.Lifecycle{}, 0, 10080, -1}, // the runtime's own values (AutoStop 0 here)
		{sandbox.Lifecycle{IdleStop: 15 * time.Minute, ArchiveAfter: 1425 * time.Minute, DeleteAfter: 10065 * time.Minute}, 15, 43200, 10065},
		{sandbox.Lifecycle{IdleStop: 30 * time.Second, ArchiveAfter: 61 * time.Second, DeleteAfter: 90*time.Minute + time.Second}, 1, 43200, 91},
		{sandbox.Lifecycle{IdleStop: time.Minute, ArchiveAfter: time.Hour, DeleteAfter: 31 * 24 * time.Hour}, 1, 60, 44640},
		{sandbox.Lifecycle{IdleStop: time.Minute, ArchiveAfter: time.Hour, DeleteAfter: -1}, 1, 60, -1},
		// Ephemeral (a GPU sandbox): deleted as it stops, whatever the delete timing.
		{sandbox.Lifecycle{IdleStop: 10 * time.Minute, ArchiveAfter: time.Hour, DeleteAfter: 7 * 24 * time.Hour, DeleteOnStop: true}, 10, 43200, 0},
	} {
		id := fmt.Sprintf("iv-%d", i)
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: snap, Lifecycle: tc.l}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(testCtx(t), id) })
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if *sb.AutoStopInterval != tc.stop || *sb.AutoArchiveInterval != tc.archive || *sb.AutoDeleteInterval != tc.delete {
			t.Errorf("%+v: intervals stop=%d archive=%d delete=%d; want %d %d %d", tc.l,
				*sb.AutoStopInterval, *sb.AutoArchiveInterval, *sb.AutoDeleteInterval, tc.stop, tc.archive, tc.delete)
		}
	}
}

// TestLifecycleByDaytona: with nobody calling the API (no harness), a sandbox created
// with an agent's timings is stopped after its idle timing (toolbox calls count as
// activity) and deleted its delete timing after the stop, by the emulator's crons as
// Daytona runs them.
func TestLifecycleByDaytona(t *testing.T) {
	t.Parallel()
	srv, _, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	l := sandbox.Lifecycle{IdleStop: 10 * time.Minute, ArchiveAfter: 50 * time.Minute, DeleteAfter: 7 * 24 * time.Hour}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "lc", SnapshotID: snap, Lifecycle: l}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "lc") })
	srv.Advance(9 * time.Minute)
	mustExec(t, rt, "lc", sandbox.ExecRequest{Shell: "true"}) // activity: the timer starts again
	srv.Advance(9 * time.Minute)
	if st := srv.SandboxState("lc"); st != "started" {
		t.Fatalf("18 minutes after creation, 9 after a command: %q; want started", st)
	}
	srv.Advance(90 * time.Second)
	if st := srv.SandboxState("lc"); st != "stopped" {
		t.Fatalf("10.5 minutes idle: %q; want stopped", st)
	}
	info, err := rt.Get(ctx, "lc")
	if err != nil || info.Status != sandbox.SandboxStopped {
		t.Fatalf("runtime sees %+v, %v; want Stopped", info, err)
	}
	srv.Advance(7*24*time.Hour - time.Minute)
	if st := srv.SandboxState("lc"); st != "stopped" {
		t.Fatalf("a minute before the delete timing: %q; want stopped (Daytona's archive is left at its maximum)", st)
	}
	srv.Advance(2 * time.Minute)
	if st := srv.SandboxState("lc"); st != "" {
		t.Fatalf("after the delete timing: %q; want deleted", st)
	}
	if _, err := rt.Get(ctx, "lc"); err == nil {
		t.Fatal("the runtime still finds the deleted sandbox")
	}
}

// TestLifecycleArchivedNotDeleted: Daytona deletes stopped sandboxes only, so one whose
// delete timing is past Daytona's 30-day archive maximum is archived on the agent's
// archive timing and then kept (the harness's reaper deletes it); the emulator does as
// Daytona does.
func TestLifecycleArchivedNotDeleted(t *testing.T) {
	t.Parallel()
	srv, _, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	l := sandbox.Lifecycle{IdleStop: time.Minute, ArchiveAfter: time.Hour, DeleteAfter: 31 * 24 * time.Hour}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "arch", SnapshotID: snap, Lifecycle: l}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "arch") })
	srv.Advance(2 * time.Minute)
	srv.Advance(61 * time.Minute)
	if st := srv.SandboxState("arch"); st != "archived" {
		t.Fatalf("an hour after the stop: %q; want archived", st)
	}
	srv.Advance(32 * 24 * time.Hour)
	if st := srv.SandboxState("arch"); st != "archived" {
		t.Fatalf("past the delete timing: %q; want still archived (Daytona auto-deletes stopped sandboxes only)", st)
	}
}

// TestLiveSettingsReachDaytona: the environment's labels and CIDRs reach the sandbox
// (labels beside the runtime's own, CIDRs as networkAllowList), and CIDRs Daytona would
// refuse are refused before any request, naming the entry.
func TestLiveSettingsReachDaytona(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	req := sandbox.CreateRequest{ID: "live", SnapshotID: snap, Labels: map[string]string{"cost-center": "ml-42", "trueforge.session": "s1"},
		AllowCIDRs: []string{"203.0.113.0/24", "198.51.100.7/32"}}
	if err := rt.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "live") })
	sb, err := c.GetSandbox(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Labels["cost-center"] != "ml-42" || sb.Labels["trueforge.session"] != "s1" || sb.Labels[daytona.LabelManaged] != "true" ||
		sb.Labels["trueforge.plane"] != "test" {
		t.Fatalf("labels %v", sb.Labels)
	}
	if sb.NetworkAllowList != "203.0.113.0/24,198.51.100.7/32" {
		t.Fatalf("networkAllowList %q", sb.NetworkAllowList)
	}
	info, err := rt.Get(ctx, "live")
	if err != nil || info.Labels["cost-center"] != "ml-42" {
		t.Fatalf("Get: %+v %v", info, err)
	}

	before := srv.Count("POST /sandbox")
	for _, bad := range [][]string{
		{"2001:db8::/32"},
		{"203.0.113.9"},
		strings.Split(strings.Repeat("203.0.113.0/24,", daytona.MaxCIDRs+1), ",")[:daytona.MaxCIDRs+1],
	} {
		err := rt.Create(ctx, sandbox.CreateRequest{ID: "bad-cidr", SnapshotID: snap, AllowCIDRs: bad})
		if err == nil || !strings.Contains(err.Error(), "networkAllowList") {
			t.Errorf("CIDRs %v: %v; want a refusal naming networkAllowList", bad, err)
		}
	}
	if n := srv.Count("POST /sandbox") - before; n != 0 {
		t.Fatalf("%d create requests for refused CIDRs", n)
	}
	// block_all wins: no allow list is sent.
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "blocked", SnapshotID: snap, BlockNetwork: true, AllowCIDRs: []string{"203.0.113.0/24"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "blocked") })
	if sb, err := c.GetSandbox(ctx, "blocked"); err != nil || !sb.NetworkBlockAll || sb.NetworkAllowList != "" {
		t.Fatalf("blocked sandbox: %+v %v", sb, err)
	}
}

// TestCheckEnvironmentCIDRs: what Daytona refuses in network.allow_cidrs is refused at
// plan time with the attribute named.
func TestCheckEnvironmentCIDRs(t *testing.T) {
	t.Parallel()
	b := testBackend()
	var many []string
	for i := range daytona.MaxCIDRs + 1 {
		many = append(many, fmt.Sprintf("203.0.113.%d/32", i))
	}
	got := b.CheckEnvironment(t.Context(), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Name: "e", Spec: sandbox.SnapshotSpec{CPU: 1, MemoryGB: 1, DiskGB: 3},
		AllowCIDRs: append(many, "2001:db8::/32")})
	if len(got) != 2 || got[0].Attribute != "network.allow_cidrs" || got[0].Warning || !strings.Contains(got[0].Detail, "at most 10") ||
		got[1].Attribute != "network.allow_cidrs" || !strings.Contains(got[1].Detail, "IPv4 CIDRs only") {
		t.Fatalf("problems %+v", got)
	}
	if got := b.CheckEnvironment(t.Context(), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Name: "ok", Spec: sandbox.SnapshotSpec{CPU: 1, MemoryGB: 1, DiskGB: 3},
		AllowCIDRs: many[:daytona.MaxCIDRs]}); len(got) != 0 {
		t.Fatalf("%d CIDRs: %+v", daytona.MaxCIDRs, got)
	}
}
