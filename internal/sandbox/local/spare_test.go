//go:build linux

package local

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// TestSpareKeeper: a sandbox started on a keeper started ahead (as root at the lowest CPU
// priority) runs its commands at the runtime's priority, in its own namespaces, and the
// runtime keeps a keeper ready after it.
func TestSpareKeeper(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "first", SnapshotID: rel})
	waitSpares(t, r, 1)
	r.spareMu.Lock()
	spare := r.spares[0].cmd.Process.Pid
	r.spareMu.Unlock()
	create(t, r, sandbox.CreateRequest{ID: "second", SnapshotID: rel})
	if pid, _, _ := r.keeperAlive("second"); pid != spare {
		t.Fatalf("the second sandbox's keeper is pid %d, want the spare %d", pid, spare)
	}
	nice, err := ownNice()
	if err != nil {
		t.Fatal(err)
	}
	// Field 19 of stat is the nice value; the command's comm has no spaces.
	if got := mustSh(t, r, "second", `cut -d' ' -f19 /proc/self/stat`); got != strconv.Itoa(nice) {
		t.Errorf("a command in a sandbox on a spare keeper runs at nice %s, want the runtime's %d", got, nice)
	}
	if a, b := mustSh(t, r, "first", "readlink /proc/self/ns/mnt /proc/self/ns/pid"),
		mustSh(t, r, "second", "readlink /proc/self/ns/mnt /proc/self/ns/pid"); a == b {
		t.Errorf("two sandboxes share namespaces: %s", a)
	}
	waitSpares(t, r, 1)
}

// waitSpares waits until r has n keepers started ahead.
func waitSpares(t *testing.T, r *Runtime, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r.spareMu.Lock()
		have := len(r.spares)
		r.spareMu.Unlock()
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keepers started ahead after 10 s, want %d", have, n)
		}
	}
}

// TestSpareExitingOnItsOwnIsReaped: a spare whose orders socket closes without a
// discard (a finalizer closing it once a Runtime was dropped) exits, and is reaped rather
// than left a zombie child of the harness.
func TestSpareExitingOnItsOwnIsReaped(t *testing.T) {
	t.Parallel()
	r, _ := newTestRuntime(t)
	s, err := r.startSpare(true)
	if err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	s.orders.Close()
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(stat); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(stat)
			t.Fatalf("the spare %d is still there 10 s after its orders socket closed: %s", pid, b)
		}
	}
}
