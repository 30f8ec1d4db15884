package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// reapAgent stores an agent with a sandbox on the given timings (minutes) and returns it.
func reapAgent(t *testing.T, f *fixture, name string, idle, archive, del int64) *agents.Agent {
	t.Helper()
	harnesstest.AddAgent(t, f.env.Store, name, "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(text("ok")), "sandbox": harnesstest.Sandbox("default", idle, archive, del),
	})
	a, err := agents.Load(context.Background(), f.env.Store, name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runningSandbox gives a new session of agent a a real, running sandbox, released (idle
// from the fake clock's now), and returns the session and its record.
func runningSandbox(t *testing.T, f *fixture, m *lifecycle.Manager, a *agents.Agent) (string, store.SessionSandbox) {
	t.Helper()
	ctx := context.Background()
	sid, err := f.runner(t, a.Name).NewSession(ctx, harnesstest.Owner)
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx, sid, a)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	rec, err := f.env.Store.GetSessionSandbox(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	return sid, rec
}

// setState moves a session's record from running to state, at the fake clock's now.
// lostSandbox is a fixture with a running sandbox of a new agent name (idle stop 15,
// archive 60, delete 120 minutes) whose record says it is lost.
func lostSandbox(t *testing.T, name string) (*fixture, string, store.SessionSandbox) {
	t.Helper()
	f := newFixture(t)
	sid, rec := runningSandbox(t, f, f.manager, reapAgent(t, f, name, 15, 60, 120))
	setState(t, f, sid, store.SandboxStateLost)
	return f, sid, rec
}

func setState(t *testing.T, f *fixture, sid, state string) {
	t.Helper()
	ok, err := f.env.Store.SwapSandboxState(context.Background(), sid, []string{store.SandboxStateRunning}, state, f.clock.Now(), time.Time{})
	if err != nil || !ok {
		t.Fatalf("marking session %s %s: %v, %v", sid, state, ok, err)
	}
}

func recordState(t *testing.T, f *fixture, sid string) string {
	t.Helper()
	rec, err := f.env.Store.GetSessionSandbox(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return rec.State
}

func backendStatus(t *testing.T, f *fixture, id string) string {
	t.Helper()
	info, err := f.env.Runtime.Runtime.Get(context.Background(), id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "gone"
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.Status
}

// transitionsOf returns "from>to" for each transition of a session, failing on errors.
// reapTransitions is what m's Reap did to session sid's sandbox (transitionsOf).
func reapTransitions(t *testing.T, m *lifecycle.Manager, sid string) string {
	t.Helper()
	trs, err := m.Reap(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return transitionsOf(t, trs, sid)
}

func transitionsOf(t *testing.T, trs []lifecycle.Transition, sid string) string {
	t.Helper()
	var out []string
	for _, tr := range trs {
		if tr.SessionID != sid {
			continue
		}
		if tr.Err != nil {
			t.Errorf("session %s: %s -> %s failed: %v", sid, tr.From, tr.To, tr.Err)
		}
		out = append(out, tr.From+">"+tr.To)
	}
	return strings.Join(out, " ")
}

// A lost record whose sandbox still runs (CheckLost marks it lost when Get fails for a
// passing reason, an API error, while the box keeps running) is stopped on the agent's
// idle timing, then archived and deleted on theirs: it is not left running forever.
func TestReapStopsLostSandboxThatStillRuns(t *testing.T) {
	f, sid, rec := lostSandbox(t, "lostrun")
	ctx := context.Background()
	if s := backendStatus(t, f, rec.SandboxID); s != sandbox.SandboxRunning {
		t.Fatalf("backend status %s; want Running", s)
	}

	f.clock.Advance(14 * time.Minute)
	if trs, err := f.manager.Reap(ctx); err != nil || len(trs) != 0 {
		t.Fatalf("reaped a lost sandbox before idle_stop_minutes: %+v, %v", trs, err)
	}
	f.clock.Advance(2 * time.Minute)
	if got := reapTransitions(t, f.manager, sid); got != "lost>stopped" {
		t.Fatalf("reap after 16 idle minutes: %q; want lost>stopped", got)
	}
	if s := backendStatus(t, f, rec.SandboxID); s != sandbox.SandboxStopped {
		t.Fatalf("backend status %s after the reap; want Stopped", s)
	}
	if st := recordState(t, f, sid); st != store.SandboxStateStopped {
		t.Fatalf("record state %s; want stopped", st)
	}
	if ev := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_stopped"); len(ev) != 1 || ev[0]["from"] != "lost" || ev[0]["backend_status"] != sandbox.SandboxRunning {
		t.Fatalf("sandbox_stopped events %v; want one from lost, backend Running", ev)
	}

	// From here on it is an ordinary stopped sandbox: archived, then deleted, on time.
	f.clock.Advance(45 * time.Minute)
	trs, _ := f.manager.Reap(ctx)
	if got := transitionsOf(t, trs, sid); got != "stopped>archived" {
		t.Fatalf("reap after 61 idle minutes: %q; want stopped>archived", got)
	}
	f.clock.Advance(60 * time.Minute)
	trs, _ = f.manager.Reap(ctx)
	if got := transitionsOf(t, trs, sid); got != "archived>deleted" {
		t.Fatalf("reap after 121 idle minutes: %q; want archived>deleted", got)
	}
	if s := backendStatus(t, f, rec.SandboxID); s != "gone" {
		t.Fatalf("backend status %s; want gone", s)
	}
}

// Lost and changing records idle for 30 days are reaped by the agent's timings, by what
// the backend says each sandbox is; a recent change and a busy lost sandbox are left
// alone.
func TestReapCollectsLostAndChangingRecordsAfter30Days(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := reapAgent(t, f, "old", 15, 60, 120)
	raw := f.env.Runtime.Runtime

	lostRunning, lr := runningSandbox(t, f, f.manager, a)
	setState(t, f, lostRunning, store.SandboxStateLost)

	lostStopped, ls := runningSandbox(t, f, f.manager, a)
	if err := raw.Stop(ctx, ls.SandboxID); err != nil {
		t.Fatal(err)
	}
	setState(t, f, lostStopped, store.SandboxStateLost)

	lostGone, lg := runningSandbox(t, f, f.manager, a)
	if err := raw.Delete(ctx, lg.SandboxID); err != nil {
		t.Fatal(err)
	}
	setState(t, f, lostGone, store.SandboxStateLost)

	// A reaper died in the middle of stopping it, 30 days ago: the box still runs.
	staleChange, sc := runningSandbox(t, f, f.manager, a)
	setState(t, f, staleChange, store.SandboxStateChanging)

	// A lost sandbox with a call in progress (CheckLost runs under the call's lease):
	// never touched while the call lasts.
	busyLost, bl := runningSandbox(t, f, f.manager, a)
	lease, err := f.manager.Acquire(ctx, busyLost, a)
	if err != nil {
		t.Fatal(err)
	}
	setState(t, f, busyLost, store.SandboxStateLost)

	recentChange, rc := runningSandbox(t, f, f.manager, a)

	f.clock.Advance(30 * 24 * time.Hour)
	// Another reaper begins a transition just now: it is not stale.
	setState(t, f, recentChange, store.SandboxStateChanging)

	trs, err := f.manager.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sid, id, want string
	}{
		{lostRunning, lr.SandboxID, "lost>stopped stopped>archived archived>deleted"},
		{lostStopped, ls.SandboxID, "lost>archived archived>deleted"},
		{lostGone, lg.SandboxID, "lost>deleted"},
		{staleChange, sc.SandboxID, "changing>lost lost>stopped stopped>archived archived>deleted"},
	} {
		if got := transitionsOf(t, trs, c.sid); got != c.want {
			t.Errorf("session %s: transitions %q; want %q", c.sid, got, c.want)
		}
		if st := recordState(t, f, c.sid); st != store.SandboxStateDeleted {
			t.Errorf("session %s: record state %s; want deleted", c.sid, st)
		}
		if s := backendStatus(t, f, c.id); s != "gone" {
			t.Errorf("session %s: backend still has %s (%s)", c.sid, c.id, s)
		}
	}
	if got := transitionsOf(t, trs, busyLost); got != "" {
		t.Errorf("a busy lost sandbox was reaped: %q", got)
	}
	if s := backendStatus(t, f, bl.SandboxID); s != sandbox.SandboxRunning {
		t.Errorf("busy lost sandbox: backend status %s; want Running", s)
	}
	if got := transitionsOf(t, trs, recentChange); got != "" || recordState(t, f, recentChange) != store.SandboxStateChanging {
		t.Errorf("a transition begun just now was taken over: %q", got)
	}
	if s := backendStatus(t, f, rc.SandboxID); s != sandbox.SandboxRunning {
		t.Errorf("recent change: backend status %s; want Running (left to its reaper)", s)
	}

	// The call ends (at the fake clock's now: activity); once idle for 30 days more the
	// busy lost sandbox is reaped too.
	lease.Release(ctx)
	if trs, _ := f.manager.Reap(ctx); transitionsOf(t, trs, busyLost) != "" {
		t.Fatalf("a lost sandbox used just now was reaped: %+v", trs)
	}
	f.clock.Advance(30 * 24 * time.Hour)
	trs, _ = f.manager.Reap(ctx)
	if got := transitionsOf(t, trs, busyLost); got != "lost>stopped stopped>archived archived>deleted" {
		t.Fatalf("busy lost sandbox after its call and 30 idle days: %q", got)
	}
}

// failingGet is the local runtime with Get failing for one sandbox as a backend API
// error would (not ErrNotFound).
type failingGet struct {
	sandbox.Runtime
	id string
}

func (r failingGet) Get(ctx context.Context, id string) (sandbox.SandboxInfo, error) {
	if id == r.id {
		return sandbox.SandboxInfo{}, errors.New("502 Bad Gateway")
	}
	return r.Runtime.Get(ctx, id)
}

// oneRuntime serves rt for every sandbox provider (and the real backends' Info).
type oneRuntime struct {
	harnesstest.Source
	rt sandbox.Runtime
}

func (s oneRuntime) Runtime(context.Context, store.SandboxProvider) (sandbox.Runtime, error) {
	return s.rt, nil
}

// When the backend cannot say what a lost sandbox is, the reaper touches nothing and
// reports it; once the backend answers, the sandbox is reaped.
func TestReapLeavesLostSandboxWhenBackendCannotTell(t *testing.T) {
	f, sid, rec := lostSandbox(t, "flaky")
	ctx := context.Background()
	f.clock.Advance(30 * 24 * time.Hour)

	flaky := lifecycle.New(lifecycle.Config{Store: f.env.Store, Now: f.clock.Now,
		Runtimes: oneRuntime{rt: failingGet{Runtime: f.env.Runtime, id: rec.SandboxID}}})
	trs, err := flaky.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 || trs[0].SessionID != sid || trs[0].Err == nil || trs[0].To != "" {
		t.Fatalf("transitions %+v; want one error and no change", trs)
	}
	if st := recordState(t, f, sid); st != store.SandboxStateLost {
		t.Fatalf("record state %s; want lost", st)
	}
	if s := backendStatus(t, f, rec.SandboxID); s != sandbox.SandboxRunning {
		t.Fatalf("backend status %s; want Running", s)
	}
	trs, _ = f.manager.Reap(ctx)
	if got := transitionsOf(t, trs, sid); got != "lost>stopped stopped>archived archived>deleted" {
		t.Fatalf("once the backend answers: %q", got)
	}
}

// checkHook is a runtime whose health check (exec of "true") first runs hook: a reaper
// of another harness process acting while a call recovers a lost sandbox.
type checkHook struct {
	sandbox.Runtime
	hook func()
}

func (c checkHook) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if len(req.Argv) == 1 && req.Argv[0] == "true" && c.hook != nil {
		c.hook()
	}
	return c.Runtime.Exec(ctx, id, req)
}

// While a call health-checks a lost sandbox, a reaper in another process leaves it alone
// (the call claimed the record), so the check passes and the sandbox keeps its files,
// instead of being stopped under the check and replaced by a fresh one.
func TestReaperLeavesALostSandboxBeingRecovered(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := reapAgent(t, f, "recover", 15, 60, 120)
	sid, rec := runningSandbox(t, f, f.manager, a)
	if res, err := f.env.Runtime.Runtime.Exec(ctx, rec.SandboxID, sandbox.ExecRequest{Shell: "echo kept > /workspace/keep"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("writing a file: %v %+v", err, res)
	}
	setState(t, f, sid, store.SandboxStateLost)
	f.clock.Advance(30 * 24 * time.Hour)

	otherProcess := lifecycle.New(lifecycle.Config{Store: f.env.Store, Runtimes: harnesstest.Source{C: f.env.Runtime}, Now: f.clock.Now, Owner: "peer-host:1:1"})
	var during []lifecycle.Transition
	hook := checkHook{Runtime: f.env.Runtime, hook: func() {
		trs, err := otherProcess.Reap(ctx)
		if err != nil {
			t.Errorf("reap: %v", err)
		}
		during = append(during, trs...)
	}}
	caller := lifecycle.New(lifecycle.Config{Store: f.env.Store, Runtimes: oneRuntime{rt: hook}, Now: f.clock.Now})
	l, err := caller.Acquire(ctx, sid, a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if got := transitionsOf(t, during, sid); got != "" {
		t.Fatalf("the reaper acted during the health check: %s", got)
	}
	if l.Record.SandboxID != rec.SandboxID {
		t.Fatalf("the sandbox was replaced (%s -> %s)", rec.SandboxID, l.Record.SandboxID)
	}
	res, err := f.env.Runtime.Runtime.Exec(ctx, rec.SandboxID, sandbox.ExecRequest{Shell: "cat /workspace/keep"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "kept" {
		t.Fatalf("the file did not survive: %v %q", err, res.Stdout)
	}
}
