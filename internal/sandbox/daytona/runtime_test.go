package daytona_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// newRuntime returns a Runtime on the emulator with a Ready snapshot. The emulator's
// sandboxes are local bubblewrap sandboxes whose workspace is /workspace.
func newRuntime(t *testing.T, opts ...daytonatest.Option) (*daytonatest.Server, *daytona.Client, *daytona.Runtime, string) {
	t.Helper()
	srv, c := setup(t, opts...)
	snap := readySnapshot(t, testCtx(t), c, "true")
	zero := 0
	rt := &daytona.Runtime{C: c, AutoStop: &zero, Labels: map[string]string{"trueforge.plane": "test"}}
	return srv, c, rt, snap
}

func mustExec(t *testing.T, rt *daytona.Runtime, id string, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	res, err := rt.Exec(testCtx(t), id, req)
	if err != nil {
		t.Fatalf("exec %+v: %v", req, err)
	}
	return res
}

// TestRuntimeExecAndFiles covers what is Daytona's own beyond the conformance suite
// (TestConformance): the environment given at create, stdin through a temporary file
// that does not stay behind, and the emulator running real sandboxes.
func TestRuntimeExecAndFiles(t *testing.T) {
	t.Parallel()
	srv, _, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "sess-1", SnapshotID: snap, Env: map[string]string{"FOO": "bar baz"},
		Labels: map[string]string{"trueforge.session": "s1"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "sess-1") })
	var streamed bytes.Buffer
	res := mustExec(t, rt, "sess-1", sandbox.ExecRequest{Shell: `tr a-z A-Z; echo "$FOO"`, Stdin: strings.NewReader("from stdin\n"), Stdout: &streamed})
	if string(res.Stdout) != "FROM STDIN\nbar baz\n" || streamed.String() != string(res.Stdout) {
		t.Fatalf("stdin: %q (streamed %q)", res.Stdout, streamed.String())
	}
	if ls := mustExec(t, rt, "sess-1", sandbox.ExecRequest{Shell: "ls -A"}); strings.Contains(string(ls.Stdout), "trueforge-stdin") {
		t.Fatalf("stdin file left behind: %q", ls.Stdout)
	}
	if !srv.LocalSandboxes() {
		t.Fatal("the emulator ran host processes although bubblewrap is installed; this test needs real sandboxes (make deps)")
	}
}

