package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// cancelBound is how long an interactive command may take to be stopped after its
// context is cancelled (Daytona's daemon gives processes up to 5 s after SIGTERM).
const cancelBound = 15 * time.Second

// watcher is an io.Writer whose content can be waited for.
type watcher struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func newWatcher() *watcher { return &watcher{changed: make(chan struct{})} }

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor waits until the content contains s, or fails the test after d.
func (w *watcher) waitFor(t testing.TB, s string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		w.mu.Lock()
		got, changed := w.b.String(), w.changed
		w.mu.Unlock()
		if strings.Contains(got, s) {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waited %s for %q; have %q", d, s, got)
		}
	}
}

type execOutcome struct {
	res sandbox.ExecResult
	err error
}

// goExec runs an interactive command in the background.
func goExec(ctx context.Context, f Fixture, id string, req sandbox.ExecRequest) <-chan execOutcome {
	req.Interactive = true
	done := make(chan execOutcome, 1)
	go func() {
		res, err := f.Runtime.Exec(ctx, id, req)
		done <- execOutcome{res, err}
	}()
	return done
}

func wait(t *testing.T, done <-chan execOutcome, d time.Duration) execOutcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(d):
		t.Fatalf("an interactive command still runs after %s", d)
		return execOutcome{}
	}
}

