package daytona_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// sleepToken is an argument for sleep that no other process on the host has: a test
// finds the processes it started in the emulator's sandboxes by it.
func sleepToken(t testing.TB) string {
	n, err := rand.Int(rand.Reader, big.NewInt(1e9))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("3000.%09d", n.Int64())
}

// hostProcs lists the host's processes whose argv has arg: the emulator's sandboxes run
// their commands as local processes (daytonatest's localBox, or host processes without
// bubblewrap), which the host's /proc shows whatever namespaces they are in.
func hostProcs(t testing.TB, arg string) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		argv := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if slices.Contains(argv, arg) {
			out = append(out, filepath.Base(filepath.Dir(p))+" "+strings.Join(argv, " "))
		}
	}
	return out
}

// waitProcs waits up to d for the processes with arg to number (none when want is
// false, some when it is true) and returns what it saw last.
func waitProcs(t testing.TB, arg string, want bool, d time.Duration) ([]string, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ps := hostProcs(t, arg)
		if (len(ps) > 0) == want {
			return ps, true
		}
		if time.Now().After(deadline) {
			return ps, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecCancelKillsTheCommand: cancelling a plain Exec (not Interactive) stops the
// command and its background children in the sandbox before Exec returns, as the
// contract says for a cancelled turn. Through /process/execute it could not: the daemon
// runs that command without the request's context, so it ran on (up to 30 minutes in
// the harness) after the client had gone.
func TestExecCancelKillsTheCommand(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	tok := sleepToken(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	type result struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := rt.Exec(ctx, "inter", sandbox.ExecRequest{Shell: "sleep " + tok + " & sleep " + tok + "; wait", Timeout: time.Minute})
		done <- result{res, err}
	}()
	// Both sleeps, not the first to start: the shell starts them one after the other.
	deadline := time.Now().Add(20 * time.Second)
	for ps, _ := waitProcs(t, tok, true, 20*time.Second); len(ps) < 2; ps = hostProcs(t, tok) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's two sleeps did not show on the host: %q", ps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	var got result
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Exec did not return within 20 s of cancel")
	}
	// Exec returns once the session's processes are gone; a short grace covers /proc
	// catching up with the reaping.
	if ps, ok := waitProcs(t, tok, false, 2*time.Second); !ok {
		t.Fatalf("after a cancelled Exec the command still runs in the sandbox: %q", ps)
	}
	if !errors.Is(got.err, context.Canceled) || got.res.ExitCode != -1 {
		t.Fatalf("cancelled Exec: %+v, %v; want exit code -1 and context.Canceled", got.res, got.err)
	}
	// The command's session went with it; sessions idle in the pool may stay.
	noRunningCommands(t, srv, rt)
	if n := srv.Count(routeDeleteSession); n < 1 {
		t.Fatal("the cancelled command's session was not deleted")
	}
}

// noRunningCommands fails when a session of sandbox "inter" has a command without an
// exit code: what Exec left running.
func noRunningCommands(t *testing.T, srv *daytonatest.Server, rt *daytona.Runtime) {
	t.Helper()
	sb, err := rt.C.GetSandbox(testCtx(t), "inter")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range srv.Sessions("inter") {
		s, err := rt.C.GetSession(testCtx(t), sb, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Commands {
			if c.ExitCode == nil {
				t.Fatalf("session %s still runs %s", id, c.ID)
			}
		}
	}
}

// TestEmulatorExecuteOutlivesTheClient: the emulator's /process/execute, like the
// daemon's, keeps running a command whose client has gone; only its own timeout ends it.
func TestEmulatorExecuteOutlivesTheClient(t *testing.T) {
	t.Parallel()
	_, c, _ := interactiveSandbox(t)
	sb, err := c.GetSandbox(testCtx(t), "inter")
	if err != nil {
		t.Fatal(err)
	}
	tok := sleepToken(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		if _, ok := waitProcs(t, tok, true, 20*time.Second); ok {
			cancel()
		}
	}()
	_, err = c.Execute(ctx, sb, daytona.ExecuteRequest{Command: "sleep " + tok, Timeout: 3})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute: %v; want context.Canceled once the command ran", err)
	}
	if ps, ok := waitProcs(t, tok, false, time.Second); ok {
		t.Fatalf("the command ended with its client (%q); the daemon keeps it running", ps)
	}
	// Its own timeout (3 s) still ends it.
	if ps, ok := waitProcs(t, tok, false, 15*time.Second); !ok {
		t.Fatalf("the command outlived its timeout: %q", ps)
	}
}

// toolboxRequests counts the toolbox requests the emulator served (process and files).
func toolboxRequests(counts map[string]int) int {
	n := 0
	for route, c := range counts {
		if strings.Contains(route, " /process/") || strings.Contains(route, " /files") {
			n += c
		}
	}
	return n
}

// benchRoundTrips are the toolbox round trips the Exec benchmarks run at: the emulator's
// own (well under a millisecond) and one as a request to Daytona's proxy takes.
var benchRoundTrips = []time.Duration{0, 20 * time.Millisecond}

// benchSandbox is interactiveSandbox on an emulator whose toolbox requests take rtt.
func benchSandbox(b *testing.B, rtt time.Duration) (*daytonatest.Server, *daytona.Client, *daytona.Runtime) {
	b.Helper()
	srv, c := setup(b, daytonatest.WithToolboxLatency(rtt))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap := readySnapshot(b, ctx, c, "true")
	rt := &daytona.Runtime{C: c}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "inter", SnapshotID: snap}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Delete(context.Background(), "inter") })
	return srv, c, rt
}

