package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// Machines of these tests: one process stands for each through the local backend's
// Machine option; they share this machine's data directory, as machines sharing a
// database each have one.
var (
	machineA = local.Machine{ID: "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a", Hostname: "build-a"}
	machineB = local.Machine{ID: "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", Hostname: "harness-b"}
)

// buildOn builds an environment's snapshot with be (a Terraform apply on be's machine)
// and records environment env on it; the snapshot prints marker from /opt/where.
func buildOn(t *testing.T, f *fixture, be *local.Backend, env, marker string) store.Snapshot {
	t.Helper()
	ctx := context.Background()
	st := f.env.Store
	bl, err := be.Builder(ctx, sandbox.ProviderConfig{Name: "local", Type: "local", DataDir: st.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	release, err := bl.PrepareRelease(ctx) // there already, unless bl is on a directory of its own
	if err != nil {
		t.Fatal(err)
	}
	coord := &builds.Coordinator{Store: st, Builder: bl, Provider: "local"}
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: "echo " + marker + " > /opt/where", CPU: 1, MemoryGB: 1, DiskGB: 3}
	if _, err := coord.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: release, BlockNetwork: true}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	snap, err := coord.Wait(wctx, sandbox.SnapshotID(spec.BuildHash()))
	if err != nil || snap.Status != sandbox.StatusReady {
		t.Fatalf("build on %s: %+v, %v", be.Machine.Hostname, snap, err)
	}
	must(t, st.CreateEnvironment(ctx, store.Environment{ID: "env-" + env, Name: env, Provider: "local", Owner: harnesstest.Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: spec.BuildHash(), SnapshotID: snap.ID}))
	harnesstest.AddAgent(t, st, "on-"+env, env, harnesstest.AgentSpec{"model": harnesstest.Script(text("ok")), "sandbox": harnesstest.Sandbox(env, 15, 60, 120)})
	return snap
}

// harnessOn is a harness's lifecycle manager running with be (the harness on be's
// machine), through the real runtime source, on the fixture's clock.
func harnessOn(f *fixture, be *local.Backend) *lifecycle.Manager {
	rts := &backend.Runtimes{Plane: controlplane.New(f.env.Store), Backends: backends.Registry{local.Type: be}}
	return lifecycle.New(lifecycle.Config{Store: f.env.Store, Runtimes: rts, Now: f.clock.Now, Owner: "harness-" + be.Machine.Hostname + "~00000000:1:1"})
}

