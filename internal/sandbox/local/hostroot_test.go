//go:build linux

package local

import (
	"context"
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

// The attacks of a sandbox or a build on the host through its uid: as root, before id
// slots, a sandbox's user (and a build's root) was host uid 0 in a user namespace, and
// the kernel checks sysctl writes by effective uid against the file's mode, not by
// capability: /proc/sys/kernel/core_pattern was writable from inside, a full escape.
// These tests look from the host's side (the uids the host sees, what is on the host's
// disk) as well as from inside, as root and, through TestUnprivilegedRuntime, as a user.

// sandboxHostUIDs returns the host uids (real, effective, saved, fs) of every process
// in the sandbox's pid namespace, by pid, init and netd included.
func sandboxHostUIDs(t *testing.T, r *Runtime, id string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for d, status := range sandboxProcs(t, r, id, true) {
		for _, line := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				out[filepath.Base(d)] = strings.Fields(v)
			}
		}
	}
	return out
}

// sandboxProcs is the /proc directory and status of every process in the sandbox's pid
// namespace, read from the host; nsKnown fails the test when that namespace is not
// found (else there is no process).
func sandboxProcs(t *testing.T, r *Runtime, id string, nsKnown bool) map[string]string {
	t.Helper()
	pid, _, alive := r.keeperAlive(id)
	if !alive {
		t.Fatalf("sandbox %s has no keeper", id)
	}
	ns := sandboxPidNS(pid)
	if ns == "" && nsKnown {
		t.Fatalf("sandbox %s: no pid namespace found", id)
	}
	procs := map[string]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err != nil || l != ns {
			continue
		}
		if data, err := os.ReadFile(d + "/status"); err == nil {
			procs[d] = string(data)
		}
	}
	return procs
}

// wantHostUID is the host uid of an inner uid of a sandbox: its id slot's as root, this
// user's otherwise.
func wantHostUID(r *Runtime, id string, inner uint32) string {
	rec, err := r.readRecord(id)
	if err != nil || rec.IDs == nil {
		return strconv.Itoa(os.Getuid())
	}
	return strconv.FormatUint(uint64(rec.IDs.hostUID(inner)), 10)
}

// TestAttackHostUID: seen from the host, no process of a sandbox is uid 0: every one of
// them, the init and the egress helper included, is the sandbox user's id in the
// sandbox's slot (root) or this user (unprivileged); files it writes are that id's on
// the host's disk.
func TestAttackHostUID(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	ctx := context.Background()
	marker := "400.1" + uniq
	go func() { _, _ = r.Exec(ctx, "sb", sandbox.ExecRequest{Shell: "sleep " + marker}) }()
	waitProcess(t, "sleep", marker)
	uids := sandboxHostUIDs(t, r, "sb")
	if len(uids) < 3 { // init, sh (or sleep), sleep
		t.Fatalf("found %d processes in the sandbox: %v", len(uids), uids)
	}
	want := wantHostUID(r, "sb", sandboxUIDn)
	for pid, ids := range uids {
		for _, u := range ids {
			if u == "0" || u != want {
				t.Errorf("sandbox process %d has host uids %v, want all %s (never 0)", mustAtoi(pid), ids, want)
			}
		}
	}
	// What it writes is that id's on the host's disk, the workspace and its upper layer.
	mustSh(t, r, "sb", "echo w > /workspace/w; echo v > /var/tmp/v-"+uniq)
	for _, p := range []string{filepath.Join(r.wsDir("sb"), "w"), filepath.Join(r.dataDir("sb"), "upper", "rest", "var", "tmp", "v-"+uniq)} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); got != want {
			t.Errorf("%s is host uid %s's, want %s", p, got, want)
		}
	}
	if r.b.ids != nil {
		rec, _ := r.readRecord("sb")
		if rec.IDs.UID < r.b.ids.uid || rec.IDs.UID >= r.b.ids.uid+uint32(r.b.ids.slots)*idsPerSlot {
			t.Fatalf("slot %+v is outside account %s's range", rec.IDs, r.b.ids.account)
		}
	}
}

