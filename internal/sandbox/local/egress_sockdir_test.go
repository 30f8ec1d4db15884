//go:build linux

package local

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// TestEgressSurvivesANewListener: the harness's listener goes away and a new proxy (from
// the first one's state, as a new harness process recreates it) listens at the same path;
// the running sandbox reaches it with no Stop or Start, and a background process started
// by an earlier command is still alive. Between the two, the sandbox has no way out.
func TestEgressSurvivesANewListener(t *testing.T) {
	t.Parallel()
	requireHostTools(t, "curl")
	netdBin := buildNetd(t)
	r, rel := newTestRuntime(t)
	ctx := context.Background()

	secret, up := secretUpstream(t, "relisten")
	res := &e2eResolver{asked: map[string]int{}}
	var mu sync.Mutex
	allowedBy := map[int]int{} // proxy generation -> allowed decisions
	newProxy := func(gen int, st *egress.State) *egress.Proxy {
		cfg := e2eConfig("relisten", secret, up, res)
		cfg.Log = func(d egress.Decision) {
			mu.Lock()
			defer mu.Unlock()
			if d.Allowed {
				allowedBy[gen]++
			}
		}
		cfg.State = st
		p, err := egress.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sock := filepath.Join(t.TempDir(), sandbox.EgressSocketName)

	first := newProxy(1, nil)
	stopFirst := serveProxy(t, first, sock)
	create(t, r, sandbox.CreateRequest{ID: "relisten", SnapshotID: rel, Env: first.Env(), Egress: egressHook(first, sock, netdBin)})
	bg := mustSh(t, r, "relisten", `setsid sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 </dev/null & echo $! > /tmp/bg.pid; echo alive > /tmp/marker; cat /tmp/bg.pid`)
	keeper, _, _ := r.keeperAlive("relisten")

	authorized := `curl -sS --max-time 20 -o /workspace/auth.out -H "Authorization: Bearer $API_TOKEN" https://` +
		net.JoinHostPort(allowedHost, up.port) + `/auth 2>/workspace/curl.log || { cat /workspace/curl.log; exit 1; }; cat /workspace/auth.out`
	if got := mustSh(t, r, "relisten", authorized); got != "authorized" {
		t.Fatalf("through the first listener: %q", got)
	}

	// The first harness goes: no way out until the next one listens.
	stopFirst()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the first listener's socket file is still there (%v): the test would not show a new one is reached", err)
	}
	if res := sh(t, r, "relisten", `curl -sS --max-time 10 https://`+net.JoinHostPort(allowedHost, up.port)+`/auth`); res.ExitCode == 0 {
		t.Fatalf("the sandbox got out with no listener: %s", res.Stdout)
	}

	st := first.State()
	serveProxy(t, newProxy(2, &st), sock)
	if got := mustSh(t, r, "relisten", authorized); got != "authorized" {
		t.Fatalf("through the new listener, no restart: %q", got)
	}
	mu.Lock()
	second := allowedBy[2]
	mu.Unlock()
	if second == 0 {
		t.Fatal("the second proxy decided nothing: the request did not go through the new listener")
	}
	if got := mustSh(t, r, "relisten", `kill -0 "$(cat /tmp/bg.pid)" && cat /tmp/bg.pid /tmp/marker`); got != bg+"\nalive" {
		t.Fatalf("the background process or /tmp of the earlier command: %q, want %s and alive", got, bg)
	}
	if now, _, alive := r.keeperAlive("relisten"); !alive || now != keeper {
		t.Fatalf("keeper %d (alive %v), want the same keeper %d: the sandbox was restarted", now, alive, keeper)
	}
}

// listenUnix listens on a unix socket at path until the test ends, answering each
// connection's first line with "host got: <line>".
func listenUnix(t *testing.T, path string) net.Listener {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256)
				n, _ := c.Read(buf)
				_, _ = c.Write(append([]byte("host got: "), buf[:n]...))
			}()
		}
	}()
	return ln
}

// socketIn makes a private directory named with prefix right under dir and returns the
// path of the egress socket in it. dir should be short: a unix socket path is at most
// 107 bytes, and the unprivileged run's temp dir is deep.
func socketIn(t *testing.T, dir, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, sandbox.EgressSocketName)
}

