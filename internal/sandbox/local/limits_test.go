//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The limit tests are attacks too: each hogs one resource in a limited sandbox and checks
// that the command is stopped, that the limit is named when the host can tell (cgroups,
// disk image), and that the host and a neighbouring sandbox still work.

// neighbourWorks runs a command in another sandbox and a process on the host.
func neighbourWorks(t *testing.T, r *Runtime, id string) {
	t.Helper()
	if got := mustSh(t, r, id, "echo alive"); got != "alive" {
		t.Fatalf("neighbour sandbox: %q", got)
	}
	if out, err := exec.Command("/bin/sh", "-c", "echo host").Output(); err != nil || string(out) != "host\n" {
		t.Fatalf("host: %q %v", out, err)
	}
}

func TestAttackMemoryHog(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "hog", SnapshotID: rel, Limits: sandbox.Limits{MemoryMB: 64}})
	create(t, r, sandbox.CreateRequest{ID: "neighbour", SnapshotID: rel})
	// tail -c keeps the last 1 GiB it read in memory: it grows until something stops it.
	res, err := r.Exec(context.Background(), "hog", sandbox.ExecRequest{
		Shell: "head -c 1000000000 /dev/zero | tail -c 1000000000 | wc -c", Timeout: 60 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(res.Stdout)) == "1000000000" || res.TimedOut {
		t.Fatalf("1 GB held in a 64 MiB sandbox: %+v", res)
	}
	if r.limits.mode != limitRlimit && res.Limit != sandbox.LimitMemory {
		t.Fatalf("limit %q (exit %d, stderr %q), want memory", res.Limit, res.ExitCode, res.Stderr)
	}
	neighbourWorks(t, r, "neighbour")
	// The sandbox itself survives its hog.
	if got := mustSh(t, r, "hog", "echo ok"); got != "ok" {
		t.Fatalf("after the hog: %q", got)
	}
}

func TestAttackForkBomb(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "bomb", SnapshotID: rel, Limits: sandbox.Limits{Pids: 64}})
	create(t, r, sandbox.CreateRequest{ID: "neighbour", SnapshotID: rel})
	start := time.Now()
	res, err := r.Exec(context.Background(), "bomb", sandbox.ExecRequest{
		Shell: "b() { b | b & }; b; sleep 2; echo survived", Timeout: 4 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("fork bomb exec took %s", time.Since(start))
	}
	if r.limits.mode != limitRlimit && res.Limit != sandbox.LimitPids {
		t.Fatalf("limit %q (exit %d), want pids", res.Limit, res.ExitCode)
	}
	if n := countProcsInSandbox(t, r, "bomb"); n > 64 {
		t.Fatalf("%d processes in a sandbox limited to 64", n)
	}
	neighbourWorks(t, r, "neighbour")
	// Stop clears the bomb's leftovers (they left the command's group).
	if err := r.Stop(context.Background(), "bomb"); err != nil {
		t.Fatal(err)
	}
	if n := countProcsInSandbox(t, r, "bomb"); n != 0 {
		t.Fatalf("%d processes left after Stop", n)
	}
}

// countProcsInSandbox counts the host processes in the sandbox's pid namespace (0 when
// it has no keeper).
func countProcsInSandbox(t *testing.T, r *Runtime, id string) int {
	t.Helper()
	pid, _, alive := r.keeperAlive(id)
	if !alive {
		return 0
	}
	ns := sandboxPidNS(pid)
	if ns == "" {
		return 0
	}
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err == nil && l == ns {
			n++
		}
	}
	return n
}

