//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The benchmarks run side by side: cold start (create from a Ready snapshot and the first
// exec of true; also without spare keepers, under BlockNetwork and behind the egress
// proxy), warm exec (true in an existing sandbox) and, as yardsticks, bubblewrap alone
// running true (the floor of any sandbox of ours) and a bare fork/exec of true. Each reports, besides the mean (ns/op), the median of its
// iterations (median-ns/op), which scripts/bench.sh turns into ratios.

// medianTimer records the duration of each iteration.
type medianTimer struct {
	d     []time.Duration
	start time.Time
}

func (m *medianTimer) begin() { m.start = time.Now() }
func (m *medianTimer) end()   { m.d = append(m.d, time.Since(m.start)) }

func (m *medianTimer) report(b *testing.B) {
	if len(m.d) == 0 {
		return
	}
	slices.Sort(m.d)
	b.ReportMetric(float64(m.d[len(m.d)/2].Nanoseconds()), "median-ns/op")
}

func BenchmarkColdStart(b *testing.B) {
	coldStart(b, sandbox.CreateRequest{})
}

// BenchmarkColdStartNoSpares is a cold start without keeper processes started ahead
// (Runtime.Spares -1): each keeper's program starts on the critical path. Compare with
// BenchmarkColdStart.
func BenchmarkColdStartNoSpares(b *testing.B) {
	coldStartWith(b, sandbox.CreateRequest{}, -1)
}

// BenchmarkColdStartHarness is BenchmarkColdStart with trueforge-harness, built as it is
// released (static, -trimpath), as the program the runtime re-executes as the keeper and
// the sandbox's init, instead of this test binary: its start (the Go runtime and the
// package initialisers of everything the harness links) is on every cold start's path.
// TRUEFORGE_TEST_HARNESS (harnessHelperEnv) names a binary to use instead, to compare two
// builds with one test binary.
func BenchmarkColdStartHarness(b *testing.B) {
	exe := os.Getenv(harnessHelperEnv)
	if exe == "" {
		exe = buildStatic(b, "cmd/trueforge-harness")
	}
	coldStartExe(b, sandbox.CreateRequest{}, 0, exe)
}

// buildStatic builds the module's command at dir (cmd/NAME) as the releases are built
// (static, -trimpath) into the test's temporary directory and returns its path; without
// the go command the test is skipped.
func buildStatic(t testing.TB, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("skipping: the go command is needed to build %s", path.Base(dir))
	}
	out := filepath.Join(t.TempDir(), path.Base(dir))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/trueforge/terraform-provider-trueforge/"+dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, b)
	}
	return out
}

// BenchmarkColdStartBlocked is a cold start under BlockNetwork (bwrap makes the network
// namespace). Compare with BenchmarkColdStart.
func BenchmarkColdStartBlocked(b *testing.B) {
	coldStart(b, sandbox.CreateRequest{BlockNetwork: true})
}

// BenchmarkColdStartEgress is a cold start behind the real egress proxy and
// trueforge-netd: the keeper makes and prepares the network namespace (one more start
// of this program, netns.go) and Create returns once netd listens. Compare with
// BenchmarkColdStart.
func BenchmarkColdStartEgress(b *testing.B) {
	netd := buildNetd(b)
	p, err := egress.New(context.Background(), egress.Config{SandboxID: "bench", SystemRoots: []byte{}})
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "egress.sock")
	serveProxy(b, p, sock)
	coldStart(b, sandbox.CreateRequest{Env: p.Env(), Egress: egressHook(p, sock, netd)})
}

// coldStart measures Create from a Ready snapshot plus the first exec of true, with req
// as the template of each sandbox.
func coldStart(b *testing.B, req sandbox.CreateRequest) {
	coldStartWith(b, req, 0)
}

// coldStartWith is coldStart on a runtime keeping spares keeper processes started ahead
// (Runtime.Spares).
func coldStartWith(b *testing.B, req sandbox.CreateRequest, spares int) {
	coldStartExe(b, req, spares, "")
}

