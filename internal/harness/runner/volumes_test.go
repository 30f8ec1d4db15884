package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// localVolume creates volume name on the store's local sandbox provider for real,
// deleted when the test ends, and returns it with the provider's configuration.
func localVolume(t *testing.T, st *store.Store, name string) (sandbox.Volume, sandbox.ProviderConfig) {
	t.Helper()
	ctx := context.Background()
	prov, err := st.GetSandboxProvider(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	be, cfg := harnesstest.Backend(t, st, prov)
	vs, err := be.Volumes(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vs.Delete(context.Background(), v.ID) })
	return v, cfg
}

// A volume listed in an environment's volumes is mounted in the sandbox of every
// session of that environment: a file one session's sandbox writes there is read in
// another session's sandbox, while each keeps its own workspace.
func TestVolumeSharedBetweenSessions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.env.Store
	v, _ := localVolume(t, st, "shared")
	if err := st.CreateVolume(ctx, store.Volume{Name: "shared", Provider: "local", Owner: harnesstest.Owner, RemoteID: v.ID}); err != nil {
		t.Fatal(err)
	}
	editEnvironment(t, st, "default", func(env *store.Environment) {
		env.Settings.Volumes = []store.EnvironmentVolume{{Volume: "shared", MountPath: "/data"}}
	})

	writer, ws := f.scripted(t, "writer", exec("echo from-session-a > /data/note && echo private > mine.txt"), text("written"))
	reader, rs := f.scripted(t, "reader", exec("cat /data/note; ls mine.txt 2>&1; echo ok > /data/reply"), text("read"))
	mustRun(t, writer, ws, "write")
	mustRun(t, reader, rs, "read")
	if got := f.env.Runtime.Calls("Create"); got != 2 {
		t.Fatalf("Create called %d times; want one sandbox per session", got)
	}
	out := lastResult(t, st, rs)
	if !strings.Contains(out, "from-session-a") {
		t.Fatalf("session B's sandbox read %q from the volume; want session A's file", out)
	}
	if !strings.Contains(out, "No such file") {
		t.Fatalf("session B's sandbox sees session A's workspace: %q", out)
	}
	// The volume was made without a size (a plain directory): the sandbox's event says
	// that its size is not enforced.
	events := harnesstest.Payloads(t, st, rs, "sandbox_provisioned")
	if len(events) != 1 || !strings.Contains(fmt.Sprint(events[0]["unenforced_limits"]), "volume shared has no size limit") {
		t.Fatalf("sandbox_provisioned %v; want the volume's size among the unenforced limits", events)
	}
}

