//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// newTestRuntime returns a runtime on a fresh builder root (newTestBuilder's) and the id
// of its release, a Ready snapshot. Every sandbox left is deleted at the end of the test.
func newTestRuntime(t testing.TB) (*Runtime, string) {
	t.Helper()
	b, rel := newTestBuilder(t)
	r, err := NewRuntime(b, filepath.Join(b.Root(), "runtime"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		list, _ := r.List(context.Background())
		for _, s := range list {
			if err := r.Delete(context.Background(), s.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		r.limits.removeParents()
		r.dropSpares()
	})
	return r, rel
}

// newSandbox returns a runtime as newTestRuntime does, with sandbox "sb" created on its
// release: where most of the runtime's tests start.
func newSandbox(t testing.TB) *Runtime {
	t.Helper()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	return r
}

func create(t testing.TB, r *Runtime, req sandbox.CreateRequest) {
	t.Helper()
	if err := r.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// sh runs a shell command and fails the test on an error (not on a non-zero status).
func sh(t testing.TB, r *Runtime, id, script string) sandbox.ExecResult {
	t.Helper()
	res, err := r.Exec(context.Background(), id, sandbox.ExecRequest{Shell: script, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

func mustSh(t testing.TB, r *Runtime, id, script string) string {
	t.Helper()
	res := sh(t, r, id, script)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// noProcess fails at once if a process has marker in its command line: the runtime
// returns only once the processes it killed are gone.
func noProcess(t *testing.T, marker string) {
	t.Helper()
	goneWithin(t, marker, 2*time.Second)
}

// goneWithin fails if a process with marker in its command line is still there after
// within. SIGKILL is sent before the call returns, but a killed process leaves the
// process table only once the kernel has run it to its end, which a loaded machine can
// delay for a moment: allow that moment, not more.
func goneWithin(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pids := sandboxtest.ProcessesWith(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes with %q still running %s after they were killed: %v", marker, within, pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecBasics(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Env: map[string]string{"A": "from-create", "B": "b"}})
	ctx := context.Background()

	res, err := r.Exec(ctx, "sb", sandbox.ExecRequest{
		Argv:  []string{"/bin/sh", "-c", `echo "$A $B $C"; pwd; id -u; id -g; cat; echo err >&2; exit 3`},
		Env:   map[string]string{"A": "from-exec", "C": "c"},
		Stdin: strings.NewReader("in\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "from-exec b c\n/workspace\n1000\n1000\nin\n"
	if string(res.Stdout) != want || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Fatalf("got exit %d stdout %q stderr %q; want 3 %q %q", res.ExitCode, res.Stdout, res.Stderr, want, "err\n")
	}
	if got := mustSh(t, r, "sb", "mkdir -p sub && cd /workspace/sub && pwd && echo hi > f"); got != "/workspace/sub" {
		t.Fatalf("pwd %q", got)
	}
	res, err = r.Exec(ctx, "sb", sandbox.ExecRequest{Argv: []string{"cat", "f"}, Cwd: "/workspace/sub"})
	if err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("cat in cwd: %v %q %q", err, res.Stdout, res.Stderr)
	}
	// Unprivileged inside: no capabilities, no_new_privs is not needed for that but the
	// capability sets must be empty.
	if got := mustSh(t, r, "sb", "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $2}' | sort -u"); got != "0000000000000000" {
		t.Fatalf("capabilities inside: %q", got)
	}
	// The overlay: writes outside the workspace stay in the sandbox.
	mustSh(t, r, "sb", "echo x > /var/tmp/sandbox-made-"+uniq)
	if got := mustSh(t, r, "sb", "cat /var/tmp/sandbox-made-"+uniq); got != "x" {
		t.Fatalf("overlay writes did not persist in the sandbox: %q", got)
	}
	if _, err := os.Stat("/var/tmp/sandbox-made-" + uniq); err == nil {
		t.Fatal("a sandbox write reached the host /var/tmp")
	}
	if os.Geteuid() == 0 {
		// As root the system directories are root's (the id slot's), not the sandbox
		// user's, as on any machine.
		res, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo x > /etc/sandbox-made || echo x > /usr/local/sandbox-made"}})
		if err != nil || res.ExitCode == 0 {
			t.Fatalf("the sandbox user wrote into /etc or /usr/local: %v %+v", err, res)
		}
	}
	if _, err := r.Exec(ctx, "missing", sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec in a missing sandbox: %v, want ErrNotFound", err)
	}
	if err := r.Create(ctx, sandbox.CreateRequest{ID: "sb", SnapshotID: rel}); !errors.Is(err, sandbox.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
}

func TestAttackHostFiles(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("host-secret-42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := sh(t, r, "sb", "cat "+secret+"; ls "+secretDir+"; cat /etc/shadow; echo done")
	if strings.Contains(string(res.Stdout), "host-secret-42") || strings.Contains(string(res.Stdout), "secret.txt") {
		t.Fatalf("host file visible in the sandbox: %s", res.Stdout)
	}
	if shadow, err := os.ReadFile("/etc/shadow"); err == nil && len(shadow) > 0 && strings.Contains(string(res.Stdout), strings.SplitN(string(shadow), "\n", 2)[0]) {
		t.Fatal("host /etc/shadow readable in the sandbox")
	}
	// Writes everywhere outside the workspace persist nothing on the host.
	res = sh(t, r, "sb", "echo pwned > "+secret+"; mkdir -p "+secretDir+" && echo pwned > "+secretDir+"/new; echo pwned > /tmp/pwned; echo pwned > /usr/bin/pwned; echo pwned > /pwned; echo done")
	if data, _ := os.ReadFile(secret); string(data) != "host-secret-42\n" {
		t.Fatalf("host file changed: %q", data)
	}
	for _, p := range []string{filepath.Join(secretDir, "new"), "/tmp/pwned", "/usr/bin/pwned", "/pwned"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("sandbox created host file %s", p)
		}
	}
	// The root of the sandbox is read-only; /tmp is the sandbox's own tmpfs, emptied
	// when it stops.
	if got := mustSh(t, r, "sb", "test -e /pwned && echo yes || echo no; test -e /tmp/pwned && echo yes || echo no"); got != "no\nyes" {
		t.Fatalf("root or /tmp: %q", got)
	}
	if err := r.Stop(context.Background(), "sb"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), "sb"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "sb", "test -e /tmp/pwned && echo yes || echo no"); got != "no" {
		t.Fatalf("/tmp kept across stop and start: %q", got)
	}
}

func TestAttackHostProcesses(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	// Only the sandbox's init, the shell and what it runs: the test binary, whose pid
	// and command line the host shows, is not there.
	got := mustSh(t, r, "sb", `for p in /proc/[0-9]*; do printf '%s ' "${p#/proc/}"; tr '\0' ' ' < $p/cmdline; echo; done; hostname`)
	lines := strings.Split(got, "\n")
	if len(lines) < 3 || len(lines) > 6 {
		t.Fatalf("sandbox sees %d processes, want only its own (2 to 4):\n%s", len(lines)-1, got)
	}
	self := strconv.Itoa(os.Getpid())
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		if f[0] == self || strings.Contains(l, filepath.Base(os.Args[0])) || strings.Contains(l, "unshare -Urm") {
			t.Fatalf("host process visible in the sandbox: %q\n%s", l, got)
		}
	}
	if !strings.HasPrefix(lines[0], "1 ") {
		t.Fatalf("first process is not the sandbox's init:\n%s", got)
	}
	if lines[len(lines)-1] != "sandbox" {
		t.Fatalf("hostname %q, want sandbox", lines[len(lines)-1])
	}
}

func TestAttackNetworkBlocked(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "blocked", SnapshotID: rel, BlockNetwork: true})
	create(t, r, sandbox.CreateRequest{ID: "open", SnapshotID: rel})
	ifaces := "ls /sys/class/net 2>/dev/null || awk 'NR>2{sub(\":\",\"\",$1); print $1}' /proc/net/dev"
	if got := mustSh(t, r, "blocked", ifaces); got != "lo" {
		t.Fatalf("interfaces under BlockNetwork: %q, want only lo", got)
	}
	var hostIfaces []string
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		hostIfaces = append(hostIfaces, e.Name())
	}
	if got := mustSh(t, r, "open", ifaces+" | sort"); len(hostIfaces) > 0 && got != strings.Join(hostIfaces, "\n") {
		t.Fatalf("interfaces with host network: %q, want %q", got, hostIfaces)
	}
	// Try it: a listener on the host's loopback is out of reach of the blocked sandbox
	// (and, to show the probe works, within reach of the open one).
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("reached\n"))
			c.Close()
		}
	}()
	probe := fmt.Sprintf(`import socket
try:
    print(socket.create_connection(("127.0.0.1", %d), timeout=2).makefile().readline().strip())
except OSError as e:
    print("refused")`, ln.Addr().(*net.TCPAddr).Port)
	for id, want := range map[string]string{"blocked": "refused", "open": "reached"} {
		res, err := r.Exec(context.Background(), id, sandbox.ExecRequest{Argv: []string{"python3", "-c", probe}, Timeout: 20 * time.Second})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != want {
			t.Fatalf("%s: %q %v (stderr %s), want %s", id, res.Stdout, err, res.Stderr, want)
		}
	}
	// The blocked sandbox's own lo is up, and ports below 1024 stay privileged there:
	// only an egress sandbox's namespace lets its helper bind port 53.
	if got := mustSh(t, r, "blocked", `python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname(), timeout=2); print("lo up")
try:
    socket.socket().bind(("127.0.0.1", 53)); print("bound 53")
except OSError as e:
    print("53", e.strerror)'`); got != "lo up\n53 Permission denied" {
		t.Fatalf("loopback of the blocked sandbox: %q", got)
	}
}

// TestAttackInit goes after the sandbox's init, which runs as the same user as the
// commands: signals, its memory and descriptors, the control socket. The sandbox must
// keep working and nothing of the host may be reached.
func TestAttackInit(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	// A descriptor the owner has without close-on-exec must not reach the sandbox.
	leak, err := syscall.Open(r.root, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leak)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	// kill -1 reaches every process the caller may signal, the shell included.
	sh(t, r, "sb", `for s in TERM INT HUP QUIT USR1 KILL; do kill -s $s 1 2>/dev/null; done; kill -9 -1`)
	got := mustSh(t, r, "sb", `readlink /proc/1/fd/0 >/dev/null 2>&1 && echo fds-read || echo fds-denied
(exec 3</proc/1/mem) 2>/dev/null && echo mem-opened || echo mem-denied
find / -xdev -name ctl.sock 2>/dev/null | wc -l
ls /proc/self/fd | tr '\n' ' '`)
	if got != "fds-denied\nmem-denied\n0\n0 1 2 3" {
		t.Fatalf("attacks on the init:\n%s", got)
	}
	if got := mustSh(t, r, "sb", "echo still-here"); got != "still-here" {
		t.Fatalf("after the attacks: %q", got)
	}
}

// TestAttackInitSignals sends the sandbox's init every signal from 1 to 64, each
// one from inside the sandbox: the init must neither end (the same keeper, with the same
// init, still serves) nor stop, and still reap its commands.
func TestAttackInitSignals(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	initStart := mustSh(t, r, "sb", "cut -d' ' -f22 /proc/1/stat")
	pid, start, alive := r.keeperAlive("sb")
	if !alive {
		t.Fatal("no keeper")
	}
	for s := 1; s <= 64; s++ {
		got := mustSh(t, r, "sb", fmt.Sprintf(`kill -%d 1 || echo not sent; sleep 0.02; sed -n 's/^State:\t\(.\).*/\1/p' /proc/1/status`, s))
		if got != "S" && got != "R" {
			t.Errorf("signal %d: the init's state %q", s, got)
		}
	}
	if p, st, ok := r.keeperAlive("sb"); !ok || p != pid || st != start {
		t.Fatalf("the keeper changed: %d/%d %v, was %d/%d", p, st, ok, pid, start)
	}
	if got := mustSh(t, r, "sb", "cut -d' ' -f22 /proc/1/stat; sh -c 'exit 3'; echo $?"); got != initStart+"\n3" {
		t.Fatalf("after the signals: %q, the init started at %s", got, initStart)
	}
}

// TestAttackDeleteLeavesNothing: processes that left the command's group (setsid,
// double fork) are gone once Delete returns, and so is every file.
func TestAttackDeleteLeavesNothing(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Limits: sandbox.Limits{Pids: 50, DiskMB: 16}})
	mustSh(t, r, "sb", "setsid sleep 700.1"+uniq+" >/dev/null 2>&1 </dev/null & (sleep 700.2"+uniq+" >/dev/null 2>&1 </dev/null &) ; echo x > f")
	waitProcess(t, "sleep", "700.1"+uniq)
	waitProcess(t, "sleep", "700.2"+uniq)
	cgroups := r.limits.cgroupDirs("sb")
	if err := r.Delete(context.Background(), "sb"); err != nil {
		t.Fatal(err)
	}
	noProcess(t, "700.1"+uniq)
	noProcess(t, "700.2"+uniq)
	if _, err := os.Stat(r.dir("sb")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sandbox directory left: %v", err)
	}
	for _, d := range cgroups {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cgroup left: %s", d)
		}
	}
	if m := mountsUnder(r.root); len(m) > 0 {
		t.Fatalf("mounts left: %v", m)
	}
}