// benchCommands times run b.N times and reports the median and the toolbox requests
// each run takes (all of them: none is left running after a command has returned).
func benchCommands(b *testing.B, srv *daytonatest.Server, run func() error) {
	srv.ResetCounts()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := run(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "median-ns/op")
	b.ReportMetric(float64(toolboxRequests(srv.Counts()))/float64(b.N), "requests/op")
}

// BenchmarkExecRoundTrip: a short command (echo) through Runtime.Exec, the client, the
// emulator's toolbox and a local sandbox, start to exit code and output, at each of
// benchRoundTrips. It reports the median and the toolbox requests each Exec takes, so
// that a change of transport shows as a ratio against BenchmarkExecuteBaseline.
func BenchmarkExecRoundTrip(b *testing.B) {
	for _, rtt := range benchRoundTrips {
		b.Run("rtt="+rtt.String(), func(b *testing.B) {
			srv, _, rt := benchSandbox(b, rtt)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			req := sandbox.ExecRequest{Argv: []string{"echo", "hi"}}
			if _, err := rt.Exec(ctx, "inter", req); err != nil {
				b.Fatal(err)
			}
			benchCommands(b, srv, func() error {
				res, err := rt.Exec(ctx, "inter", req)
				if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
					return fmt.Errorf("%+v %v", res, err)
				}
				return nil
			})
		})
	}
}

// BenchmarkExecuteBaseline: the same short command through the daemon's
// /process/execute, called directly through the client: one request that answers with
// the exit code and output, which Exec used before commands became cancellable. It is
// the yardstick BenchmarkExecRoundTrip's numbers are read against.
func BenchmarkExecuteBaseline(b *testing.B) {
	for _, rtt := range benchRoundTrips {
		b.Run("rtt="+rtt.String(), func(b *testing.B) {
			srv, c, _ := benchSandbox(b, rtt)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sb, err := c.GetSandbox(ctx, "inter")
			if err != nil {
				b.Fatal(err)
			}
			req := daytona.ExecuteRequest{Command: "echo hi", Cwd: daytona.DefaultWorkDir, Timeout: 60}
			benchCommands(b, srv, func() error {
				res, err := c.Execute(ctx, sb, req)
				if err != nil || res.ExitCode != 0 || res.Result != "hi\n" {
					return fmt.Errorf("%+v %v", res, err)
				}
				return nil
			})
		})
	}
}

// TestExecBackgroundSurvives: a background process that a finished command left (a
// server started with &) keeps running after Exec has returned and the command's
// session is deleted, as it does on the local backend and did with /process/execute.
func TestExecBackgroundSurvives(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	tok := sleepToken(t)
	res, err := rt.Exec(testCtx(t), "inter", sandbox.ExecRequest{Shell: "sleep " + tok + " >/dev/null 2>&1 & echo started"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "started\n" {
		t.Fatalf("%+v %v", res, err)
	}
	// Sessions are deleted as the pool retires them: delete them all, as a daemon does
	// when the sandbox restarts, and the sleep (under setsid) still runs.
	sb, err := rt.C.GetSandbox(testCtx(t), "inter")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the session's recycling
	for _, id := range srv.Sessions("inter") {
		if err := rt.C.DeleteSession(testCtx(t), sb, id); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if ps := hostProcs(t, tok); len(ps) != 1 {
		t.Fatalf("the background sleep after Exec returned: %q; want it running", ps)
	}
}