// TestRuntimeConfinement tries to get out: the emulator's sandboxes are real local
// sandboxes, so writes to the system and the host's files fail, and networkBlockAll leaves
// no interface but lo.
func TestRuntimeConfinement(t *testing.T) {
	t.Parallel()
	srv, _, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "jail", SnapshotID: snap, BlockNetwork: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "jail") })
	if !srv.LocalSandboxes() {
		t.Fatal("bubblewrap is required for this test (make deps)")
	}
	// Writes outside the workspace land in the sandbox's own overlay: the host and other
	// sandboxes never see them, and host paths are not reachable at all.
	marker := filepath.Join(t.TempDir(), "escaped")
	// /var/tmp: the emulator's sandbox user may write there (as root, the system
	// directories are the sandbox's root's, not its user's).
	pwned := "/var/tmp/trueforge-pwned-" + filepath.Base(filepath.Dir(marker))
	mustExec(t, rt, "jail", sandbox.ExecRequest{Shell: "echo pwned > " + marker + "; touch " + pwned})
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the sandbox wrote the host file %s", marker)
	}
	if _, err := os.Stat(pwned); err == nil {
		_ = os.Remove(pwned)
		t.Fatalf("the sandbox wrote the host's %s", pwned)
	}
	if res := mustExec(t, rt, "jail", sandbox.ExecRequest{Shell: "touch /usr/bin/trueforge-pwned 2>/dev/null && echo wrote"}); os.Geteuid() == 0 && strings.Contains(string(res.Stdout), "wrote") {
		t.Fatal("the sandbox user wrote into /usr/bin")
	}
	if res := mustExec(t, rt, "jail", sandbox.ExecRequest{Shell: "test -e " + pwned + " && echo kept"}); strings.TrimSpace(string(res.Stdout)) != "kept" {
		t.Fatalf("the sandbox's own write is gone: %q", res.Stdout)
	}
	res := mustExec(t, rt, "jail", sandbox.ExecRequest{Shell: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"})
	if strings.TrimSpace(string(res.Stdout)) != "lo" {
		t.Fatalf("networkBlockAll sandbox has interfaces %q", res.Stdout)
	}
	// The control: without networkBlockAll the sandbox sees the host's interfaces.
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "open", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "open") })
	if res := mustExec(t, rt, "open", sandbox.ExecRequest{Shell: "test -e " + pwned + " || echo absent"}); strings.TrimSpace(string(res.Stdout)) != "absent" {
		t.Fatalf("another sandbox sees jail's write: %q", res.Stdout)
	}
	host, _ := os.ReadFile("/proc/net/dev")
	res = mustExec(t, rt, "open", sandbox.ExecRequest{Shell: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"})
	if strings.Count(string(host), "\n") > 3 && strings.TrimSpace(string(res.Stdout)) == "lo" {
		t.Fatalf("a sandbox without networkBlockAll has no network either: %q", res.Stdout)
	}
	info, err := rt.Get(ctx, "jail")
	if err != nil || !info.BlockNetwork {
		t.Fatalf("get: %+v %v", info, err)
	}
}

func TestRuntimeLifecycleAndOrphans(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t, transitionDelays(20*time.Millisecond)...)
	ctx := testCtx(t)
	sec, err := c.CreateSecret(ctx, daytona.CreateSecretRequest{Name: "gh_token", Value: "real-value", Hosts: []string{"api.github.com"}})
	if err != nil {
		t.Fatal(err)
	}
	// Limits equal to the snapshot's resources (1 CPU, 1 GB, 3 GB by default) are what
	// Daytona enforces, so they are accepted.
	req := sandbox.CreateRequest{ID: "life", SnapshotID: snap, Labels: map[string]string{"trueforge.session": "s1"},
		Limits:       sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3 * 1024},
		AllowDomains: []string{"pypi.org", "*.github.com"}, Secrets: map[string]string{"GITHUB_TOKEN": "gh_token"}}
	if err := rt.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(testCtx(t), "life") })
	if err := rt.Create(ctx, req); !errors.Is(err, sandbox.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	for name, bad := range map[string]sandbox.CreateRequest{
		"limits": {ID: "x", SnapshotID: snap, Limits: sandbox.Limits{CPU: 2}},
		"pids":   {ID: "x", SnapshotID: snap, Limits: sandbox.Limits{Pids: 100}},
		"egress": {ID: "x", SnapshotID: snap, Egress: &sandbox.Egress{Socket: "/tmp/s"}},
		"label":  {ID: "x", SnapshotID: snap, Labels: map[string]string{daytona.LabelID: "y"}},
	} {
		if err := rt.Create(ctx, bad); err == nil {
			t.Errorf("%s: create accepted", name)
		}
	}
	// A sandbox that cannot be finished (its work directory cannot be made) is removed.
	bad := &daytona.Runtime{C: c, WorkDir: "/proc/trueforge-denied"}
	if err := bad.Create(ctx, sandbox.CreateRequest{ID: "half", SnapshotID: snap}); err == nil || !strings.Contains(err.Error(), "work directory") {
		t.Fatalf("create with an unusable work directory: %v", err)
	}
	if _, err := c.GetSandbox(ctx, "half"); !daytona.IsNotFound(err) {
		t.Fatalf("the half-made sandbox was left behind: %v", err)
	}
	// The secret reaches the sandbox only as Daytona's placeholder.
	res := mustExec(t, rt, "life", sandbox.ExecRequest{Shell: "echo $GITHUB_TOKEN"})
	if got := strings.TrimSpace(string(res.Stdout)); got != sec.Placeholder {
		t.Fatalf("GITHUB_TOKEN = %q, want the placeholder %q", got, sec.Placeholder)
	}
	sb, err := c.GetSandbox(ctx, "life")
	if err != nil || sb.DomainAllowList != "pypi.org,*.github.com" || sb.AutoStopInterval == nil || *sb.AutoStopInterval != 0 ||
		sb.AutoDeleteInterval == nil || *sb.AutoDeleteInterval != -1 {
		t.Fatalf("Daytona sandbox %+v %v", sb, err)
	}

	if err := rt.WriteFile(ctx, "life", "keep.txt", strings.NewReader("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if info, _ := rt.Get(ctx, "life"); info.Status != sandbox.SandboxStopped {
		t.Fatalf("after stop: %s", info.Status)
	}
	if _, err := rt.Exec(ctx, "life", sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec on stopped: %v", err)
	}
	if err := rt.Archive(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if info, _ := rt.Get(ctx, "life"); info.Status != sandbox.SandboxArchived {
		t.Fatalf("after archive: %s", info.Status)
	}
	if err := rt.Start(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if b, err := rt.ReadFile(ctx, "life", "keep.txt", 0); err != nil || string(b) != "kept" {
		t.Fatalf("files after archive and start: %q %v", b, err)
	}

	// List finds this runtime's sandboxes with their session labels, and nothing else.
	if _, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "not-ours", Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	other := &daytona.Runtime{C: c, Labels: map[string]string{"trueforge.plane": "other"}}
	if err := other.Create(ctx, sandbox.CreateRequest{ID: "other-plane", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Delete(testCtx(t), "other-plane") })
	list, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "life" || list[0].Labels["trueforge.session"] != "s1" || list[0].SnapshotID != snap {
		t.Fatalf("list: %+v", list)
	}

	// Deleted out of band: calls report ErrLost, Delete is still fine.
	if !srvDeleteSandbox(t, c, "life") {
		t.Fatal("out-of-band delete failed")
	}
	if _, err := rt.Exec(ctx, "life", sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("exec after out-of-band delete: %v", err)
	}
	if err := rt.Delete(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Get(ctx, "life"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if srv.SandboxState("life") != "" {
		t.Fatal("sandbox still in the emulator")
	}
}

// srvDeleteSandbox deletes a sandbox behind the runtime's back.
func srvDeleteSandbox(t *testing.T, c *daytona.Client, id string) bool {
	t.Helper()
	return c.DeleteSandbox(testCtx(t), id) == nil
}

// A create that Daytona answers with 400 "Sandbox failed to start" (no sandbox in the
// body; the errored sandbox keeps the name) fails, and the broken sandbox is deleted: its
// name is free again, so the next create makes a working one instead of finding (and
// adopting) the broken one. One left in error by someone else's failed create reads as
// lost, not stopped, and a create under its name replaces it.
func TestRuntimeCreateInErrorStateCleansUp(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	srv.FailNextSandbox("no runner available")
	err := rt.Create(ctx, sandbox.CreateRequest{ID: "sess-err", SnapshotID: snap})
	if err == nil || !strings.Contains(err.Error(), "Sandbox failed to start: no runner available") {
		t.Fatalf("create: %v; want the error reason", err)
	}

	// A failed create that nobody cleaned up (a client without this runtime's cleanup).
	srv.FailNextSandbox("runner lost")
	if _, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "left", Snapshot: snap}); err == nil {
		t.Fatal("the failing create succeeded")
	}
	if st := srv.SandboxState("left"); st != "error" {
		t.Fatalf("the failed sandbox is %q; want it kept in error under its name", st)
	}
	if _, err := rt.Get(ctx, "left"); !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("get of an errored sandbox: %v; want ErrLost", err)
	}
	if _, err := rt.Exec(ctx, "left", sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrLost) || errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec in an errored sandbox: %v; want ErrLost", err)
	}
	if err := rt.Stop(ctx, "left"); !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("stop of an errored sandbox: %v; want ErrLost", err)
	}
	if err := rt.Start(ctx, "left"); !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("start of an errored sandbox: %v; want ErrLost", err)
	}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "left", SnapshotID: snap}); err != nil {
		t.Fatalf("create over an errored sandbox: %v; want it replaced", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "left") })
	if st := srv.SandboxState("left"); st != "started" {
		t.Fatalf("the replacing sandbox is %q", st)
	}
	if _, err := c.GetSandbox(ctx, "sess-err"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the broken sandbox is still there: %v", err)
	}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "sess-err", SnapshotID: snap}); err != nil {
		t.Fatalf("the next create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "sess-err") })
	if res := mustExec(t, rt, "sess-err", sandbox.ExecRequest{Shell: "echo ok"}); strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("exec in the new sandbox: %+v", res)
	}
}

