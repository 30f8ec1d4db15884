//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The egress helper (netd) runs in the sandbox as the same user as the commands and, unlike
// them, may create AF_UNIX sockets. A command that could take it over (write code into it
// through /proc/<pid>/mem, as a security review did) must gain nothing else: netd is not
// dumpable (so /proc/<pid>/mem, task/*/syscall, environ and fd are closed to the sandbox
// user) and runs under the sandbox's seccomp filter, all of it but the AF_UNIX rule (so
// even a netd taken over cannot unshare a user namespace, mount, ptrace, ...).

// takeoverShellcode is x86-64 code that runs execve(path, [path], NULL), path following
// it: lea rdi,[rip+15]; push 0; push rdi; mov rsi,rsp; xor edx,edx; mov eax,59; syscall.
const takeoverShellcode = "\x48\x8d\x3d\x0f\x00\x00\x00" + "\x6a\x00\x57\x48\x89\xe6\x31\xd2\xb8\x3b\x00\x00\x00\x0f\x05"

// takeoverPayload is what the shellcode runs, in place of netd: it reports the filter it
// inherited and what it may do. Nothing it tries changes anything outside the sandbox.
const takeoverPayload = `#!/bin/sh
exec >/workspace/takeover.tmp 2>&1
grep -E '^(NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status
/usr/bin/python3 -c '
import ctypes, errno, socket
` + pySyscalls + `print("unshare", res(lambda: sc(272, 0x10000000)))
print("io_uring", res(lambda: sc(425, 1, 0)))
print("keyctl", res(lambda: sc(250, 0, 0, 0, 0)))
print("ptrace", res(lambda: sc(101, 16, 0x3fffffff, 0, 0)))
print("unix", res(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()))
'
/usr/bin/unshare -Urm true 2>/dev/null && echo unshare-cmd ok || echo unshare-cmd refused
mv /workspace/takeover.tmp /workspace/takeover.out
`

// netdAttackProbe is the command-side attacker: it finds netd, reports its status and its
// own, and tries what the review did. Should /proc/<netd>/mem open for writing, it goes
// on and writes the shellcode at the PC of every thread of netd blocked in a system call.
const netdAttackProbe = `
import errno, glob, os, socket, time
def field(st, k):
    for l in st.splitlines():
        if l.startswith(k + ':'):
            return l.split(':', 1)[1].split()[0]
    return '-'
def res(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
pid = None
for p in glob.glob('/proc/[0-9]*'):
    try:
        if open(p + '/cmdline', 'rb').read().split(b'\0')[0] == b'/run/trueforge/netd':
            pid = p.split('/')[-1]
    except OSError:
        pass
if pid is None:
    print('netd none')
    raise SystemExit(0)
st = open('/proc/%s/status' % pid).read()
me = open('/proc/self/status').read()
print('netd', ' '.join(field(st, k) for k in ('Uid', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters')))
print('self', ' '.join(field(me, k) for k in ('Uid', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters')))
print('mem-read', res(lambda: open('/proc/%s/mem' % pid, 'rb').close()))
print('syscall', res(lambda: [open(t + '/syscall').read() for t in glob.glob('/proc/%s/task/*' % pid)]))
print('environ', res(lambda: open('/proc/%s/environ' % pid, 'rb').read()))
print('fd-link', res(lambda: os.readlink('/proc/%s/fd/0' % pid)))
print('fd-open', res(lambda: open('/proc/%s/fd/0' % pid, 'rb').close()))
try:
    m = open('/proc/%s/mem' % pid, 'r+b', buffering=0)
except OSError as e:
    print('mem-write', errno.errorcode.get(e.errno, str(e.errno)))
    raise SystemExit(0)
print('mem-write ok')
code = SHELLCODE + b'/workspace/pwn.sh\0'
pcs = set()
for t in glob.glob('/proc/%s/task/*' % pid):
    f = open(t + '/syscall').read().split()
    if f[0] != 'running':
        pcs.add(int(f[-1], 16))
for pc in pcs:
    m.seek(pc)
    m.write(code)
for i in range(5):
    try:
        socket.create_connection(('127.0.0.1', 3128), timeout=1).close()
    except OSError:
        pass
    time.sleep(0.2)
print('injected', len(pcs))
`

