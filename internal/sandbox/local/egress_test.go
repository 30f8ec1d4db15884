//go:build linux

package local

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// egressHelperEnv points the egress test at a prebuilt helper (the unprivileged run uses
// it: the user it runs as cannot build).
const egressHelperEnv = "TRUEFORGE_TEST_EGRESS_HELPER"

// buildEgressHelper builds testdata/egresshelper as a static binary.
func buildEgressHelper(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(egressHelperEnv); p != "" {
		return p
	}
	return buildEgressHelperWith(t, "")
}

// buildEgressHelperWith builds testdata/egresshelper with -ldflags.
func buildEgressHelperWith(t *testing.T, ldflags string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("skipping: the go command is needed to build the test helper")
	}
	out := filepath.Join(t.TempDir(), "netd")
	cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", out, "./testdata/egresshelper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build egress helper: %v\n%s", err, b)
	}
	return out
}

const egressProbe = `
import socket, errno
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"ping\n")
print(s.makefile().readline().strip())
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    print("unix ok")
except OSError as e:
    print("unix", errno.errorcode[e.errno])
`

// TestEgressHook: the only way out of a sandbox with an egress hook is the helper, which
// reaches the host's unix socket; commands cannot create unix sockets themselves.
func TestEgressHook(t *testing.T) {
	t.Parallel()
	requireHostTools(t, "python3")
	helper := buildEgressHelper(t)
	r, rel := newTestRuntime(t)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var seen []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				mu.Lock()
				seen = append(seen, strings.TrimSpace(line))
				mu.Unlock()
				_, _ = c.Write([]byte("host got: " + line))
			}()
		}
	}()
	ctx := context.Background()
	if err := r.Create(ctx, sandbox.CreateRequest{ID: "bad", SnapshotID: rel, Egress: &sandbox.Egress{Helper: helper}}); err == nil || !strings.Contains(err.Error(), "egress.socket") {
		t.Fatalf("egress without a socket: %v", err)
	}
	if err := r.Create(ctx, sandbox.CreateRequest{ID: "bad", SnapshotID: rel, Egress: &sandbox.Egress{Socket: sock, Files: map[string][]byte{"../x": nil}}}); err == nil || !strings.Contains(err.Error(), "egress.files") {
		t.Fatalf("egress file with a path: %v", err)
	}
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Egress: &sandbox.Egress{
		Socket: sock, Helper: helper, Files: map[string][]byte{"ca.pem": []byte("CERT\n")},
	}})
	for round := 0; round < 2; round++ {
		if got := mustSh(t, r, "sb", "awk 'NR>2{sub(\":\",\"\",$1); print $1}' /proc/net/dev"); got != "lo" {
			t.Fatalf("interfaces: %q, want only lo", got)
		}
		res, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Argv: []string{"python3", "-c", egressProbe}})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Stdout); got != "host got: ping\nunix EPERM\n" {
			t.Fatalf("probe: %q (stderr %s)", got, res.Stderr)
		}
		got := mustSh(t, r, "sb", `cat /run/trueforge/ca.pem
echo x > /run/trueforge/ca.pem 2>/dev/null && echo wrote || echo ro
touch /run/trueforge/new 2>/dev/null && echo created || echo ro
for p in /proc/[0-9]*; do if [ "$(tr -d '\0' < $p/cmdline 2>/dev/null)" = /run/trueforge/netd ]; then grep -E '^(Uid|Seccomp):' $p/status | awk '{print $2}'; fi; done
grep '^Seccomp:' /proc/self/status | awk '{print $2}'`)
		// The helper runs under the base filter (Seccomp 2) too, only without the AF_UNIX rule.
		if got != "CERT\nro\nro\n1000\n2\n2" {
			t.Fatalf("egress plumbing inside:\n%s", got)
		}
		// The helper is started again whenever the sandbox starts.
		pid, _, _ := r.keeperAlive("sb")
		ns := sandboxPidNS(pid)
		if err := r.Stop(ctx, "sb"); err != nil {
			t.Fatal(err)
		}
		if left := killPidNS(ns); ns == "" || len(left) > 0 {
			t.Fatalf("processes left in the sandbox (%q) after Stop: %v", ns, left)
		}
		if err := r.Start(ctx, "sb"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "ping" {
		t.Fatalf("host socket saw %v", seen)
	}
}

// TestEgressResolvConfSymlink: a snapshot whose /etc/resolv.conf is a symlink into a
// directory the sandbox does not have (systemd-resolved's stub) still gets the hook's
// resolv.conf there, replacing the link in the sandbox's own upper layer only.
func TestEgressResolvConfSymlink(t *testing.T) {
	t.Parallel()
	helper := buildEgressHelper(t)
	r, rel := newTestRuntime(t)
	startBuild(t, r.b, sandbox.BuildRequest{ID: "stub", Base: rel, Spec: sandbox.SnapshotSpec{
		BuildScript: "ln -sf ../run/systemd/resolve/stub-resolv.conf /etc/resolv.conf"}})
	requireReady(t, waitDone(t, r.b, "stub", 30*time.Second))
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	const conf = "nameserver 127.0.0.1\n"
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: "stub", Egress: &sandbox.Egress{
		Socket: sock, Helper: helper, Files: map[string][]byte{egressResolvConf: []byte(conf)},
	}})
	got := mustSh(t, r, "sb", `cat /etc/resolv.conf; test -L /etc/resolv.conf && echo link || echo file
rm -f /etc/resolv.conf 2>/dev/null && echo removed || echo kept`)
	if got != "nameserver 127.0.0.1\nfile\nkept" {
		t.Fatalf("/etc/resolv.conf in the sandbox:\n%s", got)
	}
	if target, err := os.Readlink(filepath.Join(r.b.layerDir("stub"), "etc", "resolv.conf")); err != nil || !strings.Contains(target, "stub-resolv.conf") {
		t.Fatalf("the snapshot's /etc/resolv.conf changed: %q %v", target, err)
	}
}

// TestEgressHelperReady: Create returns, and the first command runs, only once the helper
// listens, however slow it is to start (here 700 ms, well under the 5 s the init waits).
func TestEgressHelperReady(t *testing.T) {
	t.Parallel()
	requireHostTools(t, "python3")
	const delay = 700 * time.Millisecond
	helper := buildEgressHelperWith(t, "-X main.listenDelay="+delay.String())
	r, rel := newTestRuntime(t)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	start := time.Now()
	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Egress: &sandbox.Egress{Socket: sock, Helper: helper}})
	if took := time.Since(start); took < delay {
		t.Fatalf("Create returned after %s, before the helper (%s to start) listened", took, delay)
	}
	got := mustSh(t, r, "sb", `python3 -c '
import socket
socket.create_connection(("127.0.0.1", 3128), timeout=2); print("up")'`)
	if got != "up" {
		t.Fatalf("first command: %q", got)
	}
}