// The attack of issue 23, past the provider: team B's volume holds a file; a row of team
// A's (the environment's settings, written straight into the store) mounts it, and team
// A's agent tries to read B's file and leave one of its own. The harness refuses to
// provision, with the reason, and on the host B's volume holds only B's file. Once B
// shares the volume with A the same environment mounts it; once B takes that back, a new
// sandbox is refused again.
func TestVolumeOfAnotherOwnerRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.env.Store
	v, cfg := localVolume(t, st, "team-b")
	const teamB = "team_b"
	must(t, st.CreateVolume(ctx, store.Volume{Name: "team-b", Provider: "local", Owner: teamB, RemoteID: v.ID}))
	// Where the volume lives on the host: the local backend's volumes directory.
	hostDir := filepath.Join(cfg.DataDir, "local-backend", "volumes", v.ID)
	if _, err := os.Stat(hostDir); err != nil {
		t.Fatalf("team B's volume on the host: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(hostDir, "b-secret.txt"), []byte("team-b-private-figures\n"), 0o644))

	var envOwner string
	editEnvironment(t, st, "default", func(env *store.Environment) {
		envOwner = env.Owner
		if env.Owner == teamB {
			t.Fatalf("the fixture's environment is team B's own")
		}
		env.Settings.Volumes = []store.EnvironmentVolume{{Volume: "team-b", MountPath: "/data"}}
	})

	attack := "cat /data/b-secret.txt; echo from-team-a > /data/from-a.txt; ls /data"
	thief := func(name string) (string, string) {
		r, sid := f.scripted(t, name, exec(attack), text("done"))
		mustRun(t, r, sid, "go")
		out := lastResult(t, st, sid)
		return sid, out
	}
	_, out := thief("thief")
	if got := f.env.Runtime.Calls("Create"); got != 0 {
		t.Fatalf("Create called %d times for an environment mounting another owner's unshared volume; want 0", got)
	}
	if strings.Contains(out, "team-b-private-figures") || !strings.Contains(out, `volume "team-b"`) || !strings.Contains(out, "not shared with") {
		t.Fatalf("the tool result %q: want the refusal naming the volume, and none of team B's file", out)
	}
	onHost := func() []string {
		entries, err := os.ReadDir(hostDir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	if got := onHost(); len(got) != 1 || got[0] != "b-secret.txt" {
		t.Fatalf("team B's volume on the host holds %v; want only b-secret.txt", got)
	}

	// Shared with the environment's owner, it mounts; taken back, it does not: neither
	// in a new sandbox nor by reusing the one that mounted it.
	must(t, st.UpdateVolume(ctx, "team-b", store.DefaultVolumeSizeGB, []string{envOwner}))
	guest, gs := f.scripted(t, "guest", exec(attack), text("done"), exec("cat /data/b-secret.txt"), text("again"))
	mustRun(t, guest, gs, "go")
	if out := lastResult(t, st, gs); !strings.Contains(out, "team-b-private-figures") {
		t.Fatalf("with team B's consent the sandbox reads %q; want B's file", out)
	}
	must(t, st.UpdateVolume(ctx, "team-b", store.DefaultVolumeSizeGB, nil))
	mustRun(t, guest, gs, "again")
	if out := lastResult(t, st, gs); strings.Contains(out, "team-b-private-figures") || !strings.Contains(out, "no longer shares it") {
		t.Fatalf("reusing the sandbox after team B unshared its volume: %q; want the refusal", out)
	}
	before := f.env.Runtime.Calls("Create")
	if _, out := thief("after-unshare"); !strings.Contains(out, "not shared with") {
		t.Fatalf("after team B unshared the volume: %q; want the refusal", out)
	}
	if got := f.env.Runtime.Calls("Create"); got != before {
		t.Fatalf("a sandbox was created after team B unshared its volume")
	}
}

// The same attack by another route: team X's environment (no secrets, so any team's
// agent may run on it) mounts X's own volume; team A's agent on it gets no sandbox, so
// X's volume serves only the owners X shares it with.
func TestVolumeNotLentThroughEnvironment(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.env.Store
	const teamX = "team_x"
	must(t, st.CreateVolume(ctx, store.Volume{Name: "team-x", Provider: "local", Owner: teamX, RemoteID: "team-x"}))
	editEnvironment(t, st, "default", func(env *store.Environment) {
		env.Settings.Volumes = []store.EnvironmentVolume{{Volume: "team-x", MountPath: "/data"}}
	})
	if _, err := st.Exec(ctx, `UPDATE environments SET owner = ? WHERE name = 'default'`, teamX); err != nil {
		t.Fatal(err)
	}
	r, sid := f.scripted(t, "borrower", exec("ls /data"), text("done"))
	mustRun(t, r, sid, "go")
	if got := f.env.Runtime.Calls("Create"); got != 0 {
		t.Fatalf("Create called %d times for another owner's agent on an environment mounting its owner's unshared volume; want 0", got)
	}
	if out := lastResult(t, st, sid); !strings.Contains(out, `mounts volume "team-x", owned by "team_x" and not shared with "`+harnesstest.Owner+`"`) {
		t.Fatalf("the tool result %q: want the refusal naming the volume and the agent's owner", out)
	}
}

// A sandbox whose environment mounts a volume that is gone is refused with the reason,
// rather than created without the volume.
func TestVolumeMissingRefusesSandbox(t *testing.T) {
	f := newFixture(t)
	st := f.env.Store
	editEnvironment(t, st, "default", func(env *store.Environment) {
		env.Settings.Volumes = []store.EnvironmentVolume{{Volume: "gone", MountPath: "/data"}}
	})
	r, sid := f.scripted(t, "w", exec("ls /data"), text("done"))
	mustRun(t, r, sid, "go")
	if got := f.env.Runtime.Calls("Create"); got != 0 {
		t.Fatalf("Create called %d times for an environment whose volume is gone; want 0", got)
	}
	out := lastResult(t, st, sid)
	if !strings.Contains(out, `volume "gone"`) {
		t.Fatalf("the tool result %q does not say which volume is missing", out)
	}
}

// On Daytona (the emulator, whose sandboxes are local ones) the same holds: the
// sandboxes of two sessions are created with the environment's volume by its Daytona
// id, and share its files.
func TestDaytonaVolumeSharedBetweenSessions(t *testing.T) {
	f := newDaytonaFixture(t)
	ctx := context.Background()
	v, err := f.client.CreateVolume(ctx, "trueforge-shared")
	if err != nil {
		t.Fatal(err)
	}
	if v, err = f.client.WaitVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	must(t, f.st.CreateVolume(ctx, store.Volume{Name: "shared", Provider: "dt", Owner: harnesstest.Owner, RemoteID: v.ID}))
	e, err := f.st.GetEnvironment(ctx, "dtenv")
	if err != nil {
		t.Fatal(err)
	}
	e.Settings.Volumes = []store.EnvironmentVolume{{Volume: "shared", MountPath: "/data", Subpath: "sessions"}}
	must(t, f.st.UpdateEnvironment(ctx, e))

	run := func(agent, cmd string) (string, string) {
		harnesstest.AddAgent(t, f.st, agent, "dtenv", harnesstest.AgentSpec{
			"model":   harnesstest.Script(exec(cmd), text("done")),
			"sandbox": harnesstest.Sandbox("dtenv", 15, 60, 120),
		})
		r := f.runner(t, agent)
		sid := ownerSession(t, r)
		mustRun(t, r, sid, "go")
		out := lastResult(t, f.st, sid)
		return sid, out
	}
	sa, _ := run("writer", "echo from-session-a > /data/note")
	sb, out := run("reader", "cat /data/note")
	for _, sid := range []string{sa, sb} {
		rec, err := f.st.GetSessionSandbox(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.srv.SandboxVolumes(rec.SandboxID); len(got) != 1 || got[0]["volumeId"] != v.ID || got[0]["mountPath"] != "/data" || got[0]["subpath"] != "sessions" {
			t.Fatalf("session %s's Daytona sandbox volumes: %v", sid, got)
		}
	}
	if f.srv.LocalSandboxes() && !strings.Contains(out, "from-session-a") {
		t.Fatalf("session B's sandbox read %q from the volume; want session A's file", out)
	}
}