// TestAttackEgressSocketDir: the socket's directory is bound read-only and holds only the
// socket, so the sandbox user (who maps to its owner) can neither remove, replace nor
// chmod the socket nor add anything beside it; another sandbox's directory is nowhere in
// the sandbox, and the helper still connects through the read-only mount.
func TestAttackEgressSocketDir(t *testing.T) {
	t.Parallel()
	requireHostTools(t, "python3")
	helper := buildEgressHelper(t)
	r, rel := newTestRuntime(t)
	sockA, sockB := socketIn(t, "", "tfsdA-"), socketIn(t, "", "tfsdB-")
	listenUnix(t, sockA)
	listenUnix(t, sockB)
	before, err := os.Stat(sockA)
	if err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "a", SnapshotID: rel, Egress: &sandbox.Egress{Socket: sockA, Helper: helper}})
	create(t, r, sandbox.CreateRequest{ID: "b", SnapshotID: rel, Egress: &sandbox.Egress{Socket: sockB, Helper: helper}})

	got := mustSh(t, r, "a", `d=/run/trueforge/egress
ls -A $d | tr '\n' ' '; echo
ls -A /run/trueforge | tr '\n' ' '; echo
rm -f $d/egress.sock 2>/dev/null && echo removed || echo kept
mv $d/egress.sock $d/moved 2>/dev/null && echo moved || echo kept
touch $d/new 2>/dev/null && echo created || echo refused
mkdir $d/sub 2>/dev/null && echo created || echo refused
ln -s /workspace $d/link 2>/dev/null && echo created || echo refused
chmod 777 $d/egress.sock 2>/dev/null && echo chmod || echo refused
chmod 777 $d 2>/dev/null && echo chmod || echo refused
awk '$5 == "/run/trueforge/egress" {split($6, o, ","); print o[1]}' /proc/self/mountinfo
grep -c tfsdA- /proc/self/mountinfo; grep -c tfsdB- /proc/self/mountinfo; true`)
	want := "egress.sock \negress init netd \nkept\nkept\nrefused\nrefused\nrefused\nrefused\nrefused\nro\n1\n0"
	if got != want {
		t.Fatalf("inside sandbox a:\n%s\nwant:\n%s", got, want)
	}
	res, err := r.Exec(context.Background(), "a", sandbox.ExecRequest{Argv: []string{"python3", "-c", egressProbe}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "host got: ping\nunix EPERM\n" {
		t.Fatalf("the helper through the read-only directory: %q (stderr %s)", got, res.Stderr)
	}
	// On the host, the socket is the one the harness made, alone in its directory.
	after, err := os.Stat(sockA)
	if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
		t.Fatalf("the host socket changed: %v", err)
	}
	if names, err := readDirNames(filepath.Dir(sockA)); err != nil || len(names) != 1 {
		t.Fatalf("the host directory holds %v (%v)", names, err)
	}
}

// TestEgressSocketDirChecked: a socket directory that would show the sandbox more than
// the socket, or that another host user could write, is refused at Create and at every start; the
// socket itself may be missing at a start (a harness between two listeners) and is
// reached once it is back.
func TestEgressSocketDirChecked(t *testing.T) {
	t.Parallel()
	requireHostTools(t, "python3")
	helper := buildEgressHelper(t)
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	tmp := socketIn(t, "", "tfsd-")
	tmp = filepath.Dir(tmp)
	refused := func(name, socket, want string) {
		t.Helper()
		err := r.Create(ctx, sandbox.CreateRequest{ID: "bad", SnapshotID: rel, Egress: &sandbox.Egress{Socket: socket, Helper: helper}})
		if err == nil || !strings.Contains(err.Error(), "egress.socket") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: Create: %v; want an egress.socket error saying %q", name, err, want)
		}
		if _, err := r.Get(ctx, "bad"); err == nil {
			t.Fatalf("%s: a refused sandbox exists", name)
		}
	}

	other := filepath.Join(filepath.Dir(socketIn(t, tmp, "n")), "proxy.sock")
	listenUnix(t, other)
	refused("another name", other, "must be named egress.sock")

	crowded := socketIn(t, tmp, "c")
	listenUnix(t, crowded)
	if err := os.WriteFile(filepath.Join(filepath.Dir(crowded), "secret.txt"), []byte("host data"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("a file beside", crowded, `holds "secret.txt"`)

	open := socketIn(t, tmp, "o")
	listenUnix(t, open)
	if err := os.Chmod(filepath.Dir(open), 0o775); err != nil {
		t.Fatal(err)
	}
	refused("a directory its group can write", open, "group and others cannot write")

	good := socketIn(t, tmp, "g")
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(filepath.Dir(good), link); err != nil {
		t.Fatal(err)
	}
	ln := listenUnix(t, good)
	refused("a directory through a link", filepath.Join(link, sandbox.EgressSocketName), "not a link")

	create(t, r, sandbox.CreateRequest{ID: "sb", SnapshotID: rel, Egress: &sandbox.Egress{Socket: good, Helper: helper}})
	if err := r.Stop(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(good), "planted")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "sb"); err == nil || !strings.Contains(err.Error(), `holds "planted"`) {
		t.Fatalf("Start with a file planted beside the socket: %v", err)
	}
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}
	// No listener at start: the sandbox starts, and reaches the socket once it is back.
	ln.Close()
	if _, err := os.Lstat(good); !os.IsNotExist(err) {
		t.Fatalf("socket still there after its listener closed: %v", err)
	}
	if err := r.Start(ctx, "sb"); err != nil {
		t.Fatalf("Start with no listener: %v", err)
	}
	listenUnix(t, good)
	res, err := r.Exec(ctx, "sb", sandbox.ExecRequest{Argv: []string{"python3", "-c", egressProbe}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "host got: ping\nunix EPERM\n" {
		t.Fatalf("probe after the listener came back: %q (stderr %s)", got, res.Stderr)
	}
}
