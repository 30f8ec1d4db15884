package runner_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// dtFixture is a control plane whose provider is of the daytona type, on the emulator
// (its sandboxes are real local bubblewrap sandboxes), with environment "dtenv" on a
// snapshot the emulator built, one secret and an allow list.
type dtFixture struct {
	srv      *daytonatest.Server
	st       *store.Store
	client   *daytona.Client
	clock    *harnesstest.Clock
	manager  *lifecycle.Manager
	snapshot string
}

const dtSecretValue = "dt-real-secret-value-7f3a"

// firstTurn adds agent name on environment dtenv with the sandbox settings given and a
// model that plays turns, and runs a first turn of a new session of it; it returns the
// session with its sandbox's record and the sandbox as Daytona reports it.
func (f *dtFixture) firstTurn(t *testing.T, name string, sb map[string]any, turns ...map[string]any) (*runner.Runner, string, store.SessionSandbox, *daytona.Sandbox) {
	t.Helper()
	ctx := context.Background()
	harnesstest.AddAgent(t, f.st, name, "dtenv", harnesstest.AgentSpec{"model": harnesstest.Script(turns...), "sandbox": sb})
	r := f.runner(t, name)
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	mustRun(t, r, sid, "go")
	rec, err := f.st.GetSessionSandbox(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.client.GetSandbox(ctx, rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	return r, sid, rec, got
}

func newDaytonaFixture(t *testing.T) *dtFixture {
	t.Helper()
	harnesstest.RequireSandboxTools(t)
	ctx := context.Background()
	srv := daytonatest.NewServer(t)
	st := harnesstest.NewStore(t)
	t.Setenv(secretbox.KeyEnv, "")
	box, err := secretbox.Load("", filepath.Join(st.Dir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := box.Seal([]byte(daytonatest.DefaultKey), "sandbox_provider/dt")
	if err != nil {
		t.Fatal(err)
	}
	p := store.SandboxProvider{Name: "dt", Type: "daytona", APIURL: srv.URL(), APIKeyEnc: sealed, Owner: harnesstest.Owner, Status: "Ready"}
	must(t, st.CreateSandboxProvider(ctx, p))
	c := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithPollInterval(5*time.Millisecond))
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3}
	snap := sandbox.SnapshotID(spec.BuildHash())
	must(t, daytona.NewBuilder(c).StartBuild(ctx, sandbox.BuildRequest{ID: snap, Spec: spec}))
	if s, err := c.WaitSnapshot(ctx, snap); err != nil || s.State != daytona.SnapshotActive {
		t.Fatalf("snapshot: %+v %v", s, err)
	}
	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: snap, Provider: "dt", BuildHash: spec.BuildHash(), Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	must(t, st.SetSnapshotState(ctx, snap, sandbox.StatusReady, "", ""))
	must(t, st.CreateEnvironment(ctx, store.Environment{ID: "env-dt", Name: "dtenv", Provider: "dt", Owner: harnesstest.Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: spec.BuildHash(), SnapshotID: snap,
		Env: map[string]string{"GREETING": "hello"}, AllowDomains: []string{"api.example.com", "*.pypi.org"}}))
	// The secret as the provider publishes it: sealed in the store and a Daytona secret.
	val, err := box.Seal([]byte(dtSecretValue), "secret/"+store.SecretID("dtenv", "API_TOKEN"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, st.CreateSecret(ctx, store.Secret{ID: store.SecretID("dtenv", "API_TOKEN"), Environment: "dtenv", EnvName: "API_TOKEN", Hosts: []string{"api.example.com"}, ValueEnc: val}))
	if _, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: daytona.SecretName("dtenv", "API_TOKEN"), Value: dtSecretValue, Hosts: []string{"api.example.com"}}); err != nil {
		t.Fatal(err)
	}

	// The default registry's daytona backend with a fast poll (and the production work
	// directory, /workspace).
	rts := backend.New(controlplane.New(st))
	rts.Backends[daytona.Type] = &daytona.Backend{Options: []daytona.Option{daytona.WithPollInterval(5 * time.Millisecond)}}
	clock := harnesstest.NewClock()
	m := lifecycle.New(lifecycle.Config{Store: st, Runtimes: rts, Now: clock.Now})
	t.Cleanup(func() {
		recs, _ := st.ListSessionSandboxes(context.Background())
		for _, r := range recs {
			_ = c.DeleteSandbox(context.Background(), r.SandboxID)
		}
	})
	srv.ResetCounts()
	return &dtFixture{srv: srv, st: st, client: c, clock: clock, manager: m, snapshot: snap}
}

func (f *dtFixture) runner(t *testing.T, agent string) *runner.Runner {
	t.Helper()
	a, err := agents.Load(context.Background(), f.st, agent)
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.NewModel(agents.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &runner.Runner{Store: f.st, Agent: a, Model: m, Tools: &tools.Executor{Store: f.st, Sandboxes: f.manager, Now: f.clock.Now}}
}

// requests is the number of requests the emulator saw, API and toolbox.
func (f *dtFixture) requests() int {
	n := 0
	for _, c := range f.srv.Counts() {
		n += c
	}
	return n
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// On the daytona type, a prompt that needs no code sends no request at all to the
// Daytona API (the emulator's per-route counters stay at zero).
func TestDaytonaNoCodePromptProvisionsNothing(t *testing.T) {
	f := newDaytonaFixture(t)
	harnesstest.AddAgent(t, f.st, "qa", "dtenv", harnesstest.AgentSpec{
		"model": harnesstest.Script(text("Four.")), "sandbox": harnesstest.Sandbox("dtenv", 15, 60, 120),
	})
	r := f.runner(t, "qa")
	sid, err := r.NewSession(context.Background(), harnesstest.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, r, sid, "What is 2+2?"); out.Text != "Four." {
		t.Fatalf("answer %q", out.Text)
	}
	if n := f.requests(); n != 0 {
		t.Fatalf("a Q&A turn sent %d requests to the Daytona API: %v; want 0", n, f.srv.Counts())
	}
	if _, err := f.st.GetSessionSandbox(context.Background(), sid); err == nil {
		t.Fatal("a Q&A turn left a sandbox record")
	}
}

// On the daytona type: nothing is created before the first sandbox call; that call
// creates one sandbox with the environment's allow list and secret (a placeholder
// inside, never the value); later turns reuse it; after an idle stop and after an
// archive the next call resumes it with its files and the recorded snapshot.
func TestDaytonaSandboxLazyReusedAndResumedWithFiles(t *testing.T) {
	f := newDaytonaFixture(t)
	ctx := context.Background()
	harnesstest.AddAgent(t, f.st, "dt", "dtenv", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			text("Hi."),
			exec("echo $GREETING > keep.txt; echo token=$API_TOKEN"), text("written"),
			exec("cat keep.txt"), text("read"),
			exec("cat keep.txt"), text("after stop"),
			exec("cat keep.txt"), text("after archive"),
		),
		"sandbox": harnesstest.Sandbox("dtenv", 15, 60, 10000),
	})
	r := f.runner(t, "dt")
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	mustRun(t, r, sid, "hello")
	if n := f.requests(); n != 0 {
		t.Fatalf("%d Daytona requests before any sandbox call: %v", n, f.srv.Counts())
	}

	mustRun(t, r, sid, "write")
	if n := f.srv.Count("POST /sandbox"); n != 1 {
		t.Fatalf("POST /sandbox %d times after the first exec; want 1", n)
	}
	if !f.srv.LocalSandboxes() {
		t.Fatal("the emulator's sandboxes are not local bubblewrap sandboxes")
	}
	rec, err := f.st.GetSessionSandbox(ctx, sid)
	if err != nil || rec.ProviderType != "daytona" || rec.SnapshotID != f.snapshot {
		t.Fatalf("record %+v %v", rec, err)
	}
	sb, err := f.client.GetSandbox(ctx, rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.DomainAllowList != "api.example.com,*.pypi.org" || sb.NetworkBlockAll {
		t.Fatalf("sandbox network: allow %q block_all %v; want the environment's allow list", sb.DomainAllowList, sb.NetworkBlockAll)
	}
	res := results(t, f.st, sid)
	first := res[0]["text"].(string)
	if strings.Contains(first, dtSecretValue) || !strings.Contains(first, "token=") || strings.Contains(first, "token=\n") {
		t.Fatalf("the secret variable inside the sandbox: %q; want a placeholder, never the value", first)
	}

	mustRun(t, r, sid, "read")
	if n := f.srv.Count("POST /sandbox"); n != 1 {
		t.Fatalf("POST /sandbox %d times; the sandbox was not reused", n)
	}
	if last := lastResult(t, f.st, sid); !strings.Contains(last, "hello") {
		t.Fatalf("second turn: %q; want the file of the first", last)
	}

	// Idle stop on the agent's timing, then resume with the file.
	f.clock.Advance(16 * time.Minute)
	if trs, err := f.manager.Reap(ctx); err != nil || len(trs) != 1 || trs[0].To != store.SandboxStateStopped || trs[0].Err != nil {
		t.Fatalf("reap: %+v %v; want one stop", trs, err)
	}
	if s := f.srv.SandboxState(rec.SandboxID); s != "stopped" {
		t.Fatalf("emulator state %q; want stopped", s)
	}
	mustRun(t, r, sid, "after stop")
	if last := lastResult(t, f.st, sid); !strings.Contains(last, "hello") || !strings.Contains(last, "resumed") {
		t.Fatalf("after the stop: %q; want the file and a resume note", last)
	}

	// Stop and archive, then resume with the file.
	f.clock.Advance(61 * time.Minute)
	trs, err := f.manager.Reap(ctx)
	if err != nil || len(trs) != 2 || trs[1].To != store.SandboxStateArchived || trs[1].Err != nil {
		t.Fatalf("reap: %+v %v; want stop then archive", trs, err)
	}
	if s := f.srv.SandboxState(rec.SandboxID); s != "archived" {
		t.Fatalf("emulator state %q; want archived", s)
	}
	mustRun(t, r, sid, "after archive")
	if last := lastResult(t, f.st, sid); !strings.Contains(last, "hello") {
		t.Fatalf("after the archive: %q; want the file back", last)
	}
	resumed := harnesstest.Payloads(t, f.st, sid, "sandbox_resumed")
	if len(resumed) != 2 || resumed[1]["snapshot_id"] != f.snapshot || resumed[1]["recorded_snapshot_id"] != f.snapshot {
		t.Fatalf("sandbox_resumed %v; want two, with snapshot %s", resumed, f.snapshot)
	}
	if n := f.srv.Count("POST /sandbox"); n != 1 {
		t.Fatalf("POST /sandbox %d times; stopped and archived sandboxes must be resumed, not replaced", n)
	}
	if n := f.srv.Count("POST /sandbox/{id}/start"); n != 2 {
		t.Fatalf("POST /sandbox/{id}/start %d times; want 2 (after the stop, after the archive)", n)
	}
	prov := harnesstest.Payloads(t, f.st, sid, "sandbox_provisioned")
	if len(prov) != 1 || prov[0]["provider_type"] != "daytona" || prov[0]["limits_enforced"] != true {
		t.Fatalf("sandbox_provisioned %v", prov)
	}
}

// A block_all environment on Daytona: the sandbox is created with networkBlockAll, no
// allow list and no secrets attached (block_all makes them inert).
func TestDaytonaBlockAllEnvironment(t *testing.T) {
	f := newDaytonaFixture(t)
	editEnvironment(t, f.st, "dtenv", func(e *store.Environment) { e.BlockAll = true })
	_, sid, _, sb := f.firstTurn(t, "blk", harnesstest.Sandbox("dtenv", 15, 60, 120), exec("echo token=${API_TOKEN:-unset}"), text("ok"))
	if !sb.NetworkBlockAll || sb.DomainAllowList != "" {
		t.Fatalf("sandbox network: block_all %v allow %q; want blocked, no allow list", sb.NetworkBlockAll, sb.DomainAllowList)
	}
	if got := lastResult(t, f.st, sid); !strings.Contains(got, "token=unset") {
		t.Fatalf("a secret reached a block_all sandbox: %q", got)
	}
}

// Issue 24's acceptance on the emulator, through the harness: an environment mounts a
// Daytona volume at /workspace/data, as the docs' example does. One session's agent writes
// data/x with write_file and data/y with a command's relative path; a second session's
// agent, in a sandbox of its own, reads both back. Before the fix the mount was sent as
// written while the agent's workspace was elsewhere, so both files died with the first
// sandbox.
func TestDaytonaVolumeInTheWorkspaceAcrossSessions(t *testing.T) {
	f := newDaytonaFixture(t)
	ctx := context.Background()
	v, err := f.client.CreateVolume(ctx, "trueforge-data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.WaitVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	must(t, f.st.CreateVolume(ctx, store.Volume{Name: "data", Provider: "dt", Owner: harnesstest.Owner, RemoteID: v.ID}))
	env, err := f.st.GetEnvironment(ctx, "dtenv")
	if err != nil {
		t.Fatal(err)
	}
	env.Settings.Volumes = []store.EnvironmentVolume{{Volume: "data", MountPath: "/workspace/data"}}
	must(t, f.st.UpdateEnvironment(ctx, env))
	session := func(agent string, steps ...map[string]any) (*runner.Runner, string) {
		harnesstest.AddAgent(t, f.st, agent, "dtenv", harnesstest.AgentSpec{
			"model": harnesstest.Script(steps...), "sandbox": harnesstest.Sandbox("dtenv", 15, 60, 120),
		})
		r := f.runner(t, agent)
		sid := ownerSession(t, r)
		return r, sid
	}
	writer, ws := session("writer",
		call(tools.NameWriteFile, map[string]any{"path": "data/x", "content": "from write_file"}),
		exec("echo from exec > data/y"), text("written"))
	reader, rs := session("reader", exec("cat data/x; echo; cat data/y"), text("read"))
	mustRun(t, writer, ws, "write")
	mustRun(t, reader, rs, "read")
	out := lastResult(t, f.st, rs)
	if !strings.Contains(out, "from write_file") || !strings.Contains(out, "from exec") {
		t.Fatalf("the second session's sandbox read %q from the volume; want both files of the first", out)
	}
	if recs, _ := f.st.ListSessionSandboxes(ctx); len(recs) != 2 {
		t.Fatalf("%d session sandboxes; want one per session", len(recs))
	}
}
