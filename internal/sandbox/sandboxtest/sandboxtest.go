// Package sandboxtest is the conformance suite every sandbox.Runtime passes: create,
// exec (exit codes, streams, timeouts, output caps), interactive commands (stdin and
// output while they run, cancel), files (paths, symlinks, sizes),
// stop, start and archive with files kept, lost sandboxes, and network policy and
// secrets. Each backend runs it from its own tests (RunRuntimeTests); differences that
// are real are declared by the backend (sandbox.Capabilities and Fixture), never worked
// around here.
//
// Beside the suite it holds the fixtures that the tests of sandboxes share, so that each
// is written once: processes looked for on the host (procs.go), a symlink swapped in
// during a file call (swap.go), and a buffer safe for a command's streams (buffer.go).
// Network fixtures are internal/nettest's.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Fixture is one runtime under test.
type Fixture struct {
	Runtime sandbox.Runtime
	// Snapshot is a Ready snapshot sandboxes are created from.
	Snapshot string
	// Capabilities are the backend's (sandbox.Backend.Info).
	Capabilities sandbox.Capabilities
	// CombinedOutput: the runtime returns stderr inside Stdout (Daytona's toolbox does)
	// for commands that are not Interactive; interactive ones keep the streams apart on
	// every backend.
	CombinedOutput bool
	// Lose, when set, makes a Running sandbox lose its processes from outside the runtime
	// (a crash, an out-of-band kill): the suite then checks that the next Exec reports
	// sandbox.ErrLost or recovers, and that the one after runs with the files intact.
	Lose func(t *testing.T, id string)
	// Secret, for backends that keep secrets (NetworkByBackend), creates secret named by
	// the returned name, for a sandbox's CreateRequest.Secrets.
	Secret func(t *testing.T, environment, envName, value string) (name string)
}

// Factory makes a fresh runtime for one test; it registers its own cleanup.
type Factory func(t *testing.T) Fixture

// RunRuntimeTests runs the suite, each part as a parallel subtest on its own runtime.
func RunRuntimeTests(t *testing.T, newFixture Factory) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Fixture)
	}{
		{"Lifecycle", testLifecycle},
		{"Exec", testExec},
		{"Interactive", testInteractive},
		{"Timeouts", testTimeouts},
		{"Files", testFiles},
		{"Listing", testListing}, // listing.go
		{"Lost", testLost},
		{"Network", testNetwork},
		{"Secrets", testSecrets},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newFixture(t))
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// create makes a sandbox that is deleted when the test ends.
func create(t *testing.T, f Fixture, req sandbox.CreateRequest) {
	t.Helper()
	if req.SnapshotID == "" {
		req.SnapshotID = f.Snapshot
	}
	if err := f.Runtime.Create(ctxFor(t), req); err != nil {
		t.Fatalf("create %s: %v", req.ID, err)
	}
	t.Cleanup(func() { _ = f.Runtime.Delete(context.Background(), req.ID) })
}

