//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// Attacks on the limits through what sits beside them: sparse files that cost nothing
// on the sandbox's disk but everything when archived, the tmpfs mounts (/tmp, /dev/shm,
// /dev) that live in host memory, and a root runtime on rlimits, where RLIMIT_NPROC does
// not apply.

// TestAttackSparseArchive makes a sparse file far larger than the sandbox's disk can
// hold (with a disk cap, larger than the cap; without one, larger than the filesystem
// holding the sandbox): Archive refuses it at once, before reading anything, and the
// sandbox is left Stopped with its files intact; without the file it archives.
func TestAttackSparseArchive(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	type variant struct {
		name string
		lim  sandbox.Limits
		cap  string // in the error
	}
	variants := []variant{{name: "nocap"}}
	if r.limits.diskImage {
		variants = append(variants, variant{name: "disk", lim: sandbox.Limits{DiskMB: 16}, cap: "16 MiB"})
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctx := context.Background()
			create(t, r, sandbox.CreateRequest{ID: v.name, SnapshotID: rel, BlockNetwork: true, Limits: v.lim})
			size := int64(2 << 30)
			if v.lim.DiskMB == 0 {
				// More than the whole filesystem that holds the sandbox's data.
				var st syscall.Statfs_t
				if err := syscall.Statfs(r.dataDir(v.name), &st); err != nil {
					t.Fatal(err)
				}
				size = (int64(st.Blocks)*st.Bsize>>20 + 1024) << 20
			}
			res := sh(t, r, v.name, "echo kept > /workspace/keep; mkdir -p /workspace/d; echo deep > /workspace/d/f; truncate -s "+
				strconv.FormatInt(size, 10)+" /workspace/sparse && echo made")
			if strings.TrimSpace(string(res.Stdout)) != "made" {
				t.Skipf("skipping: cannot make a sparse file of %d bytes here: %s", size, res.Stderr)
			}
			// Bounded, so that an archiver that reads the whole file fails rather than
			// taking the test run with it.
			actx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			began := time.Now()
			err := r.Archive(actx, v.name)
			took := time.Since(began)
			if err == nil {
				t.Fatalf("archived a sandbox holding a %d-byte sparse file (took %s)", size, took)
			}
			msg := err.Error()
			t.Logf("refused in %s: %s", took, msg)
			for _, want := range []string{"sandbox " + v.name, strconv.FormatInt(size>>20, 10) + " MiB", "sparse", v.cap} {
				if !strings.Contains(msg, want) {
					t.Errorf("archive error %q does not mention %q", msg, want)
				}
			}
			if took > 5*time.Second {
				t.Errorf("refusing the archive took %s: the data was read", took)
			}
			if _, err := os.Stat(r.archivePath(v.name)); err == nil {
				t.Error("an archive was written")
			}
			info, err := r.Get(ctx, v.name)
			if err != nil || info.Status != sandbox.SandboxStopped {
				t.Fatalf("after the refused archive: %+v %v, want Stopped", info, err)
			}
			if err := r.Start(ctx, v.name); err != nil {
				t.Fatalf("start after the refused archive: %v", err)
			}
			want := "kept\ndeep\n" + strconv.FormatInt(size, 10)
			if got := mustSh(t, r, v.name, "cat /workspace/keep /workspace/d/f; stat -c %s /workspace/sparse"); got != want {
				t.Fatalf("files after the refused archive:\n%s\nwant:\n%s", got, want)
			}
			// Without the sparse file the sandbox archives and comes back.
			mustSh(t, r, v.name, "rm /workspace/sparse")
			if err := r.Archive(ctx, v.name); err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx, v.name); err != nil {
				t.Fatal(err)
			}
			if got := mustSh(t, r, v.name, "cat /workspace/keep /workspace/d/f"); got != "kept\ndeep" {
				t.Fatalf("after the round trip: %q", got)
			}
		})
	}
}

// TestArchiveRestoreSparse archives a sandbox whose files fit its disk only because one
// of them is sparse: the restore keeps it sparse (a dense copy would not fit the
// 16 MiB image), and every byte comes back.
func TestArchiveRestoreSparse(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	create(t, r, sandbox.CreateRequest{ID: "sparse", SnapshotID: rel, BlockNetwork: true, Limits: sandbox.Limits{DiskMB: 16}})
	const sums = "sha256sum /workspace/real /workspace/holes /workspace/zeros"
	before := mustSh(t, r, "sparse", `set -e
head -c 7000000 /dev/urandom > /workspace/real
truncate -s 9000000 /workspace/holes
printf middle | dd of=/workspace/holes bs=1 seek=4500000 conv=notrunc 2>/dev/null
printf end | dd of=/workspace/holes bs=1 seek=8999997 conv=notrunc 2>/dev/null
head -c 100000 /dev/zero > /workspace/zeros
printf 'x' >> /workspace/zeros
`+sums)
	if err := r.Archive(ctx, "sparse"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "sparse"); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if after := mustSh(t, r, "sparse", sums); after != before {
		t.Fatalf("after restore:\n%s\nwant:\n%s", after, before)
	}
	// The holes stay holes: two 4 KiB blocks hold data.
	if kb, err := strconv.Atoi(mustSh(t, r, "sparse", "du -k /workspace/holes | cut -f1")); err != nil || kb > 64 {
		t.Fatalf("restored sparse file uses %d KiB (%v)", kb, err)
	}
	if got := mustSh(t, r, "sparse", "stat -c %s /workspace/holes /workspace/zeros"); got != "9000000\n100001" {
		t.Fatalf("sizes after restore: %q", got)
	}
}

