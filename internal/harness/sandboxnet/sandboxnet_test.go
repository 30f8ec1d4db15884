package sandboxnet_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func fixture(t testing.TB) (*store.Store, store.Environment, *secretbox.Box) {
	t.Helper()
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	t.Setenv(secretbox.KeyEnv, "")
	box, err := secretbox.Load("", filepath.Join(st.Dir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner}); err != nil {
		t.Fatal(err)
	}
	env := store.Environment{ID: "e", Name: "web", Provider: "local", Owner: harnesstest.Owner, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3,
		BuildHash: "h", SnapshotID: "snap", AllowDomains: []string{"api.example.com"}}
	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap", Provider: "local", BuildHash: "h", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	sealed, _ := box.Seal([]byte("real-value-123"), "secret/web/TOKEN")
	if err := st.CreateSecret(ctx, store.Secret{ID: "web/TOKEN", Environment: "web", EnvName: "TOKEN", Hosts: []string{"api.example.com"}, ValueEnc: sealed}); err != nil {
		t.Fatal(err)
	}
	// The session's agent is the environment owner's: its secrets are its own.
	if err := st.CreateAgent(ctx, store.Agent{ID: "a", Name: "a", Owner: harnesstest.Owner, Environment: "web", Spec: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, store.Session{ID: "s-1", Agent: "a", Owner: harnesstest.Owner}); err != nil {
		t.Fatal(err)
	}
	return st, env, box
}

// fakeHelper is a file Attach accepts as the helper path (the runtime, not Attach, runs it).
func fakeHelper(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "netd")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Without a helper nothing is attached (no socket, no state) and the error says how to
// provide one; a local sandbox is never handed the host's network instead.
func TestAttachWithoutHelperIsAClearError(t *testing.T) {
	st, env, _ := fixture(t)
	dir := filepath.Join(t.TempDir(), "egress")
	x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, HelperErr: errors.New("no static netd helper found (build trueforge-harness with CGO_ENABLED=0)")})
	_, _, err := x.Attach(context.Background(), "s-1", "tf-s-1-1", env)
	if err == nil || !strings.Contains(err.Error(), `environment "web"`) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("err = %v", err)
	}
	if _, err := st.GetSandboxEgress(context.Background(), "tf-s-1-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("state recorded after a failed attach: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket dir made after a failed attach: %v", err)
	}
}