func sh(t *testing.T, f Fixture, id, script string) sandbox.ExecResult {
	t.Helper()
	res, err := f.Runtime.Exec(ctxFor(t), id, sandbox.ExecRequest{Shell: script, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

func mustSh(t *testing.T, f Fixture, id, script string) string {
	t.Helper()
	res := sh(t, f, id, script)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func wantStatus(t *testing.T, f Fixture, id, want string) {
	t.Helper()
	info, err := f.Runtime.Get(ctxFor(t), id)
	if err != nil || info.Status != want {
		t.Fatalf("get %s: %+v %v; want status %s", id, info, err, want)
	}
}

// testLifecycle: create, get, list, a second create of the id, stop (exec refused, files
// kept), start, archive and start again (files kept), delete (twice), and a missing id.
func testLifecycle(t *testing.T, f Fixture) {
	ctx := ctxFor(t)
	rt := f.Runtime
	create(t, f, sandbox.CreateRequest{ID: "life", Labels: map[string]string{"trueforge.session": "s1"}})
	info, err := rt.Get(ctx, "life")
	if err != nil || info.ID != "life" || info.SnapshotID != f.Snapshot || info.Status != sandbox.SandboxRunning || info.Labels["trueforge.session"] != "s1" {
		t.Fatalf("get: %+v %v", info, err)
	}
	list, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		found = found || s.ID == "life"
	}
	if !found {
		t.Fatalf("list: %+v lacks life", list)
	}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "life", SnapshotID: f.Snapshot}); !errors.Is(err, sandbox.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	mustSh(t, f, "life", "echo kept > /workspace/kept")
	if err := rt.Stop(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, "life", sandbox.SandboxStopped)
	if _, err := rt.Exec(ctx, "life", sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec in a stopped sandbox: %v, want ErrStopped", err)
	}
	if err := rt.Start(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, "life", sandbox.SandboxRunning)
	if got := mustSh(t, f, "life", "cat /workspace/kept"); got != "kept" {
		t.Fatalf("after start: %q", got)
	}
	if err := rt.Archive(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, "life", sandbox.SandboxArchived)
	if err := rt.Start(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, f, "life", "cat /workspace/kept"); got != "kept" {
		t.Fatalf("after archive and start: %q", got)
	}
	if err := rt.Delete(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Get(ctx, "life"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := rt.Delete(ctx, "life"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := rt.Exec(ctx, "missing", sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("exec in a missing sandbox: %v, want ErrNotFound", err)
	}
}

// testExec: exit codes, streams, stdin and streaming, the environment (create, then
// exec), the working directory, argv passed as it is, and a missing command.
func testExec(t *testing.T, f Fixture) {
	ctx := ctxFor(t)
	create(t, f, sandbox.CreateRequest{ID: "exec", Env: map[string]string{"A": "from-create", "B": "b b"}})
	res, err := f.Runtime.Exec(ctx, "exec", sandbox.ExecRequest{
		Shell: `echo "$A $B $C"; pwd; echo err >&2; exit 3`, Env: map[string]string{"A": "from-exec", "C": "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut := "from-exec b b c\n/workspace\n", "err\n"
	if f.CombinedOutput {
		out, errOut = out+errOut, ""
	}
	if res.ExitCode != 3 || string(res.Stdout) != out || string(res.Stderr) != errOut {
		t.Fatalf("exit %d stdout %q stderr %q; want 3 %q %q", res.ExitCode, res.Stdout, res.Stderr, out, errOut)
	}
	res, err = f.Runtime.Exec(ctx, "exec", sandbox.ExecRequest{Argv: []string{"printf", "%s|", "a b", "it's", "$HOME", ""}})
	if err != nil || string(res.Stdout) != "a b|it's|$HOME||" {
		t.Fatalf("argv: %q %v", res.Stdout, err)
	}
	var streamed bytes.Buffer
	res, err = f.Runtime.Exec(ctx, "exec", sandbox.ExecRequest{Shell: "tr a-z A-Z", Stdin: strings.NewReader("in\n"), Stdout: &streamed})
	if err != nil || string(res.Stdout) != "IN\n" || streamed.String() != "IN\n" {
		t.Fatalf("stdin: %q (streamed %q) %v", res.Stdout, streamed.String(), err)
	}
	mustSh(t, f, "exec", "mkdir -p /workspace/sub")
	res, err = f.Runtime.Exec(ctx, "exec", sandbox.ExecRequest{Argv: []string{"pwd"}, Cwd: "sub"})
	if err != nil || string(res.Stdout) != "/workspace/sub\n" {
		t.Fatalf("cwd sub: %q %v", res.Stdout, err)
	}
	res, err = f.Runtime.Exec(ctx, "exec", sandbox.ExecRequest{Argv: []string{"no-such-command-here"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing command: %+v %v; want exit 127", res, err)
	}
	if got := mustSh(t, f, "exec", "id -u"); got == "0" {
		t.Fatal("commands run as root inside the sandbox")
	}
}

// testTimeouts: a timeout ends the command (124, TimedOut, the timeout limit) and its
// background children; the output cap keeps head and tail and says it truncated.
func testTimeouts(t *testing.T, f Fixture) {
	ctx := ctxFor(t)
	create(t, f, sandbox.CreateRequest{ID: "slow"})
	start := time.Now()
	res, err := f.Runtime.Exec(ctx, "slow", sandbox.ExecRequest{Shell: "sleep 30", Timeout: time.Second})
	if err != nil || !res.TimedOut || res.ExitCode != 124 || res.Limit != sandbox.LimitTimeout {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("a 1 s timeout took %s", took)
	}
	res, err = f.Runtime.Exec(ctx, "slow", sandbox.ExecRequest{Shell: "printf HEAD; head -c 5000 /dev/zero | tr '\\0' x; printf END", OutputCap: 100})
	want := "HEAD" + strings.Repeat("x", 46) + "\n[... 4907 bytes truncated ...]\n" + strings.Repeat("x", 47) + "END"
	if err != nil || string(res.Stdout) != want || !res.Truncated {
		t.Fatalf("output cap: %q, truncated %v, %v; want the first and last 50 bytes around a marker", res.Stdout, res.Truncated, err)
	}
	if got := mustSh(t, f, "slow", "echo still"); got != "still" {
		t.Fatalf("after a timeout: %q", got)
	}
}

// testFiles: round trips, modes, listing, sizes, and no way out of the workspace (absolute
// paths, dot-dot, symlinks); what the runtime writes the sandbox user may change.
func testFiles(t *testing.T, f Fixture) {
	ctx := ctxFor(t)
	rt := f.Runtime
	create(t, f, sandbox.CreateRequest{ID: "files"})
	if err := rt.WriteFile(ctx, "files", "/workspace/src/run.sh", strings.NewReader("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Exec(ctx, "files", sandbox.ExecRequest{Argv: []string{"./run.sh"}, Cwd: "src"})
	if err != nil || string(res.Stdout) != "ran\n" {
		t.Fatalf("written script: %+v %v", res, err)
	}
	if err := rt.WriteFile(ctx, "files", "notes.txt", strings.NewReader("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, f, "files", "echo ' world' >> notes.txt && mkdir src/more && cat notes.txt"); got != "hello world" {
		t.Fatalf("the sandbox user changing what the runtime wrote: %q", got)
	}
	if b, err := rt.ReadFile(ctx, "files", "notes.txt", 0); err != nil || string(b) != "hello world\n" {
		t.Fatalf("read: %q %v", b, err)
	}
	if _, err := rt.ReadFile(ctx, "files", "notes.txt", 3); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Fatalf("read past max: %v, want ErrTooLarge", err)
	}
	fi, err := rt.StatFile(ctx, "files", "/workspace/src/run.sh")
	if err != nil || fi.Path != "src/run.sh" || fi.Size != 19 || fi.Mode.Perm() != 0o755 {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	list, err := rt.ListFiles(ctx, "files", ".", 0)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range list.Entries {
		paths = append(paths, e.Path)
	}
	if strings.Join(paths, ",") != "notes.txt,src" || !list.Entries[1].Mode.IsDir() || list.Omitted != 0 {
		t.Fatalf("list: %+v", list)
	}
	if _, err := rt.ReadFile(ctx, "files", "/etc/passwd", 0); !errors.Is(err, sandbox.ErrOutsideWorkspace) {
		t.Fatalf("absolute path outside the workspace: %v", err)
	}
	if _, err := rt.ReadFile(ctx, "files", "../../etc/passwd", 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("dot-dot stays inside the workspace: %v", err)
	}
	mustSh(t, f, "files", "ln -s /etc/passwd abs; ln -s ../../../../etc/passwd rel")
	for _, p := range []string{"abs", "rel"} {
		if b, err := rt.ReadFile(ctx, "files", p, 0); err == nil {
			t.Fatalf("read through symlink %s: %q", p, b)
		}
	}
	if err := rt.WriteFile(ctx, "files", "abs", strings.NewReader("x"), 0o644); err == nil {
		t.Fatal("wrote through a symlink")
	}
	// Rewriting a file keeps its mode with the default (0 or 0644) and takes any other.
	for _, st := range []struct{ mode, want fs.FileMode }{{0o644, 0o755}, {0, 0o755}, {0o600, 0o600}, {0o644, 0o600}, {0o755, 0o755}} {
		if err := rt.WriteFile(ctx, "files", "src/run.sh", strings.NewReader("#!/bin/sh\necho ran\n"), st.mode); err != nil {
			t.Fatal(err)
		}
		if fi, err := rt.StatFile(ctx, "files", "src/run.sh"); err != nil || fi.Mode.Perm() != st.want {
			t.Fatalf("rewritten with mode %04o: %+v %v; want %04o", st.mode, fi, err, st.want)
		}
	}
	if err := rt.DeleteFile(ctx, "files", "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StatFile(ctx, "files", "src/run.sh"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("after delete: %v, want ErrNotFound", err)
	}
	if err := rt.DeleteFile(ctx, "files", "/workspace"); err == nil {
		t.Fatal("deleting the workspace was allowed")
	}
}

// testLost: a sandbox that lost its processes outside the runtime reports ErrLost (or
// recovers at once), and the next command runs with the files intact.
func testLost(t *testing.T, f Fixture) {
	if f.Lose == nil {
		t.Skip("the backend has no way to lose a sandbox from outside in a test")
	}
	create(t, f, sandbox.CreateRequest{ID: "lost"})
	mustSh(t, f, "lost", "echo kept > /workspace/kept")
	f.Lose(t, "lost")
	if _, err := f.Runtime.Exec(ctxFor(t), "lost", sandbox.ExecRequest{Argv: []string{"true"}}); err != nil && !errors.Is(err, sandbox.ErrLost) {
		t.Fatalf("exec in a lost sandbox: %v, want success or ErrLost", err)
	}
	if got := mustSh(t, f, "lost", "cat /workspace/kept"); got != "kept" {
		t.Fatalf("after the loss: %q", got)
	}
}

// testNetwork: BlockNetwork leaves no interface but lo.
func testNetwork(t *testing.T, f Fixture) {
	create(t, f, sandbox.CreateRequest{ID: "blocked", BlockNetwork: true})
	if got := mustSh(t, f, "blocked", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); got != "lo" {
		t.Fatalf("a blocked sandbox has interfaces %q, want only lo", got)
	}
}

// testSecrets: on a backend that keeps secrets, a sandbox sees a secret's variable, never
// its value.
func testSecrets(t *testing.T, f Fixture) {
	if !f.Capabilities.NetworkByBackend || f.Secret == nil {
		t.Skip("the harness's egress proxy puts this backend's secrets into requests (internal/harness/sandboxnet tests)")
	}
	name := f.Secret(t, "env", "TOKEN", "the-real-value")
	create(t, f, sandbox.CreateRequest{ID: "secret", Secrets: map[string]string{"TOKEN": name}})
	got := mustSh(t, f, "secret", `printf %s "$TOKEN"`)
	if got == "" || strings.Contains(got, "the-real-value") {
		t.Fatalf("TOKEN in the sandbox is %q: want a placeholder, never the value", got)
	}
}
