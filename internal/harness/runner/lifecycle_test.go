package runner_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A prompt that needs no code provisions no sandbox: the counting wrapper around the
// real local runtime sees no call at all, and no sandbox record exists.
func TestQAPromptProvisionsNoSandbox(t *testing.T) {
	f := newFixture(t)
	r, sid := f.scripted(t, "qa", text("Four."))
	out := mustRun(t, r, sid, "What is 2+2?")
	if out.Text != "Four." {
		t.Fatalf("answer %q", out.Text)
	}
	if n := f.env.Runtime.Total(); n != 0 {
		t.Fatalf("a Q&A turn made %d sandbox backend calls; want 0", n)
	}
	if _, err := f.env.Store.GetSessionSandbox(context.Background(), sid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session has a sandbox record after a Q&A turn: %v", err)
	}
	// The tool list offered the sandbox tools all the same: it does not depend on state.
	if len(r.System()) == 0 {
		t.Fatal("empty system prompt")
	}
}

// The first sandbox call provisions; later calls and turns reuse the same sandbox with
// its files.
func TestSandboxProvisionedOnFirstCallAndReused(t *testing.T) {
	f := newFixture(t)
	r, sid := f.scripted(t, "code", text("Hi."), exec("echo $GREETING > note.txt"), text("written"), exec("cat note.txt"), text("read"))
	mustRun(t, r, sid, "hello")
	if f.env.Runtime.Total() != 0 {
		t.Fatal("sandbox touched before any sandbox tool call")
	}
	mustRun(t, r, sid, "write")
	if got := f.env.Runtime.Calls("Create"); got != 1 {
		t.Fatalf("Create called %d times after the first exec; want 1", got)
	}
	prov := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_provisioned")
	if len(prov) != 1 || prov[0]["snapshot_id"] != f.env.Snapshot {
		t.Fatalf("sandbox_provisioned events %v; want one with snapshot %s", prov, f.env.Snapshot)
	}
	mustRun(t, r, sid, "read")
	if got := f.env.Runtime.Calls("Create"); got != 1 {
		t.Fatalf("Create called %d times; the sandbox was not reused", got)
	}
	if last := lastResult(t, f.env.Store, sid); !strings.Contains(last, "hello") {
		t.Fatalf("second turn did not see the file of the first: %q", last)
	}
}