// provisionOn acquires a sandbox for a new session of env's agent with m and returns
// what /opt/where says in it, or the error.
func provisionOn(t *testing.T, f *fixture, m *lifecycle.Manager, env string) (string, string, error) {
	t.Helper()
	ctx := context.Background()
	a, err := agents.Load(ctx, f.env.Store, "on-"+env)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := f.runner(t, a.Name).NewSession(ctx, harnesstest.Owner)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx, sid, a)
	if err != nil {
		return sid, "", err
	}
	defer l.Release(ctx)
	res, err := l.Runtime.Exec(ctx, l.Record.SandboxID, sandbox.ExecRequest{Argv: []string{"cat", "/opt/where"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sid, strings.TrimSpace(string(res.Stdout)), nil
}

// refused checks that err refuses the snapshot for being elsewhere, with every want in
// its message, and that the session got no sandbox.
func refused(t *testing.T, f *fixture, sid string, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, lifecycle.ErrSnapshotElsewhere) {
		t.Fatalf("provisioning: %v; want it refused for the snapshot's place", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal lacks %q:\n%v", w, err)
		}
	}
	if _, gerr := f.env.Store.GetSessionSandbox(context.Background(), sid); !errors.Is(gerr, store.ErrNotFound) {
		t.Fatalf("the refused session has a sandbox record: %v", gerr)
	}
}

// A local snapshot built on machine A (Terraform applied there) records A as its host;
// a harness on machine B, sharing the database, refuses to provision from it with a
// message naming the snapshot, both hosts and the ways out, and creates nothing, while
// B's planning leaves the snapshot Ready (B cannot see A's files, which says nothing of
// them) and does not rebuild it. The harness on A provisions from it.
func TestLocalSnapshotOfAnotherMachineIsRefused(t *testing.T) {
	f, _ := pgReplicas(t)
	ctx := context.Background()
	onA, onB := &local.Backend{Machine: machineA}, &local.Backend{Machine: machineB}
	snap := buildOn(t, f, onA, "py", "built-on-a")
	recorded, err := f.env.Store.SnapshotHost(ctx, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	place, ok := sandbox.ParsePlace(recorded)
	if !ok || place.Host != "build-a" || place.Machine != machineA.ID || place.Shared || place.Dir != local.Root(f.env.Store.Dir()) {
		t.Fatalf("recorded host %q; want machine A's local directory", recorded)
	}

	sid, _, err := provisionOn(t, f, harnessOn(f, onB), "py")
	refused(t, f, sid, err, snap.ID, `environment "py"`, "host build-a", "machine id 0a0a0a0a0a0a", "this harness runs on host harness-b",
		"Run the harness on host build-a", "TRUEFORGE_LOCAL_SHARED_DIR", "Daytona")
	t.Logf("refusal: %v", err)

	blB, err := onB.Builder(ctx, sandbox.ProviderConfig{Name: "local", Type: "local", DataDir: f.env.Store.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	coordB := &builds.Coordinator{Store: f.env.Store, Builder: blB, Provider: "local"}
	if s, err := coordB.Refresh(ctx, snap.ID); err != nil || s.Status != sandbox.StatusReady {
		t.Fatalf("B's refresh of A's snapshot: %+v, %v; want it left Ready", s, err)
	}
	builds0, _ := f.env.Store.CountBuilds(ctx)
	var spec sandbox.SnapshotSpec
	spec.Image, spec.BuildScript, spec.CPU, spec.MemoryGB, spec.DiskGB = sandbox.PlatformImage, "echo built-on-a > /opt/where", 1, 1, 3
	if s, err := coordB.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: f.env.Snapshot, BlockNetwork: true}); err != nil || s.Status != sandbox.StatusReady {
		t.Fatalf("B's apply of the same inputs: %+v, %v", s, err)
	}
	if n, _ := f.env.Store.CountBuilds(ctx); n != builds0 {
		t.Fatalf("B's apply rebuilt A's snapshot (%d builds, was %d)", n, builds0)
	}

	harnessA := harnessOn(f, onA)
	sid, where, err := provisionOn(t, f, harnessA, "py")
	if err != nil || where != "built-on-a" {
		t.Fatalf("the harness on A: %q, %v; want A's snapshot", where, err)
	}

	// Its sandbox runs on A: B's reaper, which cannot see it, leaves it to A's, rather
	// than take it for gone and record it deleted.
	f.clock.Advance(16 * time.Minute)
	trs, err := harnessOn(f, onB).Reap(ctx)
	if err != nil || len(trs) != 0 {
		t.Fatalf("B's reaper acted on A's sandbox: %+v, %v", trs, err)
	}
	if s := recordState(t, f, sid); s != store.SandboxStateRunning {
		t.Fatalf("A's sandbox is %s after B's reap; want running", s)
	}
	if got := reapTransitions(t, harnessA, sid); got != "running>stopped" {
		t.Fatalf("A's reaper: %q; want running>stopped", got)
	}
}

// With a shared directory (TRUEFORGE_LOCAL_SHARED_DIR; here a directory of this machine
// standing in for storage every machine mounts), a snapshot built on A is recorded in
// that directory and runs on B, which uses it too; a harness without it is told to set
// it, and one with it refuses a snapshot built into a machine's own directory.
func TestSharedSnapshotDirectoryServesEveryMachine(t *testing.T) {
	f, _ := pgReplicas(t)
	ctx := context.Background()
	shared := t.TempDir()
	onA := &local.Backend{Machine: machineA, SharedDir: shared}
	snap := buildOn(t, f, onA, "shared", "built-on-a-shared")
	recorded, _ := f.env.Store.SnapshotHost(ctx, snap.ID)
	if place, ok := sandbox.ParsePlace(recorded); !ok || !place.Shared || place.Dir != shared || place.Host != "build-a" || place.Machine != "" {
		t.Fatalf("recorded host %q; want the shared directory, built on A", recorded)
	}

	if _, where, err := provisionOn(t, f, harnessOn(f, &local.Backend{Machine: machineB, SharedDir: shared}), "shared"); err != nil || where != "built-on-a-shared" {
		t.Fatalf("the harness on B with the shared directory: %q, %v; want A's snapshot", where, err)
	}

	sid, _, err := provisionOn(t, f, harnessOn(f, &local.Backend{Machine: machineB}), "shared")
	refused(t, f, sid, err, snap.ID, "shared directory "+shared, "built on host build-a", "TRUEFORGE_LOCAL_SHARED_DIR="+shared, "Daytona")

	own := buildOn(t, f, &local.Backend{Machine: machineA}, "own", "built-on-a-own")
	sid, _, err = provisionOn(t, f, harnessOn(f, &local.Backend{Machine: machineB, SharedDir: shared}), "own")
	refused(t, f, sid, err, own.ID, "host build-a", "was not built into it", "TRUEFORGE_LOCAL_SHARED_DIR="+shared)

	if _, err := (&local.Backend{SharedDir: "relative/dir"}).Builder(ctx, sandbox.ProviderConfig{DataDir: f.env.Store.Dir()}); err == nil ||
		!strings.Contains(err.Error(), "TRUEFORGE_LOCAL_SHARED_DIR") || !strings.Contains(err.Error(), "must be an absolute path") {
		t.Fatalf("a relative shared directory: %v", err)
	}
}

// On one machine, a snapshot built under one data directory (Terraform applying as one
// user) is refused by a harness with another (a harness user with its own
// TRUEFORGE_DATA_DIR), naming both directories.
func TestLocalSnapshotInAnotherDataDirectoryIsRefused(t *testing.T) {
	f, url := pgReplicas(t)
	onA := &local.Backend{Machine: machineA}
	snap := buildOn(t, f, onA, "py", "built-here")
	applied := f.env.Store.Dir()
	t.Setenv(store.DataDirEnv, t.TempDir()) // the harness's user keeps its files elsewhere
	other := storetest.Open(t, url)
	if other.Dir() == applied {
		t.Fatalf("the second store uses the same data directory %s", applied)
	}
	g := &fixture{env: &harnesstest.Env{Store: other}, clock: f.clock}
	sid, _, err := provisionOn(t, g, harnessOn(g, onA), "py")
	refused(t, g, sid, err, snap.ID, local.Root(applied), "host build-a", "on the same machine", local.Root(other.Dir()), "TRUEFORGE_DATA_DIR")
}