// harnessHelperEnv points the netd attacks at a prebuilt static trueforge-harness, as
// netdEnv does at a trueforge-netd (for a run whose user cannot build).
const harnessHelperEnv = "TRUEFORGE_TEST_HARNESS"

// netdHelpers are the two binaries that serve as netd, each of which the netd attacks
// run against: the static trueforge-harness, which is what the harness runs by default
// (sandboxnet.LocateHelper picks the harness binary itself), and trueforge-netd.
var netdHelpers = []struct {
	name  string
	build func(testing.TB) string
}{
	{"harness", buildHarnessHelper},
	{"trueforge-netd", buildNetd},
}

// buildHarnessHelper builds cmd/trueforge-harness static, as the demo does, and checks
// that sandboxnet.LocateHelper, asked for the helper of a harness run from that binary,
// picks the binary itself; it returns its path.
func buildHarnessHelper(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(harnessHelperEnv); p != "" {
		return p
	}
	if os.Getenv(netdEnv) != "" {
		t.Skipf("skipping: %s names a prebuilt helper, so this run may not build (set %s to a static trueforge-harness too)", netdEnv, harnessHelperEnv)
	}
	out := buildStatic(t, "cmd/trueforge-harness")
	if os.Getenv(sandboxnet.HelperEnv) == "" {
		if got, err := sandboxnet.LocateHelper(out); err != nil || got != out {
			t.Fatalf("sandboxnet.LocateHelper(%s) = %q, %v; want the harness itself", out, got, err)
		}
	}
	return out
}

// TestAttackNetdTakeover: from a command, netd's memory cannot be opened (so the review's
// takeover through /proc/<pid>/mem fails), netd runs under the sandbox's filter minus the
// AF_UNIX rule, and a netd taken over anyway (here by root on the host, which may write
// its memory) can neither unshare nor mount nor ptrace, only create unix sockets. It runs
// against each of netdHelpers.
func TestAttackNetdTakeover(t *testing.T) {
	t.Parallel()
	if seccompProgram() == nil {
		t.Skip("skipping: no seccomp filter on this architecture")
	}
	requireHostTools(t, "python3")
	for _, h := range netdHelpers {
		t.Run(h.name, func(t *testing.T) { attackNetdTakeover(t, h.build(t)) })
	}
}

