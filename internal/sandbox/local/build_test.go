//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

func TestBuildWritesLayer(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-hello", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: `
printf '#!/bin/sh\necho hello\n' > /usr/local/bin/hello
chmod +x /usr/local/bin/hello
hello > /etc/foo.conf
test "$(id -u)" = 0
test "$HOME" = /root && test "$(pwd)" = /root
test "$(stat -c %a /tmp)" = 1777
test "$(umask)" = 0022
`}})
	requireReady(t, waitDone(t, b, "snap-hello", 20*time.Second))
	if got := readLayerFile(t, b, "snap-hello", "etc/foo.conf"); got != "hello" {
		t.Errorf("etc/foo.conf = %q", got)
	}
	if got := readLayerFile(t, b, "snap-hello", "usr/local/bin/hello"); !strings.Contains(got, "echo hello") {
		t.Errorf("usr/local/bin/hello = %q", got)
	}
	// Only what the script wrote is in the layer, and the build's scratch is gone.
	if _, err := os.Stat(filepath.Join(b.layerDir("snap-hello"), "usr", "bin")); err == nil {
		t.Error("layer holds usr/bin, which the script did not touch")
	}
	for _, d := range []string{"work", "mnt"} {
		if _, err := os.Stat(filepath.Join(b.snapDir("snap-hello"), d)); err == nil {
			t.Errorf("%s/ left behind", d)
		}
	}
	layers, err := b.Layers("snap-hello")
	if err != nil || len(layers) != 2 || layers[0] != b.layerDir("snap-hello") || layers[1] != b.layerDir(rel) {
		t.Fatalf("Layers = %v, %v", layers, err)
	}
	// Starting the same build again is a no-op.
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-hello", Base: rel})
	requireReady(t, waitDone(t, b, "snap-hello", time.Second))
}

// A build's /tmp and /dev/shm are sized tmpfs (host memory) and its /dev is read-only,
// as a sandbox's are: a build script cannot pin host memory there or add device files.
func TestBuildTmpfsAndDevAreBounded(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-tmpfs", Base: rel, Spec: sandbox.SnapshotSpec{DiskGB: 3, BuildScript: `
mkdir -p /usr/local/share
df -k /tmp | awk 'NR == 2 { print $2 }' > /usr/local/share/tmp-kb
df -k /dev/shm | awk 'NR == 2 { print $2 }' > /usr/local/share/shm-kb
if touch /dev/probe 2>/dev/null; then echo made > /usr/local/share/dev; else echo refused > /usr/local/share/dev; fi
echo ok > /dev/shm/x && echo ok > /dev/null
`}})
	requireReady(t, waitDone(t, b, "snap-tmpfs", 20*time.Second))
	if got := readLayerFile(t, b, "snap-tmpfs", "usr/local/share/tmp-kb"); got != strconv.Itoa(tmpMaxMB*1024) {
		t.Errorf("/tmp is %s KiB; want %d (1 GiB)", got, tmpMaxMB*1024)
	}
	if got := readLayerFile(t, b, "snap-tmpfs", "usr/local/share/shm-kb"); got != strconv.Itoa(devShmMB*1024) {
		t.Errorf("/dev/shm is %s KiB; want %d", got, devShmMB*1024)
	}
	if got := readLayerFile(t, b, "snap-tmpfs", "usr/local/share/dev"); got != "refused" {
		t.Errorf("creating /dev/probe: %s", got)
	}
}

func TestEmptyBuildScript(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-empty", Base: rel})
	requireReady(t, waitDone(t, b, "snap-empty", 20*time.Second))
}

func TestFailingBuild(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-fail", Base: rel, Spec: sandbox.SnapshotSpec{
		BuildScript: "echo making /opt/x\necho 'something broke-7f3a' >&2\nexit 3\n"}})
	st := waitDone(t, b, "snap-fail", 20*time.Second)
	if st.Status != sandbox.StatusFailed || st.Reason != "build script exited with status 3" {
		t.Fatalf("state %s, reason %q", st.Status, st.Reason)
	}
	if !strings.Contains(st.LogTail, "something broke-7f3a") {
		t.Fatalf("log tail lacks the script's stderr:\n%s", st.LogTail)
	}
	// set -e: a failing command fails the build.
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-fail-e", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: "false\necho unreachable\n"}})
	if st := waitDone(t, b, "snap-fail-e", 20*time.Second); st.Status != sandbox.StatusFailed || strings.Contains(st.LogTail, "unreachable") {
		t.Fatalf("state %+v", st)
	}
	// A failed build is rebuilt when started again.
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-fail", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: "true"}})
	requireReady(t, waitDone(t, b, "snap-fail", 20*time.Second))
}

// interfaces lists the interface names of a /proc/net/dev dump in a log.
func interfaces(log string) []string {
	var names []string
	for _, line := range strings.Split(log, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") && !strings.Contains(name, "trueforge") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

func TestBlockNetwork(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	script := sandbox.SnapshotSpec{BuildScript: "cat /proc/net/dev"}
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-nonet", Base: rel, Spec: script, BlockNetwork: true})
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-net", Base: rel, Spec: script})
	st := waitDone(t, b, "snap-nonet", 20*time.Second)
	requireReady(t, st)
	if st.LogTail != "" {
		t.Error("a Ready build state carries its log; refreshes of Ready environments must not read it")
	}
	if log := b.LogTail("snap-nonet"); len(interfaces(log)) != 1 || interfaces(log)[0] != "lo" {
		t.Fatalf("blocked build sees interfaces %v; log:\n%s", interfaces(log), log)
	}
	// Without BlockNetwork the build still has lo alone: its network is an egress
	// proxy's (TestBuildWithoutAllowListRefusesHostServices), never the host's.
	st = waitDone(t, b, "snap-net", 20*time.Second)
	requireReady(t, st)
	if log := b.LogTail("snap-net"); len(interfaces(log)) != 1 || interfaces(log)[0] != "lo" {
		t.Fatalf("networked build sees interfaces %v, want lo alone; log:\n%s", interfaces(log), log)
	}
}

func TestDiskLimit(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-big", Base: rel, Spec: sandbox.SnapshotSpec{DiskGB: 1,
		BuildScript: "fallocate -l 1200M /opt/big 2>/dev/null || head -c 1200M /dev/zero > /opt/big\n"}})
	st := waitDone(t, b, "snap-big", 40*time.Second)
	if st.Status != sandbox.StatusFailed || st.Reason != "snapshot layer is 1.2 GiB, over the disk limit of 1 GiB" {
		t.Fatalf("state %s, reason %q; log:\n%s", st.Status, st.Reason, st.LogTail)
	}
	if _, err := os.Stat(b.layerDir("snap-big")); err == nil {
		t.Error("failed build kept its layer")
	}
	// Within the limit is fine.
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-small", Base: rel, Spec: sandbox.SnapshotSpec{DiskGB: 1, BuildScript: "head -c 1M /dev/zero > /opt/small"}})
	requireReady(t, waitDone(t, b, "snap-small", 20*time.Second))
}

func TestBuildTimeout(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	b.BuildTimeout = 1500 * time.Millisecond
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-slow", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: "sleep 30.0713"}})
	st := waitDone(t, b, "snap-slow", 20*time.Second)
	if st.Status != sandbox.StatusFailed || st.Reason != "build timed out after 1.5s" {
		t.Fatalf("state %s, reason %q; log:\n%s", st.Status, st.Reason, st.LogTail)
	}
	waitNoProcess(t, "sleep 30.0713")
}

// waitNoProcess is noProcess for a build's processes, which its end kills: allowed a
// longer moment to leave, as the build's whole tree is killed.
func waitNoProcess(t *testing.T, marker string) {
	t.Helper()
	goneWithin(t, marker, 5*time.Second)
}

func TestBuildOutlivesCaller(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	// The caller's context ends right after StartBuild returns.
	ctx, cancel := context.WithCancel(context.Background())
	err := b.StartBuild(ctx, sandbox.BuildRequest{ID: "snap-ctx", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: "sleep 0.5; echo done > /opt/done"}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	pid, _, err := readPidFile(filepath.Join(b.snapDir("snap-ctx"), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	sid, err := getsid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := getsid(0); sid != pid || sid == own {
		t.Errorf("supervisor %d is in session %d (ours %d), want its own", pid, sid, own)
	}
	requireReady(t, waitDone(t, b, "snap-ctx", 20*time.Second))

	// The caller is a process that exits as soon as the build has started.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := helperCmd(bin, b.Root(), "snap-orphan", "sleep 2; date +%s%N > /opt/done").CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	exited := time.Now()
	requireReady(t, waitDone(t, b, "snap-orphan", 20*time.Second))
	done, err := strconv.ParseInt(readLayerFile(t, b, "snap-orphan", "opt/done"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if finished := time.Unix(0, done); !finished.After(exited) {
		t.Errorf("build finished at %s, before its caller exited at %s", finished, exited)
	}
}

func getsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}

func TestDeleteRunningBuild(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	const marker = "sleep 60.0419"
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-sleep", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: "echo x > /opt/x\n" + marker}})
	deadline := time.Now().Add(10 * time.Second)
	for len(sandboxtest.ProcessesWith(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("build never ran its script")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid, start, err := readPidFile(filepath.Join(b.snapDir("snap-sleep"), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteSnapshot(context.Background(), "snap-sleep"); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid, start) {
		t.Errorf("supervisor %d survived", pid)
	}
	waitNoProcess(t, marker)
	if b.Exists("snap-sleep") {
		t.Error("snapshot still exists")
	}
	if _, err := os.Stat(b.snapDir("snap-sleep")); err == nil {
		t.Error("snapshot directory still exists")
	}
	if _, err := b.BuildState(context.Background(), "snap-sleep"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("BuildState after delete: %v, want ErrNotFound", err)
	}
	if err := b.DeleteSnapshot(context.Background(), "snap-sleep"); err != nil {
		t.Errorf("deleting a missing snapshot: %v", err)
	}
}

func TestStackedBuild(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-base", Base: rel, Spec: sandbox.SnapshotSpec{
		BuildScript: "echo from-base > /opt/base.txt\necho gone > /etc/remove-me\nmkdir -p /usr/local/lib/app && echo v1 > /usr/local/lib/app/version"}})
	requireReady(t, waitDone(t, b, "snap-base", 20*time.Second))
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-child", Base: "snap-base", Spec: sandbox.SnapshotSpec{BuildScript: `
cat /opt/base.txt > /opt/child.txt
test -f /etc/passwd
rm /etc/remove-me
echo v2 > /usr/local/lib/app/version
`}})
	requireReady(t, waitDone(t, b, "snap-child", 20*time.Second))
	if got := readLayerFile(t, b, "snap-child", "opt/child.txt"); got != "from-base" {
		t.Errorf("opt/child.txt = %q", got)
	}
	if got := readLayerFile(t, b, "snap-child", "usr/local/lib/app/version"); got != "v2" {
		t.Errorf("version = %q", got)
	}
	if got := readLayerFile(t, b, "snap-base", "usr/local/lib/app/version"); got != "v1" {
		t.Errorf("base layer changed: version = %q", got)
	}
	// The deletion is a whiteout in the child's layer.
	if info, err := os.Lstat(filepath.Join(b.layerDir("snap-child"), "etc", "remove-me")); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("no whiteout for etc/remove-me: %v", err)
	}
	layers, err := b.Layers("snap-child")
	if err != nil || len(layers) != 3 || layers[1] != b.layerDir("snap-base") || layers[2] != b.layerDir(rel) {
		t.Fatalf("Layers = %v, %v", layers, err)
	}

	// A different base for the same id is refused.
	if err := b.StartBuild(context.Background(), sandbox.BuildRequest{ID: "snap-child", Base: rel}); err == nil {
		t.Error("StartBuild with another base succeeded")
	}
	// Building on a missing base fails cleanly.
	err = b.StartBuild(context.Background(), sandbox.BuildRequest{ID: "snap-orphan", Base: "snap-nope"})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("missing base: %v, want ErrNotFound", err)
	}
	// Deleting the base invalidates the child.
	if err := b.DeleteSnapshot(context.Background(), "snap-base"); err != nil {
		t.Fatal(err)
	}
	if st, err := b.BuildState(context.Background(), "snap-child"); err != nil || st.Status != sandbox.StatusFailed {
		t.Errorf("child after base deletion: %+v, %v", st, err)
	}
}

func TestBuildStateErrors(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	if _, err := b.BuildState(context.Background(), "snap-unknown"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := b.BuildState(context.Background(), "../x"); err == nil {
		t.Error("bad id accepted")
	}
	if b.Exists("snap-unknown") || !b.Exists(rel) {
		t.Error("Exists is wrong")
	}
	// A supervisor that vanished without an outcome is a dead build.
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-died", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: "sleep 60.0523"}})
	pid, _, err := readPidFile(filepath.Join(b.snapDir("snap-died"), "pid"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, b, "snap-died", 10*time.Second)
	if st.Status != sandbox.StatusFailed || st.Reason != "build process died" {
		t.Fatalf("state %s, reason %q", st.Status, st.Reason)
	}
	waitNoProcess(t, "sleep 60.0523")
	if err := b.StartBuild(context.Background(), sandbox.BuildRequest{ID: "snap-img", Base: rel, Spec: sandbox.SnapshotSpec{Image: "ubuntu:24.04"}}); err == nil {
		t.Error("foreign image accepted")
	}
}