// TestAttackHostUIDEgress: with the egress hook, netd (started by the init) is not host
// root either.
func TestAttackHostUIDEgress(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "eg", SnapshotID: rel, Egress: testEgress(t)})
	ctx := context.Background()
	marker := "400.2" + uniq
	go func() { _, _ = r.Exec(ctx, "eg", sandbox.ExecRequest{Shell: "sleep " + marker}) }()
	waitProcess(t, "sleep", marker)
	want := wantHostUID(r, "eg", sandboxUIDn)
	uids := sandboxHostUIDs(t, r, "eg")
	if len(uids) < 4 { // init, netd, sh (or sleep), sleep
		t.Fatalf("found %d processes in the sandbox: %v", len(uids), uids)
	}
	for pid, ids := range uids {
		for _, u := range ids {
			if u != want {
				t.Errorf("sandbox process %d has host uids %v, want all %s", mustAtoi(pid), ids, want)
			}
		}
	}
}

// testEgress is an egress hook with the real helper (trueforge-netd) and a socket that
// answers (listenUnix).
func testEgress(t *testing.T) *sandbox.Egress {
	t.Helper()
	sock := filepath.Join(t.TempDir(), sandbox.EgressSocketName)
	listenUnix(t, sock)
	return &sandbox.Egress{Socket: sock, Helper: buildNetd(t)}
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// sysctlProbe tries to write every sysctl that looks writable (any w bit) with its
// current value, and the host-wide triggers; it prints one line per write that worked
// ("WROTE path") and a count of the attempts.
const sysctlProbe = `n=0
for f in $(find /proc/sys -type f -perm /222 2>/dev/null) /proc/sysrq-trigger; do
	[ -e "$f" ] || continue
	n=$((n+1))
	v=$(cat "$f" 2>/dev/null) || v=
	if [ "$f" = /proc/sysrq-trigger ]; then v=x; fi
	if (printf '%s\n' "$v" > "$f") 2>/dev/null; then echo "WROTE $f"; fi
done
echo "tried $n"
for f in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug /proc/interrupts /proc/latency_stats /proc/timer_stats; do
	[ -e "$f" ] || continue
	if [ -n "$(head -c 64 "$f" 2>/dev/null)" ]; then echo "READ $f"; fi
done
for d in /proc/acpi /proc/scsi /proc/asound /sys/firmware /sys; do
	if [ -n "$(ls -A "$d" 2>/dev/null)" ]; then echo "LISTED $d"; fi
	if (: > "$d/probe") 2>/dev/null; then echo "CREATED $d/probe"; fi
done
for d in /proc/irq /proc/bus /proc/fs; do
	for f in $(find "$d" -type f -perm /222 2>/dev/null | head -20); do
		if (cat "$f" > "$f") 2>/dev/null; then echo "WROTE $f"; fi
	done
done
cat /proc/sys/kernel/hostname
`

// checkSysctlProbe fails on any write or read sysctlProbe reported.
func checkSysctlProbe(t *testing.T, who, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tried := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "WROTE "), strings.HasPrefix(l, "READ "), strings.HasPrefix(l, "LISTED "), strings.HasPrefix(l, "CREATED "):
			t.Errorf("%s: %s", who, l)
		case strings.HasPrefix(l, "tried "):
			n, _ := strconv.Atoi(strings.TrimPrefix(l, "tried "))
			tried = n > 0
		}
	}
	if !tried {
		t.Errorf("%s: the probe tried no sysctl: %q", who, out)
	}
}

// TestAttackSysctls: from a sandbox, no sysctl and no host-wide /proc trigger can be
// written (each is tried with its current value), the masked /proc entries read empty
// and /sys is absent; the sandbox's own hostname still reads through /proc/sys.
func TestAttackSysctls(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	create(t, r, sandbox.CreateRequest{ID: "eg", SnapshotID: rel, Egress: testEgress(t)})
	for _, id := range []string{"sb", "eg"} {
		out := mustSh(t, r, id, sysctlProbe)
		checkSysctlProbe(t, "sandbox "+id, out)
		if !strings.HasSuffix(out, "\nsandbox") {
			t.Errorf("sandbox %s: /proc/sys/kernel/hostname does not read the sandbox's own: %q", id, out)
		}
	}
	before, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		t.Fatal(err)
	}
	mustSh(t, r, "sb", "echo '|/workspace/x' > /proc/sys/kernel/core_pattern || true")
	if after, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(after) != string(before) {
		t.Fatalf("core_pattern changed from the sandbox: %q -> %q", before, after)
	}
}