// attackNetdTakeover is TestAttackNetdTakeover against the helper netdBin.
func attackNetdTakeover(t *testing.T, netdBin string) {
	r, rel := newTestRuntime(t)
	sock := filepath.Join(t.TempDir(), sandbox.EgressSocketName)
	listenUnix(t, sock)
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Egress: &sandbox.Egress{Socket: sock, Helper: netdBin}})
	ctx := context.Background()
	if err := r.WriteFile(ctx, "sb", "pwn.sh", strings.NewReader(takeoverPayload), 0o755); err != nil {
		t.Fatal(err)
	}

	// The command side.
	code := ""
	if runtime.GOARCH == "amd64" {
		code = takeoverShellcode
	}
	probe := strings.Replace(netdAttackProbe, "SHELLCODE", pyBytes(code), 1)
	res, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Argv: []string{"python3", "-c", probe}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out[f[0]] = f[1:]
		}
	}
	report := fmt.Sprintf("probe: exit %d\n%s\nstderr: %s", res.ExitCode, res.Stdout, res.Stderr)
	if res.ExitCode != 0 || len(out["netd"]) != 4 || len(out["self"]) != 4 {
		t.Fatalf("%s\nno netd found, or the probe failed", report)
	}
	if w := out["mem-write"]; len(w) != 1 || (w[0] != "EACCES" && w[0] != "EPERM") {
		time.Sleep(3 * time.Second)
		got, _ := os.ReadFile(filepath.Join(r.wsDir("sb"), "takeover.out"))
		t.Errorf("a command opened netd's memory for writing (want EACCES or EPERM)\n%s\npayload run as netd:\n%s", report, got)
	}
	for _, k := range []string{"mem-read", "syscall", "environ", "fd-link", "fd-open"} {
		if v := out[k]; len(v) != 1 || (v[0] != "EACCES" && v[0] != "EPERM") {
			t.Errorf("a command reached netd's /proc/<pid> %s: %v (want EACCES or EPERM)", k, v)
		}
	}
	netd, self := out["netd"], out["self"]
	if netd[0] != self[0] {
		t.Errorf("netd runs as uid %s, the commands as %s\n%s", netd[0], self[0], report)
	}
	if netd[1] != "1" || netd[2] != "2" {
		t.Errorf("netd has NoNewPrivs %s and Seccomp %s, want 1 and 2 (filtered)\n%s", netd[1], netd[2], report)
	}
	// The commands have one filter more than netd: the AF_UNIX rule.
	nf, err1 := strconv.Atoi(netd[3])
	sf, err2 := strconv.Atoi(self[3])
	if err1 != nil || err2 != nil || nf < 1 || sf != nf+1 {
		t.Errorf("Seccomp_filters: netd %s, command %s; want netd at least 1 and the command one more\n%s", netd[3], self[3], report)
	}
	if t.Failed() {
		return
	}

	// A netd taken over all the same: root on the host writes the shellcode into it.
	if os.Geteuid() != 0 || runtime.GOARCH != "amd64" {
		t.Log("not root on amd64: the takeover from the host is not tried")
		return
	}
	pid, err := sandboxNetdPid(r, "sb")
	if err != nil {
		t.Fatal(err)
	}
	if err := injectExec(pid, takeoverShellcode+"/workspace/pwn.sh\x00"); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(r.wsDir("sb"), "takeover.out")
	var got []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		// Wake netd's threads: each returns from its system call into the shellcode.
		_ = sh(t, r, "sb", `for i in 1 2 3; do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 3128), timeout=1).close()' 2>/dev/null; done; exit 0`)
		if got, err = os.ReadFile(outFile); err == nil {
			break
		}
	}
	if got == nil {
		t.Fatalf("the shellcode written into netd (host pid %d) never ran the payload", pid)
	}
	want := []string{"NoNewPrivs:\t1", "Seccomp:\t2", "unshare EPERM", "io_uring EPERM", "keyctl EPERM", "ptrace EPERM", "unix ok", "unshare-cmd refused"}
	t.Logf("netd taken over from the host (pid %d) could:\n%s", pid, got)
	for _, w := range want {
		if !strings.Contains(string(got), w) {
			t.Errorf("netd taken over: no %q in what it could do:\n%s", w, got)
		}
	}
}

// pyBytes is s as a Python bytes literal.
func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString("b'")
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "\\x%02x", s[i])
	}
	b.WriteString("'")
	return b.String()
}

// sandboxNetdPid returns the host pid of the sandbox's netd.
func sandboxNetdPid(r *Runtime, id string) (int, error) {
	kp, _, alive := r.keeperAlive(id)
	if !alive {
		return 0, errors.New("no keeper")
	}
	ns := sandboxPidNS(kp)
	if ns == "" {
		return 0, errors.New("no pid namespace for the sandbox")
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err != nil || l != ns {
			continue
		}
		cmd, err := os.ReadFile(d + "/cmdline")
		if err == nil && strings.Split(string(cmd), "\x00")[0] == sandbox.EgressHelperPath {
			return strconv.Atoi(filepath.Base(d))
		}
	}
	return 0, fmt.Errorf("no netd in %s", ns)
}

// injectExec writes code at the PC of every thread of pid that is blocked in a system
// call, through /proc/<pid>/mem, as the review did from inside the sandbox.
func injectExec(pid int, code string) error {
	m, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer m.Close()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	n := 0
	for _, task := range tasks {
		data, err := os.ReadFile(task + "/syscall")
		f := strings.Fields(string(data))
		if err != nil || len(f) < 3 || f[0] == "running" {
			continue
		}
		pc, err := strconv.ParseUint(strings.TrimPrefix(f[len(f)-1], "0x"), 16, 64)
		if err != nil {
			continue
		}
		if _, err := m.WriteAt([]byte(code), int64(pc)); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no thread of netd is blocked in a system call")
	}
	return nil
}