// testInteractive: a command talked to while it runs (ExecRequest.Interactive). Each line
// written to its stdin is answered before the next is written; a chunk without a newline
// reaches it too; stdout and stderr stay apart; EOF on stdin, the environment, the
// working directory and the exit code come through; after the command ended, a writer
// to its stdin pipe is released; cancelling stops its processes before Exec returns.
func testInteractive(t *testing.T, f Fixture) {
	ctx := ctxFor(t)
	create(t, f, sandbox.CreateRequest{ID: "inter"})
	mustSh(t, f, "inter", "mkdir -p /workspace/sub")

	inR, inW := io.Pipe()
	out, errOut := newWatcher(), newWatcher()
	done := goExec(ctx, f, "inter", sandbox.ExecRequest{
		Shell: `echo "ready $FOO $PWD"; while IFS= read -r l; do printf 'got %s\n' "$l"; printf 'err %s\n' "$l" >&2; done; echo eof; exit 7`,
		Env:   map[string]string{"FOO": "b a r"}, Cwd: "sub",
		Stdin: inR, Stdout: out, Stderr: errOut,
	})
	out.waitFor(t, "ready b a r /workspace/sub\n", 30*time.Second)
	var wantOut, wantErr strings.Builder
	wantOut.WriteString("ready b a r /workspace/sub\n")
	for i := range 5 {
		line := fmt.Sprintf(`line %d {"json": "a\\b"} é`, i)
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		out.waitFor(t, "got "+line+"\n", 15*time.Second)
		fmt.Fprintf(&wantOut, "got %s\n", line)
		fmt.Fprintf(&wantErr, "err %s\n", line)
	}
	// Two chunks make one line: the first reaches the command without a newline.
	for _, chunk := range []string{"par", "tial\n"} {
		if _, err := io.WriteString(inW, chunk); err != nil {
			t.Fatal(err)
		}
	}
	out.waitFor(t, "got partial\n", 15*time.Second)
	wantOut.WriteString("got partial\neof\n")
	wantErr.WriteString("err partial\n")
	inW.Close()
	o := wait(t, done, 30*time.Second)
	if o.err != nil || o.res.ExitCode != 7 {
		t.Fatalf("exit %d, %v; want 7", o.res.ExitCode, o.err)
	}
	if string(o.res.Stdout) != wantOut.String() || out.String() != wantOut.String() {
		t.Fatalf("stdout %q (streamed %q), want %q", o.res.Stdout, out.String(), wantOut.String())
	}
	if string(o.res.Stderr) != wantErr.String() || errOut.String() != wantErr.String() {
		t.Fatalf("stderr %q (streamed %q), want %q", o.res.Stderr, errOut.String(), wantErr.String())
	}

	// A chunk reaches the command without waiting for more: head ends on 3 bytes, and
	// the stdin pipe, never closed here, is closed by Exec.
	inR, inW = io.Pipe()
	done = goExec(ctx, f, "inter", sandbox.ExecRequest{Shell: "head -c 3; echo", Stdin: inR})
	if _, err := io.WriteString(inW, "abc"); err != nil {
		t.Fatal(err)
	}
	o = wait(t, done, 30*time.Second)
	if o.err != nil || o.res.ExitCode != 0 || string(o.res.Stdout) != "abc\n" {
		t.Fatalf("head -c 3: %+v %v", o.res, o.err)
	}
	wrote := make(chan error, 1)
	go func() { _, err := io.WriteString(inW, "late\n"); wrote <- err }()
	select {
	case err := <-wrote:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("writing stdin after the command ended: %v, want io.ErrClosedPipe", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a writer to stdin stays blocked after the command ended")
	}

	testInteractiveCancel(t, f)
}

// testInteractiveCancel: cancelling an interactive command (blocked in wait, with a
// background child and its stdin open) stops it and the child within cancelBound, and
// from the sandbox's side they are gone once Exec has returned.
func testInteractiveCancel(t *testing.T, f Fixture) {
	const marker = "tf-cancel-marker-5f3a"
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	inR, inW := io.Pipe()
	defer inW.Close()
	out := newWatcher()
	done := goExec(ctx, f, "inter", sandbox.ExecRequest{
		Shell: `sleep 300 & echo "child $!"; wait; : ` + marker, Stdin: inR, Stdout: out,
	})
	got := out.waitFor(t, "\n", 30*time.Second)
	var child int
	if _, err := fmt.Sscanf(got, "child %d\n", &child); err != nil {
		t.Fatalf("no child pid in %q: %v", got, err)
	}
	// The processes as the sandbox sees them: the child (unless a zombie) and anything
	// whose command line holds the marker (the shell, and a backend's wrappers).
	alive := fmt.Sprintf(`s=$(cat /proc/%d/stat 2>/dev/null) && case ${s##*) } in Z*) ;; *) echo child;; esac; grep -las '%s' /proc/[0-9]*/cmdline; true`,
		child, marker[:len(marker)-1]+"["+marker[len(marker)-1:]+"]")
	if got := mustSh(t, f, "inter", alive); !strings.Contains(got, "child") || !strings.Contains(got, "cmdline") {
		t.Fatalf("before cancel, the check sees %q; want the child and the shell", got)
	}
	start := time.Now()
	cancel()
	o := wait(t, done, cancelBound+5*time.Second)
	if took := time.Since(start); took > cancelBound {
		t.Fatalf("cancel took %s, over %s", took, cancelBound)
	}
	if !errors.Is(o.err, context.Canceled) || o.res.ExitCode != -1 {
		t.Fatalf("after cancel: exit %d, %v; want -1 and context.Canceled", o.res.ExitCode, o.err)
	}
	if got := mustSh(t, f, "inter", alive); got != "" {
		t.Fatalf("after cancel, still running in the sandbox: %q", got)
	}
}

// BenchInteractive measures round trips through an interactive command in sandbox id:
// each iteration writes a line to its stdin and waits for the answer on its stdout. It
// reports the median round trip as median-ns/op.
func BenchInteractive(b *testing.B, rt sandbox.Runtime, id string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	out := newWatcher()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(ctx, id, sandbox.ExecRequest{Shell: `while IFS= read -r l; do echo "got $l"; done`,
			Stdin: inR, Stdout: out, Interactive: true})
		done <- err
	}()
	if _, err := io.WriteString(inW, "warm\n"); err != nil {
		b.Fatal(err)
	}
	out.waitFor(b, "got warm\n", time.Minute)
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		line := fmt.Sprintf("%d", i)
		start := time.Now()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
		out.waitFor(b, "got "+line+"\n", time.Minute)
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	inW.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "median-ns/op")
}