// TestAttackBuildSysctls: a build script runs as root of its id slot with every
// capability there; it can neither write a sysctl nor undo the covering of /proc (its
// mounts are its own, the covered /proc entries are host files it may not write), and
// the host sees it as the slot's root, not uid 0.
func TestAttackBuildSysctls(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	marker := "3.3" + uniq
	script := `exec 3>/opt/probe.out
id -u >&3
grep -E '^CapEff' /proc/self/status >&3
(umount /proc/sys || umount -l /proc/sys) 2>/dev/null && echo UNMOUNTED >&3
(mount -o remount,rw /proc/sys) 2>/dev/null && echo REMOUNTED >&3
{
` + sysctlProbe + `
} >&3
sleep ` + marker + "\n"
	startBuild(t, b, sandbox.BuildRequest{ID: "attack", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: script}})
	waitProcess(t, "sleep", marker)
	for _, pid := range sandboxtest.ProcessesWith("sleep " + marker) {
		data, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				for _, u := range strings.Fields(v) {
					if u == "0" {
						t.Errorf("the build's process %s is host uid 0: %s", pid, line)
					}
				}
			}
		}
	}
	requireReady(t, waitDone(t, b, "attack", 60*time.Second))
	out := readLayerFile(t, b, "attack", "opt/probe.out")
	lines := strings.SplitN(out, "\n", 3)
	if lines[0] != "0" {
		t.Fatalf("the build script is uid %s inside, want 0: %q", lines[0], out)
	}
	if os.Geteuid() == 0 && !strings.Contains(lines[1], "000001ff") && !strings.Contains(lines[1], "000003ff") {
		t.Errorf("the build's root lacks its capabilities inside: %s", lines[1])
	}
	if strings.Contains(out, "UNMOUNTED") || strings.Contains(out, "REMOUNTED") {
		t.Errorf("the build uncovered /proc/sys: %s", out)
	}
	checkSysctlProbe(t, "build", out)
	// The layer's files are root's on the host's disk, as in any root filesystem: what the
	// build's root made belongs to 0 once the build is over, not to its slot.
	fi, err := os.Stat(filepath.Join(b.layerDir("attack"), "opt", "probe.out"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != uint32(os.Getuid()) {
		t.Errorf("a file the build's root made is host uid %d's in the layer, want %d", uid, os.Getuid())
	}
}

// TestAttackScratchUnderMemoryLimit: filling /tmp and /dev/shm in a sandbox with a small
// memory limit ends the filling command with the limit it hit (disk for /tmp, a full
// /dev/shm), not the sandbox: the init and a background process survive, and the next
// command runs.
func TestAttackScratchUnderMemoryLimit(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Limits: sandbox.Limits{MemoryMB: 32, DiskMB: 48}})
	marker := "600.4" + uniq
	mustSh(t, r, "sb", "sleep "+marker+" >/dev/null 2>&1 &")
	waitProcess(t, "sleep", marker)
	res := sh(t, r, "sb", "head -c 200000000 /dev/zero > /tmp/fill")
	if res.ExitCode == 0 || res.Limit != sandbox.LimitDisk {
		t.Errorf("filling /tmp: exit %d, limit %q, stderr %q; want the disk limit", res.ExitCode, res.Limit, res.Stderr)
	}
	res = sh(t, r, "sb", "head -c 200000000 /dev/zero > /dev/shm/fill")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Errorf("filling /dev/shm: exit %d, limit %q, stderr %q; want ENOSPC", res.ExitCode, res.Limit, res.Stderr)
	}
	// Both full at once, and a hog on top: still only the offender goes.
	res = sh(t, r, "sb", "python3 -c 'b = bytearray(100 << 20); print(len(b))' 2>&1 || echo hog-ended")
	if !processRuns("sleep", marker) {
		t.Fatal("the background process died with the filling commands")
	}
	if got := mustSh(t, r, "sb", "rm -f /tmp/fill /dev/shm/fill; echo alive"); got != "alive" {
		t.Fatalf("after the fills: %q", got)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil && r.limits.mode != limitRlimit && !strings.Contains(string(res.Stdout), "hog-ended") {
		t.Errorf("a 100 MiB hog in a 32 MiB sandbox: %q", res.Stdout)
	}
	// Commands are the OOM killer's first choice, the init is not. The init holds the
	// commands' score only while it forks one, so its own is read from the host, after
	// the command (a command reading /proc/1 at once may see the fork's moment).
	if got := mustSh(t, r, "sb", "cat /proc/self/oom_score_adj"); got != commandOOMScore {
		t.Fatalf("oom_score_adj of a command: %q", got)
	}
	if got := sandboxInitOOMScore(t, r, "sb"); got != "0" {
		t.Fatalf("oom_score_adj of the init, seen from the host after a command: %q", got)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil || r.limits.mode == limitRlimit {
		return // without a memory cgroup there is no sandbox OOM to survive
	}
	// Memory that no process maps (a memfd written to, as a tmpfs file would be) does not
	// make its holder the largest process; the OOM killer still takes the command.
	res = sh(t, r, "sb", `python3 -c '
import os
fd = os.memfd_create("hog")
chunk = b"x" * (1 << 20)
for i in range(200):
    os.write(fd, chunk)
print("held")' 2>&1 || echo memfd-hog-ended`)
	if strings.Contains(string(res.Stdout), "held") || !processRuns("sleep", marker) {
		t.Fatalf("memfd hog: %q; background alive: %v", res.Stdout, processRuns("sleep", marker))
	}
	if got := mustSh(t, r, "sb", "echo alive"); got != "alive" {
		t.Fatalf("after the memfd hog: %q", got)
	}
}

// TestSlotMigration: a sandbox made before id slots (its files all host root's, its
// record without a slot) gets a slot at its next start, and its files become the
// sandbox user's, as they were inside; so does one restored from an archive of that
// time (host ids, no marker).
func TestSlotMigration(t *testing.T) {
	requireRoot(t, "id slots are a root runtime's")
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	for _, id := range []string{"old", "oldarchive"} {
		create(t, r, sandbox.CreateRequest{ID: id, SnapshotID: rel})
		mustSh(t, r, id, "mkdir -p /workspace/d && echo kept > /workspace/d/f && echo v > /var/tmp/v")
		if err := r.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		// Back to what the old runtime left: every file host root's, no slot.
		rec, err := r.readRecord(id)
		if err != nil {
			t.Fatal(err)
		}
		toRoot := func(uid, gid uint32) (uint32, uint32, bool) { return 0, 0, uid != 0 || gid != 0 }
		if err := shiftTree(ctx, r.dataDir(id), toRoot); err != nil {
			t.Fatal(err)
		}
		r.b.ids.release(*rec.IDs, r.dir(id))
		rec.IDs = nil
		if id == "oldarchive" {
			f, err := os.Create(r.archivePath(id))
			if err != nil {
				t.Fatal(err)
			}
			if err := packDir(ctx, f, r.dataDir(id), nil); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := r.freeData(id); err != nil {
				t.Fatal(err)
			}
			rec.Status = sandbox.SandboxArchived
		}
		if err := writeRecord(r.dir(id), rec); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got := mustSh(t, r, id, "cat /workspace/d/f /var/tmp/v; stat -c '%u' /workspace/d /workspace/d/f /var/tmp/v; echo more > /workspace/d/f && echo rewritten"); got != "kept\nv\n1000\n1000\n1000\nrewritten" {
			t.Fatalf("%s after migration: %q", id, got)
		}
		if rec, _ := r.readRecord(id); rec.IDs == nil {
			t.Fatalf("%s has no slot after its start", id)
		}
	}
}

// requireRoot skips a test of what only a root runtime does.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: " + why)
	}
}

// sandboxInitOOMScore is the oom_score_adj of the sandbox's init (pid 1 of its pid
// namespace), read from the host.
func sandboxInitOOMScore(t *testing.T, r *Runtime, id string) string {
	t.Helper()
	for d, status := range sandboxProcs(t, r, id, false) {
		for _, line := range strings.Split(status, "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 && f[len(f)-1] == "1" {
					score, err := os.ReadFile(d + "/oom_score_adj")
					if err != nil {
						t.Fatal(err)
					}
					return strings.TrimSpace(string(score))
				}
			}
		}
	}
	t.Fatalf("sandbox %s: no init found in its pid namespace", id)
	return ""
}
