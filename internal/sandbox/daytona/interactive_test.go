package daytona_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// Session routes as the emulator counts them.
const (
	routeCreateSession = "POST /process/session"
	routeDeleteSession = "DELETE /process/session/{sessionId}"
	routeInput         = "POST /process/session/{sessionId}/command/{commandId}/input"
	routeLogs          = "GET /process/session/{sessionId}/command/{commandId}/logs"
)

// interactiveSandbox returns an emulator, a runtime on it and a started sandbox "inter"
// (deleted at the end).
func interactiveSandbox(t testing.TB) (*daytonatest.Server, *daytona.Client, *daytona.Runtime) {
	t.Helper()
	srv, c := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap := readySnapshot(t, ctx, c, "true")
	rt := &daytona.Runtime{C: c}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "inter", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "inter") })
	return srv, c, rt
}

func interactive(t *testing.T, rt *daytona.Runtime, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	t.Helper()
	req.Interactive = true
	return rt.Exec(testCtx(t), "inter", req)
}

// TestInteractiveBytes: stdin reaches the command byte for byte (every byte value, NUL,
// backslash, invalid UTF-8, a last line without newline), in chunks as large as the
// forwarder reads, and the session is gone afterwards.
func TestInteractiveBytes(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	var all []byte
	for i := range 256 {
		all = append(all, byte(i))
	}
	all = append(all, "\\c\\n\\0101 end"...)
	res, err := interactive(t, rt, sandbox.ExecRequest{Shell: "od -An -tx1 -v | tr -d ' \\n'; echo", Stdin: bytes.NewReader(all)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("od: %+v %v", res, err)
	}
	if got, want := strings.TrimSpace(string(res.Stdout)), hex.EncodeToString(all); got != want {
		t.Fatalf("the command read\n%s\nwant\n%s", got, want)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 000 bytes: several chunks
	res, err = interactive(t, rt, sandbox.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: bytes.NewReader(big)})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(len(big)) {
		t.Fatalf("wc -c of %d bytes: %q %v", len(big), res.Stdout, err)
	}
	if ids := srv.Sessions("inter"); len(ids) != 0 {
		t.Fatalf("sessions left behind: %v", ids)
	}
	if n, d := srv.Count(routeCreateSession), srv.Count(routeDeleteSession); n != 2 || d != 2 {
		t.Fatalf("%d sessions created, %d deleted; want 2 and 2", n, d)
	}
}

// TestInteractiveNoStdin: without Stdin the command reads EOF at once; a last line
// without a newline comes back without one (the end marker takes the newline the
// daemon's line framing adds); exit codes come through.
func TestInteractiveNoStdin(t *testing.T) {
	t.Parallel()
	_, _, rt := interactiveSandbox(t)
	res, err := interactive(t, rt, sandbox.ExecRequest{Shell: "cat; printf 'a\\nb'; printf e >&2; exit 3"})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "a\nb" || string(res.Stderr) != "e" {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = interactive(t, rt, sandbox.ExecRequest{Argv: []string{"no-such-command-here"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing command: %+v %v", res, err)
	}
}

// TestInteractiveTimeout: the timeout kills the command (124, TimedOut, the timeout
// limit) and keeps what it printed, and the session goes.
func TestInteractiveTimeout(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	start := time.Now()
	res, err := interactive(t, rt, sandbox.ExecRequest{Shell: "echo started; echo e >&2; sleep 30", Timeout: time.Second})
	if err != nil || res.ExitCode != 124 || !res.TimedOut || res.Limit != sandbox.LimitTimeout {
		t.Fatalf("%+v %v", res, err)
	}
	if string(res.Stdout) != "started\n" || string(res.Stderr) != "e\n" {
		t.Fatalf("output of a timed-out command: %q %q", res.Stdout, res.Stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a 1 s timeout took %s", took)
	}
	if ids := srv.Sessions("inter"); len(ids) != 0 {
		t.Fatalf("sessions left behind: %v", ids)
	}
}

// TestInteractiveInputRetry: input the daemon could not open the pipe for (the command
// had not started) is sent again; other input failures stop the command with an error.
func TestInteractiveInputRetry(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	srv.InjectFaultsMessage(routeInput, 2, 500, "failed to open input pipe: open input.pipe: no such file or directory")
	res, err := interactive(t, rt, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("hello\n")})
	if err != nil || string(res.Stdout) != "hello\n" {
		t.Fatalf("after input pipe faults: %+v %v", res, err)
	}
	if n := srv.Count(routeInput); n != 4 { // 2 faults, the line, EOF
		t.Fatalf("%d input requests, want 4", n)
	}

	srv.InjectFaults(routeInput, 1, 500)
	inR, inW := io.Pipe()
	defer inW.Close()
	go func() { _, _ = io.WriteString(inW, "x\n") }()
	res, err = interactive(t, rt, sandbox.ExecRequest{Shell: "cat; sleep 30", Stdin: inR})
	if err == nil || !strings.Contains(err.Error(), "sending stdin") || res.ExitCode != -1 {
		t.Fatalf("after a failed input: %+v %v; want exit -1 and a stdin error", res, err)
	}
	if ids := srv.Sessions("inter"); len(ids) != 0 {
		t.Fatalf("sessions left behind: %v", ids)
	}
}

// TestInteractiveStoppedUnderneath: a sandbox stopped while an interactive command runs
// ends the command with exit code -1 and no error, as on the local backend.
func TestInteractiveStoppedUnderneath(t *testing.T) {
	t.Parallel()
	_, c, rt := interactiveSandbox(t)
	inR, inW := io.Pipe()
	defer inW.Close()
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	done := make(chan outcome, 1)
	var out bytes.Buffer
	started := make(chan struct{})
	go func() {
		res, err := interactive(t, rt, sandbox.ExecRequest{Shell: "echo up; cat", Stdin: inR, Stdout: writerFunc(func(p []byte) (int, error) {
			if out.Len() == 0 {
				close(started)
			}
			return out.Write(p)
		})})
		done <- outcome{res, err}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not start")
	}
	if _, err := c.StopSandbox(testCtx(t), "inter", false); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil || o.res.ExitCode != -1 || string(o.res.Stdout) != "up\n" {
			t.Fatalf("stopped underneath: %+v %v; want exit -1, no error", o.res, o.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exec did not return after the sandbox stopped")
	}
}

// TestInteractiveSessionLost: a session that disappears under a running command (the
// daemon restarted) is ErrLost, not ErrNotFound (the sandbox is there).
func TestInteractiveSessionLost(t *testing.T) {
	t.Parallel()
	_, c, rt := interactiveSandbox(t)
	ctx := testCtx(t)
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() {
		_, err := interactive(t, rt, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: inR})
		done <- err
	}()
	sb, err := c.GetSandbox(ctx, "inter")
	if err != nil {
		t.Fatal(err)
	}
	for {
		list, err := c.ListSessions(ctx, sb)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 && len(list[0].Commands) == 1 {
			if err := c.DeleteSession(ctx, sb, list[0].SessionID); err != nil {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrLost) || errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("session deleted underneath: %v, want ErrLost only", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Exec did not return after its session was deleted")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestInteractiveRefused: what one exec cannot carry, and environment names no shell
// takes, are refused before anything runs.
func TestInteractiveRefused(t *testing.T) {
	t.Parallel()
	srv, _, rt := interactiveSandbox(t)
	for _, req := range []sandbox.ExecRequest{
		{Shell: "true", Env: map[string]string{"NOT-A-NAME": "x"}},
		{Argv: []string{"echo", strings.Repeat("x", 128<<10)}},
		{Shell: "true", Env: map[string]string{"A": strings.Repeat("x", 100<<10), "B": strings.Repeat("x", 100<<10),
			"C": strings.Repeat("x", 100<<10), "D": strings.Repeat("x", 100<<10), "E": strings.Repeat("x", 100<<10),
			"F": strings.Repeat("x", 100<<10), "G": strings.Repeat("x", 100<<10), "H": strings.Repeat("x", 100<<10),
			"I": strings.Repeat("x", 100<<10), "J": strings.Repeat("x", 100<<10), "K": strings.Repeat("x", 100<<10)}},
	} {
		if _, err := interactive(t, rt, req); err == nil {
			t.Fatalf("%.80v: accepted", req)
		}
	}
	if n := srv.Count(routeCreateSession); n != 0 {
		t.Fatalf("%d sessions created for refused commands", n)
	}
}

// TestSessionEmulation checks the emulator's session endpoints against the v0.190
// daemon: queued commands, input without EOF (newline appended, echoed unless
// suppressed), the log formats by SDK version, 410 after the end, delete.
func TestSessionEmulation(t *testing.T) {
	t.Parallel()
	_, c, _ := interactiveSandbox(t)
	ctx := testCtx(t)
	sb, err := c.GetSandbox(ctx, "inter")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateSession(ctx, sb, "s1"); err != nil {
		t.Fatal(err)
	}
	first, err := c.SessionExec(ctx, sb, "s1", daytona.SessionExecuteRequest{Command: "sleep 0.5", RunAsync: true})
	if err != nil || first.CmdID == "" {
		t.Fatalf("async exec: %+v %v", first, err)
	}
	second, err := c.SessionExec(ctx, sb, "s1", daytona.SessionExecuteRequest{Command: "cat; echo never", RunAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	// Queued behind the first: its input pipe does not exist yet.
	if err := c.SessionInput(ctx, sb, "s1", second.CmdID, "early"); !daytona.IsInputNotOpen(err) {
		t.Fatalf("input to a queued command: %v, want the daemon's 500 failed to open input pipe", err)
	}
	var cmd *daytona.SessionCommand
	for cmd == nil || cmd.ExitCode == nil {
		if cmd, err = c.SessionCommand(ctx, sb, "s1", first.CmdID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if *cmd.ExitCode != 0 || cmd.Command != "sleep 0.5" {
		t.Fatalf("first command: %+v", cmd)
	}
	for {
		err := c.SessionInput(ctx, sb, "s1", second.CmdID, "hi")
		if err == nil {
			break
		}
		if !daytona.IsInputNotOpen(err) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The echo ("hi" with the newline the daemon appends) and cat's copy.
	var logs *daytona.SessionLogs
	for logs == nil || logs.Stdout != "hi\nhi\n" {
		if logs, err = c.SessionCommandLogs(ctx, sb, "s1", second.CmdID); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("logs %+v", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if logs.Output != "\x01\x01\x01hi\n\x01\x01\x01hi\n" {
		t.Fatalf("raw log %q", logs.Output)
	}
	if err := c.SessionInput(ctx, sb, "s1", second.CmdID, ""); err == nil {
		t.Fatal("empty input accepted")
	}
	// An async command never reads EOF: cat is still there.
	time.Sleep(100 * time.Millisecond)
	if cmd, err = c.SessionCommand(ctx, sb, "s1", second.CmdID); err != nil || cmd.ExitCode != nil {
		t.Fatalf("cat ended without EOF: %+v %v", cmd, err)
	}
	s, err := c.GetSession(ctx, sb, "s1")
	if err != nil || len(s.Commands) != 2 || s.Commands[1].Command != "cat; echo never" {
		t.Fatalf("session: %+v %v", s, err)
	}

	// A sync command: stdin at EOF, output in the answer, streams apart (SDK 0.190).
	if err := c.CreateSession(ctx, sb, "s2"); err != nil {
		t.Fatal(err)
	}
	sync, err := c.SessionExec(ctx, sb, "s2", daytona.SessionExecuteRequest{Command: "cat; echo out; echo err >&2; printf partial; exit 4"})
	if err != nil || sync.ExitCode == nil || *sync.ExitCode != 4 || sync.Stdout == nil || *sync.Stdout != "out\npartial\n" || *sync.Stderr != "err\n" {
		t.Fatalf("sync exec: %+v %v", sync, err)
	}
	if err := c.SessionInput(ctx, sb, "s2", sync.CmdID, "late"); !daytona.IsGone(err) {
		t.Fatalf("input after the end: %v, want 410", err)
	}
	// The log formats by X-Daytona-SDK-Version.
	u := sb.ToolboxProxyURL + "/" + sb.ID + "/process/session/s2/command/" + sync.CmdID + "/logs"
	for _, tc := range []struct{ version, split, want string }{
		{"", "", "out\npartial\nerr\n"},
		{"0.26.0", "", "out\npartial\nerr\n"},
		{"", "true", "\x01\x01\x01out\n\x01\x01\x01partial\n\x02\x02\x02err\n"},
		{"0.100.0", "", "\x01\x01\x01out\n\x01\x01\x01partial\n\x02\x02\x02err\n"},
		{"0.167.0-rc.1", "", `{"output":`},
		{"0.0.0-dev", "", `{"output":`},
	} {
		got := rawGet(t, u, tc.version, tc.split)
		if tc.want[0] == '{' {
			if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, `"stderr":"err\n"`) {
				t.Fatalf("version %q: %q, want JSON", tc.version, got)
			}
			continue
		}
		if sortLines(got) != sortLines(tc.want) {
			t.Fatalf("version %q split %q: %q, want %q", tc.version, tc.split, got, tc.want)
		}
	}

	// Delete kills what runs (cat) and forgets the session.
	if err := c.DeleteSession(ctx, sb, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(ctx, sb, "s1"); !daytona.IsNotFound(err) {
		t.Fatalf("deleted session: %v, want 404", err)
	}
	if list, err := c.ListSessions(ctx, sb); err != nil || len(list) != 1 || list[0].SessionID != "s2" {
		t.Fatalf("sessions: %+v %v", list, err)
	}
	if err := c.CreateSession(ctx, sb, "s2"); err != nil {
		t.Fatalf("creating an existing session is taken as done: %v", err)
	}
}

func rawGet(t *testing.T, u, version, split string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+daytonatest.DefaultKey)
	if version != "" {
		req.Header.Set("X-Daytona-SDK-Version", version)
	}
	if split != "" {
		req.Header.Set("X-Daytona-Split-Output", split)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %q %v", u, resp.StatusCode, b, err)
	}
	return string(b)
}

// sortLines orders the lines of s: the streams' lines interleave as they were written.
func sortLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// BenchmarkInteractiveRoundTrip: a line to an interactive command's stdin and its
// answer on stdout, through the client, the emulator's session endpoints and a local
// sandbox; compare with the local backend's BenchmarkInteractiveRoundTrip.
func BenchmarkInteractiveRoundTrip(b *testing.B) {
	srv, _, rt := interactiveSandbox(b)
	srv.ResetCounts()
	sandboxtest.BenchInteractive(b, rt, "inter")
	// Toolbox requests per round trip: input, log polls and exit-code checks.
	n := srv.Count(routeInput) + srv.Count(routeLogs) + srv.Count("GET /process/session/{sessionId}/command/{commandId}")
	b.ReportMetric(float64(n)/float64(b.N), "requests/op")
}
