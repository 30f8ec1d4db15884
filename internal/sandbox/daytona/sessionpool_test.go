package daytona_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

const routeExec = "POST /process/session/{sessionId}/exec"

// TestExecSessionPool: plain commands run on sessions the runtime keeps, not one
// session each (BenchmarkExecRoundTrip measures the requests a command costs), and
// nothing of one command carries to the next on a shared session.
func TestExecSessionPool(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	const n = 10
	for i := range n {
		res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: fmt.Sprintf("cd /tmp; export X=%d; echo $X; pwd >&2", i)})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != fmt.Sprint(i, "\n") || string(res.Stderr) != "/tmp\n" {
			t.Fatalf("command %d: %+v %v", i, res, err)
		}
		// Nothing carries from one command to the next on a shared session.
		res, err = rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: `echo "$X"; pwd`})
		if err != nil || string(res.Stdout) != "\n/workspace\n" {
			t.Fatalf("after command %d: %+v %v", i, res, err)
		}
	}
	if c, e := srv.Count(routeCreateSession), srv.Count(routeExec); c > 5 || e != 2*n {
		t.Fatalf("%d sessions created for %d commands (%d execs); want at most 5", c, 2*n, e)
	}
}

// TestExecSessionPoolConcurrent: commands run at the same time get sessions of their
// own (a session runs its commands one after another), so they do not wait on each
// other and their outputs stay apart; cancelling one kills it alone.
func TestExecSessionPoolConcurrent(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	tok := sleepToken(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	cancelled := make(chan error, 1)
	go func() {
		_, err := rt.Exec(ctx, "inter", sandbox.ExecRequest{Shell: "sleep " + tok})
		cancelled <- err
	}()
	if ps, ok := waitProcs(t, tok, true, 10*time.Second); !ok {
		t.Fatalf("the long command did not start: %q", ps)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: fmt.Sprintf("sleep 0.5; echo %d", i)})
			if err != nil || string(res.Stdout) != fmt.Sprint(i, "\n") {
				errs <- fmt.Errorf("command %d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if took := time.Since(start); took > 1800*time.Millisecond {
		t.Errorf("four 0.5 s commands at once took %s: they waited on each other", took)
	}
	cancel()
	if err := <-cancelled; err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("cancelled command: %v", err)
	}
	if ps, ok := waitProcs(t, tok, false, 2*time.Second); !ok {
		t.Fatalf("the cancelled command still runs: %q", ps)
	}
	noRunningCommands(t, srv, rt)
}

// TestExecSessionPoolRestart: sessions the pool holds go when the sandbox's daemon
// restarts; the next command starts again on a new session instead of failing.
func TestExecSessionPoolRestart(t *testing.T) {
	t.Parallel()
	srv, c, rt := interactiveSandbox(t)
	if res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	sb, err := c.GetSandbox(testCtx(t), "inter")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the session back in the pool, the spare made
	ids := srv.Sessions("inter")
	if len(ids) == 0 {
		t.Fatal("no session kept after a command")
	}
	for _, id := range ids {
		if err := c.DeleteSession(testCtx(t), sb, id); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: "echo again"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "again\n" {
		t.Fatalf("after the sessions went: %+v %v", res, err)
	}
}

// TestExecScriptKilled: a command that kills the script around it (so no end marker
// reaches the logs) still ends, with the daemon's exit code and its output.
func TestExecScriptKilled(t *testing.T) {
	t.Parallel()
	_, _, rt := interactiveSandbox(t)
	res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: "echo a; kill -KILL $PPID; sleep 0.2"})
	if err != nil || res.ExitCode != 137 || string(res.Stdout) != "a\n" {
		t.Fatalf("%+v %v; want exit code 137 and the output", res, err)
	}
}

// TestExecBackgroundHoldsOutput: a command that leaves a background process writing to
// its output (a server started with & and no redirection) returns when the command
// ends, not when the process does, which the daemon's exit code waits for; its session
// is not lent again, so the next command does not queue behind that process.
func TestExecBackgroundHoldsOutput(t *testing.T) {
	t.Parallel()
	_, _, rt := interactiveSandbox(t)
	tok := sleepToken(t)
	t.Cleanup(func() {
		_, _ = rt.Exec(context.Background(), "inter", sandbox.ExecRequest{Argv: []string{"pkill", "-f", tok}})
	})
	start := time.Now()
	res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: "sleep " + tok + " & echo started"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "started\n" {
		t.Fatalf("%+v %v", res, err)
	}
	// The emulator gives the exit code a second after the command's end at the latest
	// (the daemon, when the sleep ends): returning before that is returning on the
	// command's end markers.
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Fatalf("Exec took %s: it waited for the background process", took)
	}
	start = time.Now()
	res, err = rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: "echo next"})
	if err != nil || string(res.Stdout) != "next\n" {
		t.Fatalf("next command: %+v %v", res, err)
	}
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Fatalf("the next command took %s: it queued behind the background process", took)
	}
	if ps := hostProcs(t, tok); len(ps) != 1 {
		t.Fatalf("the background sleep: %q; want it running", ps)
	}
}