func TestAttackDiskFill(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "fill", SnapshotID: rel, Limits: sandbox.Limits{DiskMB: 16}})
	create(t, r, sandbox.CreateRequest{ID: "neighbour", SnapshotID: rel})
	for _, target := range []string{"/workspace/big", "/var/tmp/big", "/tmp/big"} {
		res := sh(t, r, "fill", "head -c 100000000 /dev/zero > "+target)
		if res.ExitCode == 0 {
			t.Fatalf("wrote 100 MB to %s in a 16 MiB sandbox", target)
		}
		if res.Limit != sandbox.LimitDisk {
			t.Fatalf("%s: limit %q (exit %d, stderr %q), want disk", target, res.Limit, res.ExitCode, res.Stderr)
		}
		mustSh(t, r, "fill", "rm -f "+target)
	}
	if r.limits.diskImage {
		// The cap is on the total, not just on each file.
		res := sh(t, r, "fill", "for i in 1 2 3 4 5 6; do head -c 4000000 /dev/zero > /workspace/f$i || exit 1; done")
		if res.ExitCode == 0 || res.Limit != sandbox.LimitDisk {
			t.Fatalf("24 MB in six files: exit %d, limit %q", res.ExitCode, res.Limit)
		}
		if got := mustSh(t, r, "fill", "rm -f /workspace/f*; echo freed"); got != "freed" {
			t.Fatal(got)
		}
	}
	neighbourWorks(t, r, "neighbour")
	// Files and exec still work after the disk was full.
	if err := r.WriteFile(context.Background(), "fill", "small", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
}

func TestLimitsCPU(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	if r.limits.mode == limitRlimit {
		// Without cgroups a CPU limit is not enforced: the sandbox runs, and the runtime
		// says so (TestUnenforcedLimits); with RequireLimits it is refused.
		lim := sandbox.Limits{CPU: 1}
		if u := r.UnenforcedLimits(lim); len(u) != 1 || u[0].Limit != "cpu" {
			t.Fatalf("unenforced %v, want cpu", u)
		}
		r.SetRequireLimits(true)
		err := r.Create(context.Background(), sandbox.CreateRequest{ID: "cpu", SnapshotID: rel, Limits: lim})
		if err == nil || !strings.Contains(err.Error(), "limits.cpu") {
			t.Fatalf("cpu limit without cgroups, limits required: %v, want a refusal naming limits.cpu", err)
		}
		return
	}
	create(t, r, sandbox.CreateRequest{ID: "cpu", SnapshotID: rel, Limits: sandbox.Limits{CPU: 1}})
	// Two busy loops for 1.5 s of wall time get at most about 1 CPU: measure the CPU time
	// they used with the shell's times builtin.
	out := mustSh(t, r, "cpu", `(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; sleep 1.5; kill $a $b; wait; times`)
	lines := strings.Split(out, "\n")
	children := strings.Fields(lines[len(lines)-1]) // user and system time of children
	if len(children) != 2 {
		t.Fatalf("times: %q", out)
	}
	var total float64
	for _, f := range children {
		d, err := time.ParseDuration(f)
		if err != nil {
			t.Fatalf("times %q: %v", f, err)
		}
		total += d.Seconds()
	}
	if total > 2.0 {
		t.Fatalf("two busy loops used %.2f s of CPU in 1.5 s under a 1-CPU limit", total)
	}
}

func TestLimitsValidation(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	for _, c := range []struct {
		lim  sandbox.Limits
		want string
	}{
		{sandbox.Limits{MemoryMB: -1}, "limits.memory_mb"},
		{sandbox.Limits{Pids: 3}, "limits.pids"},
		{sandbox.Limits{CPU: -2}, "limits.cpu"},
		{sandbox.Limits{DiskMB: -5}, "limits.disk_mb"},
	} {
		err := r.Create(context.Background(), sandbox.CreateRequest{ID: "bad", SnapshotID: rel, Limits: c.lim})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.lim, err, c.want)
		}
	}
	if _, err := r.Get(context.Background(), "bad"); err == nil {
		t.Fatal("a refused sandbox was recorded")
	}
	if err := r.Create(context.Background(), sandbox.CreateRequest{ID: "bad", SnapshotID: rel, Labels: map[string]string{"": "x"}}); err == nil || !strings.Contains(err.Error(), "label") {
		t.Fatalf("empty label key: %v", err)
	}
}