// Attach serves a socket in a 0700 directory and records the policy and the proxy's
// state sealed (no CA key or placeholder in the clear); a new process (fresh Proxies)
// recreates the same proxy from it: same placeholders, same CA. Detach closes it and,
// with forget, drops the state.
func TestAttachRecordsSealedStateAndEnsureRestoresIt(t *testing.T) {
	st, env, box := fixture(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "egress")
	helper := fakeHelper(t)
	x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, Helper: helper})
	defer x.Close()
	vars, eg, err := x.Attach(ctx, "s-1", "tf-s-1-1", env)
	if err != nil {
		t.Fatal(err)
	}
	ph := vars["TOKEN"]
	if !strings.HasPrefix(ph, "tfph_") || vars["HTTPS_PROXY"] == "" {
		t.Fatalf("env %v; want a placeholder for TOKEN and the proxy variables", vars)
	}
	if eg.Socket != x.SocketPath("tf-s-1-1") || eg.Helper != helper || len(eg.Files["ca-bundle.pem"]) == 0 {
		t.Fatalf("egress hook %+v", eg)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir: %v %v; want 0700", fi.Mode(), err)
	}
	if c, err := net.Dial("unix", eg.Socket); err != nil {
		t.Fatalf("the socket does not answer: %v", err)
	} else {
		c.Close()
	}
	rec, err := st.GetSandboxEgress(ctx, "tf-s-1-1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.BlockAll || len(rec.AllowDomains) != 1 || rec.Environment != "web" {
		t.Fatalf("recorded policy %+v", rec)
	}
	if bytes.Contains(rec.StateEnc, []byte("PRIVATE KEY")) || bytes.Contains(rec.StateEnc, []byte(ph)) {
		t.Fatal("the egress state is stored in the clear")
	}
	if _, err := box.Open(rec.StateEnc, "sandbox_egress/tf-s-1-2"); err == nil {
		t.Fatal("the state opens under another sandbox's name")
	}

	// The environment's policy changes later; the sandbox keeps the one it was made with.
	env.AllowDomains = []string{"other.example.com"}
	if err := st.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	x.Close()
	y := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, Helper: helper})
	defer y.Close()
	fresh, err := y.Ensure(ctx, "s-1", "tf-s-1-1")
	if err != nil || !fresh {
		t.Fatalf("Ensure in a new process: %v %v; want recreated", fresh, err)
	}
	if again, err := y.Ensure(ctx, "s-1", "tf-s-1-1"); err != nil || again {
		t.Fatalf("second Ensure: %v %v; want nothing to do", again, err)
	}
	rec2, _ := st.GetSandboxEgress(ctx, "tf-s-1-1")
	if rec2.AllowDomains[0] != "api.example.com" {
		t.Fatalf("policy %v; want the one read at creation", rec2.AllowDomains)
	}
	if c, err := net.Dial("unix", eg.Socket); err != nil {
		t.Fatalf("the recreated socket does not answer: %v", err)
	} else {
		c.Close()
	}

	// A sandbox with no recorded egress (block_all) needs nothing.
	if fresh, err := y.Ensure(ctx, "s-1", "tf-s-other-1"); err != nil || fresh {
		t.Fatalf("Ensure without state: %v %v", fresh, err)
	}

	y.Detach(ctx, "tf-s-1-1", true)
	if len(y.Live()) != 0 {
		t.Fatal("proxy still live after Detach")
	}
	if _, err := os.Stat(eg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Detach: %v", err)
	}
	if _, err := st.GetSandboxEgress(ctx, "tf-s-1-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("state kept after Detach(forget): %v", err)
	}
}

// Another harness process that takes a sandbox's socket over (recreating the proxy at
// the same path) is noticed: this process serves anew rather than trust a socket file
// that is no longer its own, and never removes the other's file when closing.
func TestEnsureNoticesASocketTakenOver(t *testing.T) {
	st, env, _ := fixture(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "egress")
	helper := fakeHelper(t)
	a := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, Helper: helper})
	defer a.Close()
	if _, _, err := a.Attach(ctx, "s-1", "tf-s-1-1", env); err != nil {
		t.Fatal(err)
	}
	b := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, Helper: helper})
	defer b.Close()
	if fresh, err := b.Ensure(ctx, "s-1", "tf-s-1-1"); err != nil || !fresh {
		t.Fatalf("b.Ensure: %v %v", fresh, err)
	}
	if fresh, err := a.Ensure(ctx, "s-1", "tf-s-1-1"); err != nil || !fresh {
		t.Fatalf("a.Ensure after b took the socket: %v %v; want recreated", fresh, err)
	}
	b.Close() // b's socket file was replaced by a's: closing b must not remove it
	if c, err := net.Dial("unix", a.SocketPath("tf-s-1-1")); err != nil {
		t.Fatalf("a's socket is gone after b closed: %v", err)
	} else {
		c.Close()
	}
}