func TestAttackOtherSandbox(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "a", SnapshotID: rel})
	create(t, r, sandbox.CreateRequest{ID: "b", SnapshotID: rel})
	mustSh(t, r, "a", "echo a-private > /workspace/mine; echo a-etc > /var/tmp/mine")
	wsA := r.wsDir("a")
	res := sh(t, r, "b", "cat /workspace/mine /var/tmp/mine "+wsA+"/mine "+r.dataDir("a")+"/upper/rest/var/tmp/mine; ls "+r.root+"; echo done")
	if strings.Contains(string(res.Stdout), "a-private") || strings.Contains(string(res.Stdout), "a-etc") || strings.Contains(string(res.Stdout), "sandboxes") {
		t.Fatalf("sandbox b sees a's files: %s", res.Stdout)
	}
}

func TestAttackSymlinkDownload(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	ctx := context.Background()
	mustSh(t, r, "sb", "ln -s /etc/passwd abs; ln -s ../ up; ln -s ../../../../../../etc/passwd rel; ln -s / rootdir; mkfifo fifo; echo ok > real; ln -s real inside")
	for _, p := range []string{"abs", "up", "rel", "rootdir/etc/passwd", "up/state.json", "/workspace/up/state.json", "fifo", "../state.json", "/etc/passwd", "inside"} {
		if data, err := r.ReadFile(ctx, "sb", p, 0); err == nil {
			t.Errorf("download of %q succeeded: %q", p, data)
		}
	}
	for _, p := range []string{"abs", "rootdir/tmp/escaped", "up/escaped", "fifo"} {
		if err := r.WriteFile(ctx, "sb", p, strings.NewReader("x"), 0); err == nil {
			t.Errorf("upload to %q succeeded", p)
		}
	}
	if _, err := os.Stat("/tmp/escaped"); err == nil {
		t.Error("upload escaped to /tmp/escaped")
	}
	if _, err := os.Stat(filepath.Join(r.dir("sb"), "escaped")); err == nil {
		t.Error("upload escaped to the sandbox directory")
	}
	if data, err := r.ReadFile(ctx, "sb", "/workspace/real", 0); err != nil || string(data) != "ok\n" {
		t.Fatalf("regular download: %q %v", data, err)
	}
	// Deleting a link removes the link, not its target.
	if err := r.DeleteFile(ctx, "sb", "rootdir"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteFile(ctx, "sb", "../.."); err == nil {
		t.Fatal("deleting the workspace succeeded")
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	ctx := context.Background()
	r.MaxFileSize = 1024
	if err := r.WriteFile(ctx, "sb", "/workspace/dir/a.txt", strings.NewReader("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "sb", "cat dir/a.txt; stat -c %a dir/a.txt; echo more >> dir/a.txt; head -c 2000 /dev/zero > big"); got != "hello600" {
		t.Fatalf("uploaded file inside: %q", got)
	}
	if data, err := r.ReadFile(ctx, "sb", "dir/a.txt", 0); err != nil || string(data) != "hellomore\n" {
		t.Fatalf("download: %q %v", data, err)
	}
	if _, err := r.ReadFile(ctx, "sb", "big", 0); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("download over the cap: %v", err)
	}
	if _, err := r.ReadFile(ctx, "sb", "big", 100); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("download over max: %v", err)
	}
	if err := r.WriteFile(ctx, "sb", "big2", strings.NewReader(strings.Repeat("x", 2000)), 0); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("upload over the cap: %v", err)
	}
	list, err := r.ListFiles(ctx, "sb", "/workspace", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list.Entries {
		names = append(names, f.Path)
	}
	if strings.Join(names, ",") != "big,big2,dir" {
		t.Fatalf("list: %v", names)
	}
	if fi, err := r.StatFile(ctx, "sb", "dir/a.txt"); err != nil || fi.Size != 10 || !fi.Mode.IsRegular() {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	if err := r.DeleteFile(ctx, "sb", "dir"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "sb", "test -e dir && echo yes || echo no"); got != "no" {
		t.Fatalf("deleted dir still there: %q", got)
	}
}

func TestEndlessOutputCapped(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	res, err := r.Exec(context.Background(), "sb", sandbox.ExecRequest{
		Shell: "echo FIRST; yes 0123456789 | head -c 50000000; echo; echo LAST", OutputCap: 64 << 10, Timeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if !res.Truncated || len(out) > 65<<10 || !strings.HasPrefix(out, "FIRST\n") || !strings.HasSuffix(out, "\nLAST\n") || !strings.Contains(out, "bytes truncated") {
		t.Fatalf("truncated %v, %d bytes, head %q tail %q", res.Truncated, len(out), out[:min(20, len(out))], out[max(0, len(out)-20):])
	}
	// Endless, with the timeout: the retained output stays capped.
	res, err = r.Exec(context.Background(), "sb", sandbox.ExecRequest{Shell: "yes", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || !res.Truncated || len(res.Stdout) > sandbox.DefaultOutputCap+100 {
		t.Fatalf("endless output: timed out %v, truncated %v, %d bytes", res.TimedOut, res.Truncated, len(res.Stdout))
	}
}

func TestEndlessLoopTimeout(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	start := time.Now()
	res, err := r.Exec(context.Background(), "sb", sandbox.ExecRequest{
		Shell: "sleep 77.7" + uniq + " & while :; do :; done", Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 124 || time.Since(start) > 5*time.Second {
		t.Fatalf("timed out %v, exit %d, after %s", res.TimedOut, res.ExitCode, time.Since(start))
	}
	noProcess(t, "77.7"+uniq)
	noProcess(t, "while :")

	// Cancelling the context kills it too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Shell: "sleep 77.8" + uniq}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled exec: %v", err)
	}
	noProcess(t, "77.8"+uniq)
}

func TestBackgroundGrandchild(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	start := time.Now()
	// The grandchild holds stdout and stderr open.
	res := sh(t, r, "sb", "sleep 100.5"+uniq+" & echo started")
	if time.Since(start) > 5*time.Second || strings.TrimSpace(string(res.Stdout)) != "started" {
		t.Fatalf("exec with a background child: %q after %s", res.Stdout, time.Since(start))
	}
	// Also when it escaped into its own session and closed nothing.
	res = sh(t, r, "sb", "setsid sleep 100.6"+uniq+" & echo started")
	if time.Since(start) > 10*time.Second || strings.TrimSpace(string(res.Stdout)) != "started" {
		t.Fatalf("exec with a setsid child: %q after %s", res.Stdout, time.Since(start))
	}
	if err := r.Stop(context.Background(), "sb"); err != nil {
		t.Fatal(err)
	}
	noProcess(t, "100.5"+uniq)
	noProcess(t, "100.6"+uniq)
}

func TestStopStart(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel})
	ctx := context.Background()
	mustSh(t, r, "sb", "echo kept > /workspace/f; echo kept-too > /var/tmp/g")

	// A running exec is killed by Stop, with everything it started.
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, _ := r.Exec(ctx, "sb", sandbox.ExecRequest{Shell: "sleep 200.5" + uniq + " & sleep 200.6" + uniq})
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !processRuns("sleep", "200.5"+uniq) || !processRuns("sleep", "200.6"+uniq) {
		if time.Now().After(deadline) {
			t.Fatal("exec did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Stop(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	// Stop returns once the processes are gone.
	if pids := append(sandboxtest.ProcessesWith("200.5"+uniq), sandboxtest.ProcessesWith("200.6"+uniq)...); len(pids) > 0 {
		t.Fatalf("processes left after Stop: %v", pids)
	}
	select {
	case res := <-done:
		if res.ExitCode == 0 {
			t.Fatalf("killed exec exited 0")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Exec did not return after Stop")
	}
	if info, err := r.Get(ctx, "sb"); err != nil || info.Status != sandbox.SandboxStopped {
		t.Fatalf("after stop: %+v %v", info, err)
	}
	if _, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec in a stopped sandbox: %v", err)
	}
	// Another process (here: another Runtime on the same root) finds the sandbox.
	r2, err := NewRuntime(r.b, r.root)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := r2.List(ctx); err != nil || len(list) != 1 || list[0].ID != "sb" || list[0].SnapshotID != rel {
		t.Fatalf("list from another runtime: %+v %v", list, err)
	}
	if err := r2.Start(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "sb", "cat /workspace/f /var/tmp/g"); got != "kept\nkept-too" {
		t.Fatalf("files after stop/start: %q", got)
	}
	if err := r2.Delete(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.dir("sb")); err == nil {
		t.Fatal("sandbox directory left after Delete")
	}
	if _, err := r.Get(ctx, "sb"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := r.Delete(ctx, "sb"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

// processRuns reports whether a process with exactly this command line runs.
func processRuns(argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if data, err := os.ReadFile(filepath.Join(d, "cmdline")); err == nil && string(data) == want {
			return true
		}
	}
	return false
}

// TestStopDuringStart stops a sandbox while execs are being handed to it and its keeper
// is being started again: nothing may survive, and Stop must not hang.
func TestStopDuringStart(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		done := make(chan error, 1)
		go func() {
			_, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Shell: "sleep 300.7" + uniq})
			done <- err
		}()
		time.Sleep(time.Duration(i) * 2 * time.Millisecond) // somewhere in the hand-over
		if err := r.Stop(ctx, "sb"); err != nil {
			t.Fatal(err)
		}
		noProcess(t, "300.7"+uniq)
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, sandbox.ErrStopped) {
				t.Fatalf("exec during stop: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Exec did not return after Stop")
		}
		if err := r.Start(ctx, "sb"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, alive := r.keeperAlive("sb"); !alive {
		t.Fatal("no keeper after Start")
	}
}

func TestCapBuffer(t *testing.T) {
	c := sandbox.NewOutputBuffer(10)
	for _, s := range []string{"abc", "defgh", "ijklmnop", "qrstuvwxyz"} {
		c.Write([]byte(s))
	}
	got, tr := c.Bytes()
	if string(got) != "abcde\n[... 16 bytes truncated ...]\nvwxyz" || !tr {
		t.Fatalf("%q %v", got, tr)
	}
	c = sandbox.NewOutputBuffer(10)
	c.Write([]byte("0123456789"))
	if got, tr := c.Bytes(); string(got) != "0123456789" || tr {
		t.Fatalf("%q %v", got, tr)
	}
}

// pySyscalls is the start of a Python probe (after it imports ctypes and errno) that
// tries what a sandbox must not do: sc(nr, args...) makes a raw system call, and
// res(f) says how f came out ("ok" or the errno's name, such as "EPERM"). It has no
// single quote, so that a shell script can quote a probe that holds it.
const pySyscalls = `libc = ctypes.CDLL(None, use_errno=True)
def res(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def sc(nr, *a):
    if libc.syscall(nr, *a) < 0:
        raise OSError(ctypes.get_errno(), "")
`

const seccompProbe = `
import ctypes, errno, os, socket, threading, subprocess
` + pySyscalls + `print("unix", res(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)))
print("inet", res(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()))
print("unshare", res(lambda: sc(272, 0x10000000)))
print("ptrace", res(lambda: sc(101, 16, 1, 0, 0)))
print("keyctl", res(lambda: sc(250, 0, 0, 0, 0)))
print("bpf", res(lambda: sc(321, 0, 0, 0)))
print("io_uring", res(lambda: sc(425, 1, 0)))
print("pidfd_getfd", res(lambda: sc(438, 0, 0, 0)))
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("thread ok")
print("fork", subprocess.run(["true"]).returncode)
`

// TestSeccomp checks that the filter denies what it should and leaves ordinary work
// (threads, fork, inet sockets) alone. The probe needs python3 (the host /usr).
func TestSeccomp(t *testing.T) {
	t.Parallel()
	if seccompProgram() == nil {
		t.Skip("skipping: no seccomp filter on this architecture")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil || runtime.GOARCH != "amd64" {
		t.Skip("skipping: the probe needs python3 on amd64")
	}
	r, rel := newTestRuntime(t)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, BlockNetwork: true})
	res, err := r.Exec(context.Background(), "sb", sandbox.ExecRequest{Argv: []string{"python3", "-c", seccompProbe}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := "unix EPERM\ninet ok\nunshare EPERM\nptrace EPERM\nkeyctl EPERM\nbpf EPERM\nio_uring EPERM\npidfd_getfd EPERM\nthread ok\nfork 0\n"
	if string(res.Stdout) != want {
		t.Fatalf("probe: exit %d\n%s\nstderr: %s\nwant:\n%s", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	if got := mustSh(t, r, "sb", "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | awk '{print $2}'"); got != "1\n2" {
		t.Fatalf("NoNewPrivs and Seccomp: %q, want 1 and 2", got)
	}
	if res := sh(t, r, "sb", "unshare -U true"); res.ExitCode == 0 {
		t.Fatal("unshare -U succeeded in the sandbox")
	}
}