// A sandbox killed mid-command: the model gets a tool error, the session goes on, the
// next call recreates the sandbox and says the workspace was reset; the file being
// written is recorded as uncertain.
func TestSandboxKilledMidTurnLeavesSessionUsable(t *testing.T) {
	f := newFixture(t)
	marker := "tfkill" + time.Now().Format("150405.000000")
	r, sid := f.session(t, "crash", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec("echo partial > out.txt; sleep 60 # "+marker),
			// The model takes 3 s to answer: the out-of-band delete is over by then.
			map[string]any{"delay_ms": 3000, "tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "ls; echo after"}}}},
			text("recovered"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	killed := make(chan error, 1)
	go func() {
		// Out of band, as a crash or an operator would: the raw runtime on the same root,
		// once the command runs. (Streamed output is not used as the signal: the local
		// runtime streams only once the runtime branch lands.)
		deadline := time.Now().Add(30 * time.Second)
		for len(sandboxtest.ProcessesWith(marker)) == 0 {
			if time.Now().After(deadline) {
				killed <- errors.New("the command never started")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		rec, err := f.env.Store.GetSessionSandbox(context.Background(), sid)
		if err != nil {
			killed <- err
			return
		}
		killed <- f.env.Runtime.Runtime.Delete(context.Background(), rec.SandboxID)
	}()
	out, err := r.Run(context.Background(), sid, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if out.Status != store.RunCompleted || out.Text != "recovered" {
		t.Fatalf("run %s %q; want completed \"recovered\"", out.Status, out.Text)
	}
	res := results(t, f.env.Store, sid)
	if len(res) != 2 {
		t.Fatalf("%d tool results; want 2", len(res))
	}
	if res[0]["is_error"] != true || !strings.Contains(res[0]["text"].(string), "died") {
		t.Fatalf("the killed call's result is not a sandbox-death error: %v", res[0])
	}
	second := res[1]["text"].(string)
	if !strings.Contains(second, "reset") || !strings.Contains(second, "after") || strings.Contains(second, "out.txt") {
		t.Fatalf("the next call did not run in a fresh, announced workspace: %q", second)
	}
	if got := f.env.Runtime.Calls("Create"); got != 2 {
		t.Fatalf("Create called %d times; want 2 (first + recreate)", got)
	}
	lost := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_lost")
	if len(lost) == 0 {
		t.Fatal("no sandbox_lost event")
	}
	unc, _ := lost[0]["uncertain"].([]any)
	if len(unc) == 0 || !strings.Contains(unc[0].(string), "out.txt") {
		t.Fatalf("the dead call's files are not marked uncertain: %v", lost[0])
	}
	// One field set, whoever saw the loss: the call (lost[0]) or the next Acquire.
	if st, _ := lost[0]["backend_status"].(string); lost[0]["state"] != store.SandboxStateRunning || st == "" || st == sandbox.SandboxRunning || lost[0]["reason"] == "" {
		t.Fatalf("the call's sandbox_lost: %v; want state running, what the backend said and a reason", lost[0])
	}
	for _, l := range lost {
		for k := range l {
			if !slices.Contains([]string{"sandbox_id", "state", "backend_status", "reason", "uncertain"}, k) {
				t.Fatalf("sandbox_lost with field %q: %v", k, l)
			}
		}
	}
	rec, _ := f.env.Store.GetSessionSandbox(context.Background(), sid)
	if rec.Generation != 2 || rec.State != store.SandboxStateRunning {
		t.Fatalf("sandbox record %+v; want generation 2, running", rec)
	}
}

// keptFileSession starts a session of a new agent name on the default environment with
// the sandbox timings given (idle stop, archive and delete minutes), and runs its first
// turn, which writes keep.txt; its second turn runs second.
func (f *fixture) keptFileSession(t *testing.T, name, second string, idle, archive, del int64) (*runner.Runner, string) {
	t.Helper()
	r, sid := f.session(t, name, harnesstest.AgentSpec{
		"model":   harnesstest.Script(exec("echo kept > keep.txt"), text("ok"), exec(second), text("ok")),
		"sandbox": harnesstest.Sandbox("default", idle, archive, del),
	})
	mustRun(t, r, sid, "write")
	return r, sid
}

// Reused after an idle stop: the reaper stops the sandbox on the agent's timing (fake
// clock), the next call resumes it with its files and records the snapshot it came from.
func TestSessionReusedAfterIdleStopKeepsFilesAndSnapshot(t *testing.T) {
	f := newFixture(t)
	r, sid := f.keptFileSession(t, "idle", "cat keep.txt", 15, 60, 120)
	ctx := context.Background()

	f.clock.Advance(14 * time.Minute)
	if trs, _ := f.manager.Reap(ctx); len(trs) != 0 {
		t.Fatalf("reaped before idle_stop_minutes: %+v", trs)
	}
	f.clock.Advance(2 * time.Minute)
	trs, err := f.manager.Reap(ctx)
	if err != nil || len(trs) != 1 || trs[0].To != store.SandboxStateStopped || trs[0].Err != nil {
		t.Fatalf("reap after 16 idle minutes: %+v, %v; want one stop", trs, err)
	}
	rec, _ := f.env.Store.GetSessionSandbox(ctx, sid)
	info, err := f.env.Runtime.Runtime.Get(ctx, rec.SandboxID)
	if err != nil || info.Status != sandbox.SandboxStopped {
		t.Fatalf("backend status %s, %v; want Stopped", info.Status, err)
	}

	mustRun(t, r, sid, "read")
	if last := lastResult(t, f.env.Store, sid); !strings.Contains(last, "kept") || !strings.Contains(last, "resumed") {
		t.Fatalf("after the stop: %q; want the file and a resume note", last)
	}
	resumed := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_resumed")
	if len(resumed) != 1 || resumed[0]["snapshot_id"] != f.env.Snapshot || resumed[0]["recorded_snapshot_id"] != f.env.Snapshot {
		t.Fatalf("sandbox_resumed %v; want snapshot %s recorded and reported", resumed, f.env.Snapshot)
	}
	if got := f.env.Runtime.Calls("Create"); got != 1 {
		t.Fatalf("Create called %d times; a stopped sandbox must be resumed, not replaced", got)
	}
}

// Reused after archive: the reaper stops, then archives the sandbox; the next call
// restores it with its files.
func TestSessionReusedAfterArchiveKeepsFilesAndSnapshot(t *testing.T) {
	f := newFixture(t)
	r, sid := f.keptFileSession(t, "arch", "cat keep.txt", 15, 60, 120)
	ctx := context.Background()
	f.clock.Advance(61 * time.Minute)
	trs, err := f.manager.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 2 || trs[1].To != store.SandboxStateArchived || trs[1].Err != nil {
		t.Fatalf("reap after 61 idle minutes: %+v; want stop then archive", trs)
	}
	mustRun(t, r, sid, "read")
	if last := lastResult(t, f.env.Store, sid); !strings.Contains(last, "kept") {
		t.Fatalf("after archive: %q; want the file back", last)
	}
	resumed := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_resumed")
	if len(resumed) != 1 || resumed[0]["snapshot_id"] != f.env.Snapshot {
		t.Fatalf("sandbox_resumed %v; want snapshot %s", resumed, f.env.Snapshot)
	}
}

// After delete_after_minutes the sandbox is deleted; the next call gets a fresh one and
// is told the workspace was reset.
func TestDeletedSandboxIsRecreatedWithResetNote(t *testing.T) {
	f := newFixture(t)
	r, sid := f.keptFileSession(t, "del", "ls", 1, 2, 3)
	ctx := context.Background()
	f.clock.Advance(4 * time.Minute)
	if _, err := f.manager.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := f.env.Store.GetSessionSandbox(ctx, sid)
	if rec.State != store.SandboxStateDeleted {
		t.Fatalf("state %s after 4 idle minutes with delete_after_minutes 3; want deleted", rec.State)
	}
	if _, err := f.env.Runtime.Runtime.Get(ctx, rec.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("backend still has %s: %v", rec.SandboxID, err)
	}
	mustRun(t, r, sid, "again")
	last := lastResult(t, f.env.Store, sid)
	if !strings.Contains(last, "fresh workspace") || strings.Contains(last, "keep.txt") {
		t.Fatalf("after delete: %q; want an announced fresh workspace", last)
	}
}

// A running command is activity: the reaper never stops a busy sandbox.
func TestBusySandboxIsNotStopped(t *testing.T) {
	f := newFixture(t)
	marker := "tfbusy" + time.Now().Format("150405.000000")
	r, sid := f.session(t, "busy", harnesstest.AgentSpec{
		"model":   harnesstest.Script(exec("sleep 60 # "+marker), text("ok")),
		"sandbox": harnesstest.Sandbox("default", 1, 2, 3),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan runner.Outcome, 1)
	go func() {
		out, _ := r.Run(ctx, sid, "go", nil)
		done <- out
	}()
	sandboxtest.WaitFor(t, "the command's process", 30*time.Second, func() bool { return len(sandboxtest.ProcessesWith(marker)) > 0 })
	f.clock.Advance(10 * time.Minute)
	trs, err := f.manager.Reap(context.Background())
	if err != nil || len(trs) != 0 {
		t.Fatalf("reaper touched a busy sandbox: %+v %v", trs, err)
	}
	cancel()
	if out := <-done; out.Status != store.RunCancelled {
		t.Fatalf("status %s; want cancelled", out.Status)
	}
}

// Cancelling during an exec stops the process itself, and the session stays usable.
func TestCancelDuringExecStopsTheProcess(t *testing.T) {
	f := newFixture(t)
	marker := "tfcancel" + time.Now().Format("150405.000000")
	r, sid := f.scripted(t, "cancel", exec("echo started; sleep 300 # "+marker), text("after cancel"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan runner.Outcome, 1)
	go func() {
		out, err := r.Run(ctx, sid, "go", nil)
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	sandboxtest.WaitFor(t, "the command's process", 30*time.Second, func() bool { return len(sandboxtest.ProcessesWith(marker)) > 0 })
	cancel()
	var out runner.Outcome
	select {
	case out = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if out.Status != store.RunCancelled {
		t.Fatalf("status %s; want cancelled", out.Status)
	}
	if p := sandboxtest.ProcessesWith(marker); len(p) > 0 {
		t.Fatalf("the command still runs after cancel: pids %v", p)
	}
	res := results(t, f.env.Store, sid)
	if len(res) != 1 || res[0]["is_error"] != true {
		t.Fatalf("cancelled call's result %v; want one error result", res)
	}
	if len(harnesstest.Payloads(t, f.env.Store, sid, events.KindCancelled)) != 1 {
		t.Fatal("no cancelled event")
	}
	out2 := mustRun(t, r, sid, "still there?")
	if out2.Text != "after cancel" {
		t.Fatalf("next turn %q", out2.Text)
	}
}

// Local sandboxes get the environment's cpu, memory and disk as enforced limits, and,
// in a harness without an egress proxy, no network at all (never the host's).
func TestLocalSandboxHasLimitsAndNoHostNetwork(t *testing.T) {
	f := newFixture(t)
	r, sid := f.scripted(t, "lim", exec("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"), text("ok"))
	mustRun(t, r, sid, "go")
	rec, _ := f.env.Store.GetSessionSandbox(context.Background(), sid)
	info, err := f.env.Runtime.Runtime.Get(context.Background(), rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if want := (sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072}); info.Limits != want || !info.BlockNetwork {
		t.Fatalf("sandbox limits %+v block_network %v; want %+v and no network", info.Limits, info.BlockNetwork, want)
	}
	// Enforced, unless this host gives the runtime no cgroup (an unprivileged run).
	enforced := len(f.env.Runtime.UnenforcedLimits(info.Limits)) == 0
	prov := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_provisioned")
	if len(prov) != 1 || prov[0]["limits_enforced"] != enforced {
		t.Fatalf("sandbox_provisioned %v; want limits_enforced %v", prov, enforced)
	}
	if ifaces := strings.Fields(strings.SplitN(lastResult(t, f.env.Store, sid), "stdout:", 2)[1]); len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Fatalf("network interfaces in the sandbox: %v; want only lo", ifaces)
	}
}