// transitionDelays gives the emulator's sandboxes Daytona-like transitions that take d,
// so that lifecycle calls meet the 409s and 400s of calls racing them.
func transitionDelays(d time.Duration) []daytonatest.Option {
	var opts []daytonatest.Option
	for _, st := range []string{"starting", "stopping", "archiving", "restoring"} {
		opts = append(opts, daytonatest.WithTransitionDelay(st, d))
	}
	return opts
}

// Stop and Archive race Daytona's own transitions: a stop already under way (409, then
// 400 "not in a stoppable state" once it ends), an archive under way, and an ephemeral
// sandbox (autoDeleteInterval 0) that Daytona deletes as it stops (404 by name at once).
func TestRuntimeStopRaces(t *testing.T) {
	t.Parallel()
	_, c, rt, snap := newRuntime(t, transitionDelays(300*time.Millisecond)...)
	ctx := testCtx(t)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "race", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "race") })
	if _, err := c.StopSandbox(ctx, "race", false); err != nil { // someone else's stop (auto-stop)
		t.Fatal(err)
	}
	if err := rt.Stop(ctx, "race"); err != nil {
		t.Fatalf("stop during a stop: %v", err)
	}
	if info, err := rt.Get(ctx, "race"); err != nil || info.Status != sandbox.SandboxStopped {
		t.Fatalf("after stop: %+v %v", info, err)
	}
	if _, err := c.ArchiveSandbox(ctx, "race"); err != nil { // auto-archive
		t.Fatal(err)
	}
	if err := rt.Archive(ctx, "race"); err != nil {
		t.Fatalf("archive during an archive: %v", err)
	}
	if info, err := rt.Get(ctx, "race"); err != nil || info.Status != sandbox.SandboxArchived {
		t.Fatalf("after archive: %+v %v", info, err)
	}

	zero := 0
	eph := &daytona.Runtime{C: c, AutoStop: &zero, AutoDelete: &zero}
	if err := eph.Create(ctx, sandbox.CreateRequest{ID: "eph", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eph.Delete(context.Background(), "eph") })
	if err := eph.Stop(ctx, "eph"); err != nil {
		t.Fatalf("stop of an ephemeral sandbox: %v", err)
	}
	if _, err := eph.Get(ctx, "eph"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("an ephemeral sandbox after stop: %v; want it gone", err)
	}
}

