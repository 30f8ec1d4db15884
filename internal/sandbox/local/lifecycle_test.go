//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

func TestArchiveRestore(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	snap := playground(t, r, rel)
	for _, lim := range []sandbox.Limits{{}, {DiskMB: 32}} {
		id := "plain"
		if lim.DiskMB > 0 {
			id = "disk"
		}
		create(t, r, sandbox.CreateRequest{ID: id, SnapshotID: snap, Limits: lim, Labels: map[string]string{"session": "s1"}})
		// A file, a hard link, a symlink, a removed snapshot file (a whiteout), a
		// replaced directory (opaque), and modes.
		mustSh(t, r, id, `set -e
echo kept > /workspace/f; ln /workspace/f /workspace/hard; ln -s f /workspace/link; chmod 0751 /workspace/f
mkdir -p /workspace/d/e; echo deep > /workspace/d/e/g
echo made > `+playgroundDir+`/made; rm `+playgroundDir+`/hostname
d=$(for x in `+playgroundDir+`/*/; do [ -n "$(ls -A $x)" ] && echo $x && break; done); echo $d > /workspace/which
rm -rf $d && mkdir $d && echo fresh > $d/only
sleep 500.1`+uniq+` &`)
		if err := r.Archive(ctx, id); err != nil {
			t.Fatal(err)
		}
		noProcess(t, "500.1"+uniq)
		info, err := r.Get(ctx, id)
		if err != nil || info.Status != sandbox.SandboxArchived || info.Labels["session"] != "s1" {
			t.Fatalf("after archive: %+v %v", info, err)
		}
		if left, _ := os.ReadDir(r.dataDir(id)); len(left) > 0 {
			t.Fatalf("working directory not freed: %v", left)
		}
		if _, err := os.Stat(filepath.Join(r.dir(id), "disk.img")); err == nil {
			t.Fatal("disk image kept after archive")
		}
		if _, err := os.Stat(r.archivePath(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Exec(ctx, id, sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrStopped) {
			t.Fatalf("exec in an archived sandbox: %v", err)
		}
		if _, err := r.ReadFile(ctx, id, "f", 0); err == nil {
			t.Fatal("read a file of an archived sandbox")
		}
		if err := r.Archive(ctx, id); err != nil {
			t.Fatalf("second archive: %v", err)
		}
		if err := r.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		got := mustSh(t, r, id, `d=$(cat /workspace/which); cat /workspace/f /workspace/hard /workspace/link /workspace/d/e/g `+playgroundDir+`/made $d/only
stat -c %a /workspace/f; stat -c %h /workspace/f
test -e `+playgroundDir+`/hostname && echo hostname-back || echo hostname-gone
ls $d | wc -l
stat -c '%u %g' /workspace/f `+playgroundDir+`/made $d/only /etc/passwd`)
		want := "kept\nkept\nkept\ndeep\nmade\nfresh\n751\n2\nhostname-gone\n1\n1000 1000\n1000 1000\n1000 1000\n" + etcOwner(r)
		if got != want {
			t.Fatalf("%s after restore:\n%s\nwant:\n%s", id, got, want)
		}
		if _, err := os.Stat(r.archivePath(id)); err == nil {
			t.Fatal("archive kept after restore")
		}
		if lim.DiskMB > 0 {
			if res := sh(t, r, id, "head -c 50000000 /dev/zero > /workspace/big"); res.Limit != sandbox.LimitDisk {
				t.Fatalf("disk limit after restore: %+v", res.Limit)
			}
		}
		// Delete of an archived sandbox removes its archive.
		if err := r.Archive(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := r.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(r.archivePath(id)); err == nil {
			t.Fatal("archive kept after delete")
		}
	}
}

func TestLabelsAndStreaming(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Labels: map[string]string{"agent": "a1", "session": "s9"}})
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].Labels["agent"] != "a1" || list[0].Labels["session"] != "s9" {
		t.Fatalf("list: %+v %v", list, err)
	}
	// The first line arrives while the command still runs.
	first := make(chan time.Time, 1)
	out := &notifyWriter{ch: first}
	var errBuf sandboxtest.SyncBuffer
	start := time.Now()
	res, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Shell: "echo first; echo e1 >&2; sleep 1; echo second", Stdout: out, Stderr: &errBuf})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-first:
		if at.Sub(start) > 800*time.Millisecond {
			t.Fatalf("first output streamed after %s", at.Sub(start))
		}
	default:
		t.Fatal("nothing streamed")
	}
	if out.String() != "first\nsecond\n" || string(res.Stdout) != "first\nsecond\n" || errBuf.String() != "e1\n" {
		t.Fatalf("streamed %q / %q, retained %q", out.String(), errBuf.String(), res.Stdout)
	}
}

type notifyWriter struct {
	sandboxtest.SyncBuffer
	ch   chan time.Time
	once sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { w.ch <- time.Now() })
	return w.SyncBuffer.Write(p)
}

// TestLost kills a sandbox's keeper behind the runtime's back during an exec: the exec
// fails with ErrLost, and the next one gets a new keeper with the files intact. A sandbox
// whose files vanished is lost too.
func TestLost(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	mustSh(t, r, "sb", "echo kept > f")
	done := make(chan error, 1)
	go func() {
		_, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Shell: "sleep 600.3" + uniq})
		done <- err
	}()
	waitProcess(t, "sleep", "600.3"+uniq)
	pid, _, alive := r.keeperAlive("sb")
	if !alive {
		t.Fatal("no keeper")
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrLost) {
			t.Fatalf("exec whose sandbox died: %v, want ErrLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("exec did not return after its sandbox died")
	}
	if got := mustSh(t, r, "sb", "cat f"); got != "kept" {
		t.Fatalf("after a new keeper: %q", got)
	}
	// Files gone underneath.
	if err := r.Stop(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(r.dataDir("sb")); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "sb"); !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("start with its files gone: %v, want ErrLost", err)
	}
	if _, err := r.ReadFile(ctx, "sb", "f", 0); !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("read with its files gone: %v, want ErrLost", err)
	}
}

// waitProcess waits until a process with exactly this command line runs.
func waitProcess(t *testing.T, argv ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !processRuns(argv...) {
		if time.Now().After(deadline) {
			t.Fatalf("%v did not start", argv)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCreateFailsCleanly: a sandbox whose keeper cannot start is not left behind, and
// the error says what the setup printed.
func TestCreateFailsCleanly(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	r.bwrap = "/nonexistent/bwrap"
	err := r.Create(context.Background(), sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/bwrap") {
		t.Fatalf("create with a broken setup: %v", err)
	}
	if list, _ := r.List(context.Background()); len(list) != 0 {
		t.Fatalf("sandboxes left: %+v", list)
	}
	if left, _ := os.ReadDir(r.sandboxesDir()); len(left) != 0 {
		t.Fatalf("directories left: %v", left)
	}
}
