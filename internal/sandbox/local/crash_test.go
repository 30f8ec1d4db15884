//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// ownerEnv makes the test binary act as the owner of a sandbox (see runOwner): it
// creates one, leaves a process running in it and waits to be killed.
const ownerEnv = "TRUEFORGE_LOCAL_TEST_OWNER"

func runOwner() error {
	b, err := NewBuilder(os.Getenv("OWNER_BUILDER"))
	if err != nil {
		return err
	}
	r, err := NewRuntime(b, os.Getenv("OWNER_RUNTIME"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := r.Create(ctx, sandbox.CreateRequest{ID: "crash", SnapshotID: os.Getenv("OWNER_SNAPSHOT"), Limits: sandbox.Limits{Pids: 100}}); err != nil {
		return err
	}
	res, err := r.Exec(ctx, "crash", sandbox.ExecRequest{Shell: "echo kept > f; setsid sleep " + os.Getenv("OWNER_MARK") + " >/dev/null 2>&1 </dev/null & echo started"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "started" {
		return fmt.Errorf("exec: %v %+v", err, res)
	}
	fmt.Println("ready")
	select {}
}

// TestOwnerCrash kills the process that owns a running sandbox: nothing of the sandbox
// may keep running, and a new Runtime on the same root sweeps the leftovers (cgroups,
// control socket) and reuses the sandbox with its files.
func TestOwnerCrash(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerEnv+"=1", "OWNER_BUILDER="+r.b.Root(), "OWNER_RUNTIME="+r.root, "OWNER_SNAPSHOT="+rel, "OWNER_MARK=4321.5"+uniq)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("owner: %q %v", line, err)
	}
	waitProcess(t, "sleep", "4321.5"+uniq)
	cgroups := r.limits.cgroupDirs("crash")
	if r.limits.mode != limitRlimit && len(cgroups) == 0 {
		t.Fatal("the limited sandbox has no cgroup")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The keeper sees its lifeline close and takes the sandbox down.
	deadline := time.Now().Add(10 * time.Second)
	for len(sandboxtest.ProcessesWith("4321.5"+uniq)) > 0 || keeperRuns(r, "crash") {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes still running 10 s after their owner died: %v", sandboxtest.ProcessesWith("4321.5"+uniq))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(r.ctlSock("crash")); err != nil {
		t.Fatalf("expected the dead keeper's socket as a leftover: %v", err)
	}

	r2, err := NewRuntime(r.b, r.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range cgroups {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s not swept: %v", d, err)
		}
	}
	if _, err := os.Stat(r2.ctlSock("crash")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket not swept: %v", err)
	}
	list, err := r2.List(context.Background())
	if err != nil || len(list) != 1 || list[0].ID != "crash" || list[0].Status != sandbox.SandboxRunning {
		t.Fatalf("sandboxes after the owner's restart: %+v %v", list, err)
	}
	if got := mustSh(t, r2, "crash", "cat f; pgrep -c sleep || true"); got != "kept\n0" {
		t.Fatalf("reused sandbox: %q", got)
	}
	if r.limits.mode != limitRlimit && len(r2.limits.cgroupDirs("crash")) == 0 {
		t.Fatal("the reused sandbox runs outside its cgroup")
	}
	// Leftovers of a crashed create (a staging directory, with a mounted disk image as
	// root) are swept too once they are old.
	stage := filepath.Join(r.tmpDir(), "crashed-create")
	if err := os.MkdirAll(filepath.Join(stage, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if r.limits.diskImage {
		if err := makeDiskImage(context.Background(), filepath.Join(stage, "disk.img"), filepath.Join(stage, "data"), 8); err != nil {
			t.Fatal(err)
		}
	}
	// Young, it may be another Runtime's create at work on the same root: a sweep
	// (a second replica starting) leaves its mount alone.
	if err := r2.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.limits.diskImage && len(mountsUnder(stage)) == 0 {
		t.Fatal("a sweep unmounted a young staging directory's disk: another Runtime's create at work would lose it")
	}
	old := time.Now().Add(-2 * trashAge)
	_ = os.Chtimes(stage, old, old)
	if err := r2.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stage); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale staging directory not swept: %v", err)
	}
	if m := mountsUnder(r.root); len(m) > 0 {
		t.Fatalf("mounts left under the root: %v", m)
	}
}

func keeperRuns(r *Runtime, id string) bool {
	_, _, alive := r.keeperAlive(id)
	return alive
}