// startBeforeArchive is an http.RoundTripper that, on the first archive request, starts
// the sandbox through another client first: another caller restarting it between the
// runtime's stop and its archive.
type startBeforeArchive struct {
	other *daytona.Client
	once  sync.Once
}

func (s *startBeforeArchive) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/archive") {
		var err error
		s.once.Do(func() {
			_, err = s.other.StartSandbox(req.Context(), path.Base(path.Dir(req.URL.Path))) // /api/sandbox/{id}/archive
		})
		if err != nil {
			return nil, err
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestRuntimeArchiveAfterRestart: Daytona refuses to archive a sandbox that is not
// stopped with 400 "Sandbox is not stopped" (v0.190 sandbox.service.ts:363-366); when
// another caller starts the sandbox between Archive's stop and its archive call, the
// runtime reads it again, stops it again and archives it, rather than failing with the
// raw 400.
func TestRuntimeArchiveAfterRestart(t *testing.T) {
	t.Parallel()
	srv, c, _, snap := newRuntime(t)
	ctx := testCtx(t)
	hooked := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithRetryPolicy(fastRetry), daytona.WithPollInterval(5*time.Millisecond),
		daytona.WithHTTPClient(&http.Client{Transport: &startBeforeArchive{other: c}}))
	zero := 0
	rt := &daytona.Runtime{C: hooked, WorkDir: "/workspace", AutoStop: &zero}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "restarted", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "restarted") })

	// The emulator answers as Daytona does.
	if _, err := c.ArchiveSandbox(ctx, "restarted"); err == nil || !strings.Contains(err.Error(), "Sandbox is not stopped") {
		t.Fatalf("archive of a started sandbox: %v; want 400 Sandbox is not stopped", err)
	}
	if err := rt.Archive(ctx, "restarted"); err != nil {
		t.Fatalf("archive of a sandbox restarted after its stop: %v", err)
	}
	if st := srv.SandboxState("restarted"); st != "archived" {
		t.Fatalf("after archive: %q; want archived", st)
	}
	if n := srv.Count("POST /sandbox/{id}/start"); n != 1 {
		t.Fatalf("%d starts; want the one restart", n)
	}
}