// TestAttackTmpfs fills /tmp and /dev/shm and writes into /dev: /tmp is on the sandbox's
// disk (its disk cap: an image as root, a cap on each file unprivileged), /dev/shm 64 MiB
// (a quarter of the memory limit when that is less), and nothing can be created in /dev;
// what programs need of /dev still works.
func TestAttackTmpfs(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "small", SnapshotID: rel, Limits: sandbox.Limits{DiskMB: 16, MemoryMB: 32}})
	create(t, r, sandbox.CreateRequest{ID: "plain", SnapshotID: rel})
	fill := "head -c 10000000 /dev/zero > /tmp/a && head -c 10000000 /dev/zero > /tmp/b && echo wrote"
	if !r.limits.diskImage {
		fill = "head -c 20000000 /dev/zero > /tmp/a && echo wrote" // the cap is on each file
	}
	res := sh(t, r, "small", fill)
	if res.ExitCode == 0 || res.Limit != sandbox.LimitDisk {
		t.Fatalf("20 MB in /tmp of a 16 MiB sandbox: exit %d, limit %q, stdout %q, stderr %q", res.ExitCode, res.Limit, res.Stdout, res.Stderr)
	}
	mustSh(t, r, "small", "rm -f /tmp/a /tmp/b")
	// /tmp lasts until the sandbox stops, and is the sandbox's own.
	mustSh(t, r, "small", "echo kept > /tmp/k")
	if got := mustSh(t, r, "small", "cat /tmp/k; stat -c '%a %u' /tmp"); got != "kept\n1777 0" && got != "kept\n1777 1000" {
		t.Fatalf("/tmp: %q", got)
	}
	if err := r.Stop(context.Background(), "small"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), "small"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "small", "ls -A /tmp | wc -l"); got != "0" {
		t.Fatalf("/tmp after a restart holds %s entries", got)
	}
	for _, c := range []struct {
		id, dir string
		want    int64
	}{{"plain", "/dev/shm", 64 << 20}, {"small", "/dev/shm", 8 << 20}} {
		f := strings.Fields(mustSh(t, r, c.id, "stat -f -c '%b %S' "+c.dir))
		blocks, _ := strconv.ParseInt(f[0], 10, 64)
		bsize, _ := strconv.ParseInt(f[1], 10, 64)
		if blocks*bsize != c.want {
			t.Errorf("%s of %s holds %d bytes, want %d", c.dir, c.id, blocks*bsize, c.want)
		}
	}
	res = sh(t, r, "plain", "head -c 70000000 /dev/zero > /dev/shm/big")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("70 MB in /dev/shm: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	mustSh(t, r, "plain", "rm /dev/shm/big")
	for _, script := range []string{"true > /dev/probe", "mkdir /dev/probe", "ln -s /tmp /dev/probe", "mkfifo /dev/probe", "rm -f /dev/null", "true > /dev/shm/../probe"} {
		res := sh(t, r, "plain", script+" && echo made")
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "made") {
			t.Errorf("%s: made it (stderr %q)", script, res.Stderr)
		}
	}
	if got := mustSh(t, r, "plain", "ls -A /dev | tr '\\n' ' '"); strings.Contains(got, "probe") || !strings.Contains(got, "null") {
		t.Fatalf("/dev: %s", got)
	}
	got := mustSh(t, r, "plain", `echo x > /dev/null && head -c 16 /dev/urandom | wc -c && head -c 3 /dev/zero | wc -c
echo shared > /dev/shm/f && cat /dev/shm/f && rm /dev/shm/f
test -t 0 || echo no-tty
ls /dev/pts >/dev/null && echo pts`)
	if got != "16\n3\nshared\nno-tty\npts" {
		t.Fatalf("/dev in use: %q", got)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		// multiprocessing's locks and queues are POSIX semaphores in /dev/shm.
		if got := mustSh(t, r, "plain", `python3 -c '
import multiprocessing as m
q = m.Queue(); q.put("queued"); print(q.get())
p = m.Process(target=print, args=("child",)); p.start(); p.join()'`); got != "queued\nchild" {
			t.Fatalf("python multiprocessing: %q", got)
		}
	}
}

// TestLimitsRootRlimitPids: a root runtime without a writable cgroup enforces pids with
// RLIMIT_NPROC, which binds the sandbox's processes since they are an id slot's uids,
// not host root (to which it does not apply).
func TestLimitsRootRlimitPids(t *testing.T) {
	requireRoot(t, "a root runtime's limits; the unprivileged rlimit mode is TestAttackForkBomb's in the unprivileged run")
	t.Parallel()
	r, rel := newTestRuntime(t)
	mode := r.limits.mode
	r.limits.mode = limitRlimit
	t.Cleanup(func() { r.limits.mode = mode }) // before the sandboxes are deleted
	create(t, r, sandbox.CreateRequest{ID: "bomb", SnapshotID: rel, Limits: sandbox.Limits{Pids: 32}})
	res, err := r.Exec(context.Background(), "bomb", sandbox.ExecRequest{
		Shell: "for i in $(seq 100); do sleep 300.7" + uniq + " & done; wait", Timeout: 3 * time.Second,
	})
	if err != nil && !errors.Is(err, sandbox.ErrLost) {
		t.Fatal(err)
	}
	if n := len(sandboxtest.ProcessesWith("300.7" + uniq)); n == 0 || n >= 32 {
		t.Fatalf("%d sleeps run in a sandbox limited to 32 processes (exit %d, stderr %q)", n, res.ExitCode, res.Stderr)
	}
	if !strings.Contains(string(res.Stderr), "Resource temporarily unavailable") && !strings.Contains(string(res.Stderr), "fork") {
		t.Errorf("stderr %q does not say that fork failed", res.Stderr)
	}
}