// netdFilterChildEnv makes TestNetdFilterStack's child, a copy of the test binary,
// install the filters on itself and report what they let through.
const netdFilterChildEnv = "TRUEFORGE_TEST_NETD_FILTER_CHILD"

// TestNetdFilterStack checks the two filters the init stacks: the first (what netd gets)
// denies namespaces, mount, ptrace and the rest but lets AF_UNIX sockets through; the
// second (what the commands get on top) denies AF_UNIX sockets.
func TestNetdFilterStack(t *testing.T) {
	if seccompProgram() == nil {
		t.Skip("skipping: no seccomp filter on this architecture")
	}
	if os.Getenv(netdFilterChildEnv) == "1" {
		netdFilterChild()
		return
	}
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestNetdFilterStack$", "-test.count=1")
	cmd.Env = append(os.Environ(), netdFilterChildEnv+"=1")
	b, err := cmd.CombinedOutput()
	out := string(b)
	want := "base: unix ok inet ok unshare EPERM clone-newuser EPERM setns EPERM io_uring EPERM keyctl EPERM ptrace EPERM\n" +
		"stacked: unix EPERM inet ok unshare EPERM\n"
	if err != nil || !strings.HasPrefix(out, want) {
		t.Fatalf("child: %v\n%s\nwant:\n%s", err, out, want)
	}
}

// netdFilterChild runs in the child of TestNetdFilterStack, and writes its report to
// stdout. Nothing it tries would change anything were a filter missing: the user
// namespace is refused anyway to a process with threads, the clone runs /bin/true, setns
// joins the namespace the process is in, io_uring_setup and keyctl get invalid
// arguments, and ptrace a pid that does not exist.
func netdFilterChild() {
	errname := func(err error) string {
		var e syscall.Errno
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &e) && e == syscall.EPERM:
			return "EPERM"
		case errors.As(err, &e):
			return fmt.Sprintf("errno%d", int(e))
		}
		return err.Error()
	}
	raw := func(nr uintptr, a ...uintptr) string {
		a = append(a, 0, 0, 0)
		if _, _, e := syscall.RawSyscall(nr, a[0], a[1], a[2]); e != 0 {
			return errname(e)
		}
		return "ok"
	}
	sock := func(family int) string {
		fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fd)
		}
		return errname(err)
	}
	unshareUser := func() string { return errname(syscall.Unshare(syscall.CLONE_NEWUSER)) }
	report := func() string {
		_, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
		ns, nerr := os.Open("/proc/self/ns/net")
		setns := errname(nerr)
		if nerr == nil {
			setns = raw(uintptr(seccompArchTable.deny[len(seccompArchTable.deny)-1]), ns.Fd(), 0) // setns
			ns.Close()
		}
		return fmt.Sprintf("unix %s inet %s unshare %s clone-newuser %s setns %s io_uring %s keyctl %s ptrace %s",
			sock(syscall.AF_UNIX), sock(syscall.AF_INET), unshareUser(), errname(err), setns,
			raw(sysIOUringSetup, 1, 0), raw(uintptr(seccompArchTable.deny[3]), 0, 0), // keyctl
			raw(syscall.SYS_PTRACE, syscall.PTRACE_ATTACH, 0x3fffffff))
	}
	if err := lockDown(); err != nil {
		fmt.Println("lockDown:", err)
		os.Exit(1)
	}
	fmt.Println("base:", report())
	if err := denyUnixSockets(); err != nil {
		fmt.Println("denyUnixSockets:", err)
		os.Exit(1)
	}
	fmt.Printf("stacked: unix %s inet %s unshare %s\n", sock(syscall.AF_UNIX), sock(syscall.AF_INET), unshareUser())
	os.Exit(0)
}