// The netd helper must be static; LocateHelper says how to get one.
func TestLocateHelper(t *testing.T) {
	bin, err := harnesstest.BuildStaticHarness(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sandboxnet.Static(bin); err != nil || !ok {
		t.Fatalf("Static(static harness) = %v, %v", ok, err)
	}
	dyn := "/bin/sh"
	if ok, err := sandboxnet.Static(dyn); err != nil || ok {
		t.Skipf("%s is not a dynamic ELF here (%v %v)", dyn, ok, err)
	}
	t.Setenv(sandboxnet.HelperEnv, "")
	if got, err := sandboxnet.LocateHelper(bin); err != nil || got != bin {
		t.Fatalf("static self: %q %v", got, err)
	}
	dir := t.TempDir()
	self := filepath.Join(dir, "trueforge-harness")
	if err := os.Symlink(dyn, self); err != nil {
		t.Fatal(err)
	}
	if _, err := sandboxnet.LocateHelper(self); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("dynamic self, nothing beside: %v", err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "trueforge-netd")); err != nil {
		t.Fatal(err)
	}
	if got, err := sandboxnet.LocateHelper(self); err != nil || got != filepath.Join(dir, "trueforge-netd") {
		t.Fatalf("static trueforge-netd beside: %q %v", got, err)
	}
	t.Setenv(sandboxnet.HelperEnv, dyn)
	if _, err := sandboxnet.LocateHelper(bin); err == nil || !strings.Contains(err.Error(), sandboxnet.HelperEnv) {
		t.Fatalf("dynamic %s: %v", sandboxnet.HelperEnv, err)
	}
}

// A database directory too deep for a unix socket path puts the sockets in a short
// per-database directory under the temp dir; a link planted there is refused.
func TestDeepDirectoryFallsBackToAShortSocketDir(t *testing.T) {
	st, env, _ := fixture(t)
	ctx := context.Background()
	short, err := os.MkdirTemp("/tmp", "tfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Setenv("TMPDIR", short)
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60), "egress")
	x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: deep, Helper: fakeHelper(t)})
	defer x.Close()
	sock := x.SocketPath("tf-s-1-1")
	if len(sock) > 107 || !strings.HasPrefix(sock, os.Getenv("TMPDIR")) {
		t.Fatalf("socket path %s (%d bytes); want a short one under TMPDIR", sock, len(sock))
	}
	if _, eg, err := x.Attach(ctx, "s-1", "tf-s-1-1", env); err != nil || eg.Socket != sock {
		t.Fatalf("attach: %v", err)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("fallback dir %v %v; want 0700", fi, err)
	}
	x.Close()

	// Someone plants a link where the fallback goes: refused, nothing served there.
	fallback := filepath.Dir(filepath.Dir(sock))
	if err := os.RemoveAll(fallback); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), fallback); err != nil {
		t.Fatal(err)
	}
	y := sandboxnet.New(sandboxnet.Config{Store: st, Dir: deep, Helper: fakeHelper(t)})
	defer y.Close()
	if _, _, err := y.Attach(ctx, "s-1", "tf-s-1-2", env); err == nil || !strings.Contains(err.Error(), "not a directory owned by this user") {
		t.Fatalf("attach through a planted link: %v", err)
	}
}