// TestRuntimeRefusesDomainDaytonaRefuses: a create whose allowed domains Daytona's
// pattern refuses (network-validation.util.ts:49, v0.190) fails before reaching the API,
// naming the entry; the emulator refuses it too, with the server's message.
func TestRuntimeRefusesDomainDaytonaRefuses(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	err := rt.Create(ctx, sandbox.CreateRequest{ID: "net", SnapshotID: snap, AllowDomains: []string{"api.example.com", "localhost"}})
	if err == nil || !strings.Contains(err.Error(), `"localhost"`) {
		t.Fatalf("create with localhost allowed: %v; want a refusal naming it", err)
	}
	if n := srv.Count("POST /sandbox"); n != 0 {
		t.Fatalf("%d creates reached Daytona; want none", n)
	}
	_, err = c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "raw", Snapshot: snap, DomainAllowList: "localhost"})
	if err == nil || !strings.Contains(err.Error(), `400 Invalid domain: "localhost". Must be a valid domain name`) {
		t.Fatalf("the emulator's answer: %v; want Daytona's 400", err)
	}
}

// TestRuntimeCreateAnswersUnknown: Daytona's POST /sandbox answers the DTO from before its
// wait for the start, state unknown, when the sandbox has not started within 30 s
// (sandbox.controller.ts:303-311, v0.190); the emulator does so with a "creating" delay,
// and the runtime waits for started before using the sandbox.
func TestRuntimeCreateAnswersUnknown(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t, daytonatest.WithTransitionDelay("creating", 300*time.Millisecond))
	ctx := testCtx(t)
	sb, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "raw", Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != "unknown" || srv.SandboxState("raw") != "creating" {
		t.Fatalf("create answered %q (emulator: %q); want unknown while creating", sb.State, srv.SandboxState("raw"))
	}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "slow", SnapshotID: snap}); err != nil {
		t.Fatalf("create of a slow sandbox: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "slow") })
	if st := srv.SandboxState("slow"); st != "started" {
		t.Fatalf("after Create: %q; want started", st)
	}
	if res := mustExec(t, rt, "slow", sandbox.ExecRequest{Shell: "echo ok"}); strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("exec: %+v", res)
	}
}