// coldStartExe is coldStartWith with exe, when set, as the program the runtime
// re-executes.
func coldStartExe(b *testing.B, req sandbox.CreateRequest, spares int, exe string) {
	r, rel := newTestRuntime(b)
	r.Spares = spares
	if exe != "" {
		r.exe = exe
	}
	ctx := context.Background()
	var m medianTimer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "cold-" + strconv.Itoa(i)
		req.ID, req.SnapshotID = id, rel
		m.begin()
		if err := r.Create(ctx, req); err != nil {
			b.Fatal(err)
		}
		res, err := r.Exec(ctx, id, sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %d %s", err, res.ExitCode, res.Stderr)
		}
		m.end()
		b.StopTimer()
		if err := r.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	m.report(b)
}

func BenchmarkWarmExec(b *testing.B) {
	r, rel := newTestRuntime(b)
	ctx := context.Background()
	create(b, r, sandbox.CreateRequest{ID: "warm", SnapshotID: rel})
	mustSh(b, r, "warm", "true")
	var m medianTimer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.begin()
		res, err := r.Exec(ctx, "warm", sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %d %s", err, res.ExitCode, res.Stderr)
		}
		m.end()
	}
	m.report(b)
}

// BenchmarkBwrapFloor is the least a sandbox of bubblewrap costs: bwrap making the
// namespaces a sandbox has (user, pid, ipc, uts, cgroup) on a tmpfs root with the host
// /usr read-only, /proc and /dev, and running true in it; no overlays, no init, no
// control socket. Compare with BenchmarkColdStart.
func BenchmarkBwrapFloor(b *testing.B) {
	requireTools(b)
	bwrap, err := findTool("bwrap")
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--tmpfs", "/", "--ro-bind", "/usr", "/usr"}
	args = append(args, rootLinkArgs(hostRootLinks("/"))...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/true")
	var m medianTimer
	for i := 0; i < b.N; i++ {
		m.begin()
		if out, err := exec.Command(bwrap, args...).CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
		m.end()
	}
	m.report(b)
}

// BenchmarkBwrapSandboxFloor is what the kernel work of a sandbox costs without our init
// and its protocol: the cold start of BenchmarkColdStart (Create's files, a keeper
// started ahead, its staging and leaving the host's mounts, bwrap with the very argv a
// sandbox gets) with bwrap running the snapshot's true where the init would run, timed
// until bwrap has exited (the last holder of the control socket gone, the connection
// made to it ends). What it does not have: the init's start, its seccomp filters (the
// init installs them, not bwrap), the ping and the exec of true by the init. The keeper
// started ahead is replaced after the timed part, where a cold start replaces it beside
// its first exec.
func BenchmarkBwrapSandboxFloor(b *testing.B) {
	r, rel := newTestRuntime(b)
	r.initArgv = []string{"/usr/bin/true"}
	ctx := context.Background()
	var m medianTimer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "floor-" + strconv.Itoa(i)
		m.begin()
		rec, err := r.createStopped(ctx, sandbox.CreateRequest{ID: id, SnapshotID: rel})
		if err != nil {
			b.Fatal(err)
		}
		c, err := r.connect(ctx, id, rec)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(keeperStartWait))
		var buf [1]byte
		n, err := c.Read(buf[:])
		m.end()
		c.Close()
		b.StopTimer()
		if n != 0 || err == nil || os.IsTimeout(err) {
			b.Fatalf("read from the control socket of a sandbox running true: %d bytes, %v", n, err)
		}
		r.refillSpares()
		// The keeper (bwrap) ended: it must have run true to its end.
		var log string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			data, _ := os.ReadFile(r.keeperLog(id))
			if log = string(data); strings.Contains(log, keeperExitedPrefix) {
				break
			}
		}
		if !strings.Contains(log, keeperExitedPrefix+" exit status 0") {
			b.Fatalf("bwrap running true: %q", log)
		}
		if err := r.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	m.report(b)
}

func BenchmarkBareForkExec(b *testing.B) {
	var m medianTimer
	for i := 0; i < b.N; i++ {
		m.begin()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		m.end()
	}
	m.report(b)
}