// Each sandbox's socket is egress.sock alone in a 0700 directory of its own (what the
// local runtime binds into that sandbox). A new process recreating the proxy listens at
// the same path in the same directory, which keeps its inode: a running sandbox that has
// it bound reaches the new listener. Closing keeps the directory; deleting the sandbox
// (Detach with forget) removes it. A link planted as a sandbox's directory is refused.
func TestEachSandboxHasItsOwnSocketDirectory(t *testing.T) {
	st, env, _ := fixture(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "egress")
	helper := fakeHelper(t)
	x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, Helper: helper})
	defer x.Close()
	_, eg1, err := x.Attach(ctx, "s-1", "tf-s-1-1", env)
	if err != nil {
		t.Fatal(err)
	}
	_, eg2, err := x.Attach(ctx, "s-1", "tf-s-1-2", env)
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := filepath.Dir(eg1.Socket), filepath.Dir(eg2.Socket)
	if filepath.Base(eg1.Socket) != sandbox.EgressSocketName || d1 == d2 || filepath.Dir(d1) != dir || filepath.Dir(d2) != dir {
		t.Fatalf("sockets %s and %s; want %s in a directory of each sandbox's own under %s", eg1.Socket, eg2.Socket, sandbox.EgressSocketName, dir)
	}
	for _, d := range []string{d1, d2} {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
			t.Fatalf("sandbox socket dir %s: %v %v; want a 0700 directory of this user", d, fi, err)
		}
		names, err := os.ReadDir(d)
		if err != nil || len(names) != 1 || names[0].Name() != sandbox.EgressSocketName {
			t.Fatalf("%s holds %v (%v); want the socket alone", d, names, err)
		}
	}
	if fi, err := os.Stat(eg1.Socket); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v; want a 0600 unix socket", fi, err)
	}
	dirBefore, _ := os.Stat(d1)

	// The harness process ends and a new one serves the same sandbox.
	x.Close()
	if _, err := os.Stat(d1); err != nil {
		t.Fatalf("Close removed the sandbox's socket directory (a running sandbox has it bound): %v", err)
	}
	y := sandboxnet.New(sandboxnet.Config{Store: st, Dir: dir, Helper: helper})
	defer y.Close()
	if fresh, err := y.Ensure(ctx, "s-1", "tf-s-1-1"); err != nil || !fresh {
		t.Fatalf("Ensure in a new process: %v %v", fresh, err)
	}
	dirAfter, err := os.Stat(d1)
	if err != nil || !os.SameFile(dirBefore, dirAfter) {
		t.Fatalf("the sandbox's socket directory was replaced (%v): a running sandbox would not see the new socket", err)
	}
	if y.SocketPath("tf-s-1-1") != eg1.Socket {
		t.Fatalf("new process listens at %s, the sandbox has %s", y.SocketPath("tf-s-1-1"), eg1.Socket)
	}
	c, err := net.Dial("unix", eg1.Socket)
	if err != nil {
		t.Fatalf("the new listener does not answer: %v", err)
	}
	c.Close()

	// Deleted: the directory goes with it.
	y.Detach(ctx, "tf-s-1-1", true)
	if _, err := os.Lstat(d1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket directory left after the sandbox was deleted: %v", err)
	}

	// A link planted as a sandbox's directory (to a directory with other files) is
	// refused: the runtime would bind what it points to.
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "private"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, d1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := y.Attach(ctx, "s-1", "tf-s-1-1", env); err == nil || !strings.Contains(err.Error(), "not a directory owned by this user") {
		t.Fatalf("attach through a planted sandbox directory link: %v", err)
	}
}

// The proxy's secrets serve a sandbox only while the owner of its session's agent may
// use them: an environment unshared, or an agent of another owner, gets an error (the
// proxy then denies the request) instead of the values, at the very next read.
func TestSecretSourceRefusesAnotherOwnersAgent(t *testing.T) {
	st, env, _ := fixture(t)
	ctx := context.Background()
	x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: t.TempDir(), Helper: fakeHelper(t)})
	if list, err := x.SecretSource("s-1", env.Name)(ctx); err != nil || len(list) != 1 || list[0].Value != "real-value-123" {
		t.Fatalf("the owner's own agent: %v, %v; want its one secret", list, err)
	}
	if err := st.CreateAgent(ctx, store.Agent{ID: "b", Name: "thief", Owner: "team_a", Environment: "web", Spec: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, store.Session{ID: "s-2", Agent: "thief", Owner: "someone"}); err != nil {
		t.Fatal(err)
	}
	src := x.SecretSource("s-2", env.Name)
	if list, err := src(ctx); err == nil || len(list) != 0 || !strings.Contains(err.Error(), `not shared with "team_a"`) {
		t.Fatalf("another owner's agent: %v, %v; want no secrets and an error naming the owner", list, err)
	}
	env, _ = st.GetEnvironment(ctx, env.Name)
	env.SharedWith = []string{"team_a"}
	if err := st.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	if list, err := src(ctx); err != nil || len(list) != 1 {
		t.Fatalf("shared with team_a: %v, %v; want the secret", list, err)
	}
	env.SharedWith = nil
	if err := st.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	if list, err := src(ctx); err == nil || len(list) != 0 {
		t.Fatalf("unshared again: %v, %v; want no secrets", list, err)
	}
}
