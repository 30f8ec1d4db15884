package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// pgReplicas sets up a control plane on a fresh PostgreSQL database, as replicas share
// one: the machine's data directory and the shared secret key in the environment (so
// helper processes inherit them), provider "local" with its release snapshot really
// prepared and environment "default" on it, and returns the fixture (its manager is one
// replica, on the fake clock) and the database URL.
func pgReplicas(t *testing.T) (*fixture, string) {
	t.Helper()
	harnesstest.RequireSandboxTools(t)
	harnesstest.ShareMachine(t)
	url := pgtest.Get(t).Database(t)
	st := storetest.Open(t, url)
	ctx := context.Background()
	prov := store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner}
	be, err := backends.Default().Get(prov.Type)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sandbox.ProviderConfig{Name: prov.Name, Type: prov.Type, DataDir: st.Dir()}
	rel, rt := harnesstest.PrepareProvider(t, st, prov, be, cfg)
	must(t, st.CreateEnvironment(ctx, store.Environment{ID: "env-default", Name: "default", Provider: "local", Owner: harnesstest.Owner, Reserved: true,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "release", SnapshotID: rel}))
	env := &harnesstest.Env{Store: st, Snapshot: rel, Runtime: &harnesstest.Counting{Runtime: rt}, Dir: st.Dir()}
	clock := harnesstest.NewClock()
	m := lifecycle.New(lifecycle.Config{Store: st, Runtimes: harnesstest.Source{C: env.Runtime}, Now: clock.Now})
	return &fixture{env: env, clock: clock, manager: m}, url
}

// A replica killed with SIGKILL mid-turn, on what stands for another machine (its owner
// name is in another pid space, so no other process can check its pid): the surviving
// replica leaves the run alone while its heartbeat is recent, marks it interrupted once
// the heartbeat timeout passed (the pass `serve` makes), stops the command it left
// running, and the session goes on from the surviving replica with everything said and
// the sandbox's files intact.
func TestReplicaKilledMidTurnIsRepairedAfterHeartbeatTimeout(t *testing.T) {
	f, url := pgReplicas(t)
	ctx := context.Background()
	marker := "tfreplica" + time.Now().Format("150405.000000")
	r, sid := f.scripted(t, "crashy", exec("echo before > mark.txt; sleep 300 # "+marker), exec("cat mark.txt"), text("resumed fine"))
	const timeout = 2 * time.Second
	r.StaleAfter = timeout
	deadOwner := fmt.Sprintf("replica-a.example~0badf00d:%d:1", 4242)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_DB="+url, "HELPER_AGENT=crashy", "HELPER_SESSION="+sid,
		"HELPER_PROMPT=start the long job", "HELPER_OWNER="+deadOwner, "HELPER_HEARTBEAT=100ms")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sandboxtest.WaitFor(t, "replica A's command in the sandbox", 60*time.Second, func() bool {
		rec, err := f.env.Store.GetSessionSandbox(ctx, sid)
		if err != nil {
			return false
		}
		_, err = f.env.Runtime.Runtime.ReadFile(ctx, rec.SandboxID, "mark.txt", 0)
		return err == nil && len(sandboxtest.ProcessesWith(marker)) > 0
	})
	runningRun := func() store.Run {
		t.Helper()
		runs, err := f.env.Store.Runs(ctx, sid)
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs %+v, %v; want replica A's one", runs, err)
		}
		return runs[0]
	}
	first := runningRun().HeartbeatAt
	sandboxtest.WaitFor(t, "replica A's heartbeat", 10*time.Second, func() bool { return runningRun().HeartbeatAt.After(first) })

	// Replica B's pass while A lives: nothing to repair, and the session is busy.
	self := lifecycle.ProcessOwner()
	if rep, err := runner.RepairStale(ctx, f.env.Store, f.manager, self, timeout, nil); err != nil || len(rep) != 0 {
		t.Fatalf("B's pass repaired a live replica's run: %+v, %v", rep, err)
	}
	if _, err := r.Run(ctx, sid, "hello?", nil); !errors.Is(err, runner.ErrBusy) {
		t.Fatalf("B ran a turn in a session A is running: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	if got := strings.Join(kinds(t, f.env.Store, sid), ","); got != "user_message,model_message,usage,tool_call,sandbox_provisioned" {
		t.Fatalf("log after the kill: %s (helper stderr: %s)", got, stderr.String())
	}

	// Within the timeout the dead replica's run stands: B cannot tell it from a slow one.
	if rep, err := runner.RepairStale(ctx, f.env.Store, f.manager, self, timeout, nil); err != nil || len(rep) != 0 {
		t.Fatalf("B's pass repaired the run within the heartbeat timeout: %+v, %v", rep, err)
	}
	if run := runningRun(); run.Status != store.RunRunning {
		t.Fatalf("run %s is %s within the heartbeat timeout", run.ID, run.Status)
	}

	var rep []runner.Repaired
	sandboxtest.WaitFor(t, "B's pass to repair the dead replica's run", 10*time.Second, func() bool {
		rep, err = runner.RepairStale(ctx, f.env.Store, f.manager, self, timeout, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(rep) > 0
	})
	if since := time.Since(killed); since < timeout-time.Second {
		t.Fatalf("repaired %s after the kill; the heartbeat timeout is %s", since, timeout)
	}
	if len(rep) != 1 || rep[0].Err != nil || rep[0].SessionID != sid || rep[0].Owner != deadOwner || rep[0].Added != 2 {
		t.Fatalf("repair %+v; want A's run, with run_interrupted and the dangling call's result added", rep)
	}
	if p := sandboxtest.ProcessesWith(marker); len(p) > 0 {
		t.Fatalf("the command the dead replica left running still runs after the repair: pids %v", p)
	}
	interrupted := harnesstest.Payloads(t, f.env.Store, sid, events.KindRunInterrupted)
	if len(interrupted) != 1 || !strings.Contains(interrupted[0]["reason"].(string), "no heartbeat") {
		t.Fatalf("run_interrupted events %v; want one, naming the lapsed heartbeat", interrupted)
	}
	if rec, _ := f.env.Store.GetSessionSandbox(ctx, sid); rec.ActiveExecs != 0 {
		t.Fatalf("active_execs %d after the repair; the dead replica's busy mark was not cleared", rec.ActiveExecs)
	}
	// A second pass finds nothing more to do.
	if again, err := runner.RepairStale(ctx, f.env.Store, f.manager, self, timeout, nil); err != nil || len(again) != 0 {
		t.Fatalf("second pass: %+v, %v", again, err)
	}

	out := mustRun(t, r, sid, "are you still there?")
	if out.Text != "resumed fine" {
		t.Fatalf("B's turn answered %q", out.Text)
	}
	if runs := checkResumedAfterCrash(t, f.env.Store, sid); runs[1].Owner != self {
		t.Fatalf("runs %+v; want A's interrupted, then B's completed", runs)
	}
	if users := harnesstest.Payloads(t, f.env.Store, sid, events.KindUserMessage); len(users) != 2 || users[0]["text"] != "start the long job" {
		t.Fatalf("user messages %v; want A's and B's", users)
	}
}

// Two replicas' reapers run at the same moment, round after round, on sandboxes whose
// timings all passed: each sandbox is stopped once, archived once and deleted once, by
// the backend calls as by the transitions reported, and no lease is left behind.
func TestTwoReplicasReapEachSandboxOnce(t *testing.T) {
	f, url := pgReplicas(t)
	ctx := context.Background()
	a := reapAgent(t, f, "reaped", 15, 60, 120)
	other := storetest.Open(t, url)
	replicas := []*lifecycle.Manager{
		lifecycle.New(lifecycle.Config{Store: f.env.Store, Runtimes: harnesstest.Source{C: f.env.Runtime}, Now: f.clock.Now, Owner: "replica-1~00000001:1:1"}),
		lifecycle.New(lifecycle.Config{Store: other, Runtimes: harnesstest.Source{C: f.env.Runtime}, Now: f.clock.Now, Owner: "replica-2~00000002:2:2"}),
	}
	const rounds, sandboxes = 4, 5
	byReplica := [2]int{}
	for round := 0; round < rounds; round++ {
		var sids []string
		for i := 0; i < sandboxes; i++ {
			sid, _ := runningSandbox(t, f, f.manager, a)
			sids = append(sids, sid)
		}
		for _, step := range []struct {
			advance time.Duration
			method  string
			to      string
		}{{16 * time.Minute, "Stop", store.SandboxStateStopped}, {45 * time.Minute, "Archive", store.SandboxStateArchived}, {60 * time.Minute, "Delete", store.SandboxStateDeleted}} {
			f.clock.Advance(step.advance)
			before := f.env.Runtime.Calls(step.method)
			var trs [2][]lifecycle.Transition
			atOnce(len(replicas), func(i int) {
				var err error
				if trs[i], err = replicas[i].Reap(ctx); err != nil {
					t.Error(err)
				}
			})
			moved := map[string]int{}
			for i, list := range trs {
				for _, tr := range list {
					if tr.Err != nil {
						t.Fatalf("round %d, replica %d: %s -> %s of %s failed: %v", round, i+1, tr.From, tr.To, tr.SessionID, tr.Err)
					}
					if tr.To == step.to {
						moved[tr.SessionID]++
						byReplica[i]++
					}
				}
			}
			if n := f.env.Runtime.Calls(step.method) - before; n != sandboxes {
				t.Fatalf("round %d: %d %s calls for %d sandboxes; want one each", round, n, step.method, sandboxes)
			}
			for _, sid := range sids {
				if moved[sid] != 1 {
					t.Fatalf("round %d: session %s moved to %s %d times; want once (%v)", round, sid, step.to, moved[sid], moved)
				}
				if s := recordState(t, f, sid); s != step.to {
					t.Fatalf("round %d: session %s is %s; want %s", round, sid, s, step.to)
				}
				if _, err := f.env.Store.GetLease(ctx, lifecycle.SandboxLeaseName(sid)); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("round %d: the lease of session %s was not released: %v", round, sid, err)
				}
			}
		}
	}
	t.Logf("transitions by replica over %d rounds: %v", rounds, byReplica)
}

// A sandbox whose lease another replica holds is left to it, however due; once that
// replica's lease lapses (it died without renewing it), the next pass reaps it.
func TestReaperLeavesASandboxLeasedByAnotherReplica(t *testing.T) {
	f, _ := pgReplicas(t)
	ctx := context.Background()
	a := reapAgent(t, f, "leased", 15, 60, 120)
	sid, _ := runningSandbox(t, f, f.manager, a)
	if ok, err := f.env.Store.AcquireLease(ctx, lifecycle.SandboxLeaseName(sid), "replica-dead~0000dead:9:9", time.Second); err != nil || !ok {
		t.Fatalf("taking the lease as the other replica: %v, %v", ok, err)
	}
	f.clock.Advance(16 * time.Minute)
	before := f.env.Runtime.Calls("Stop")
	if trs, err := f.manager.Reap(ctx); err != nil || len(trs) != 0 {
		t.Fatalf("reaped a sandbox another replica holds: %+v, %v", trs, err)
	}
	if n := f.env.Runtime.Calls("Stop") - before; n != 0 || recordState(t, f, sid) != store.SandboxStateRunning {
		t.Fatalf("%d Stop calls, state %s; want the sandbox untouched", n, recordState(t, f, sid))
	}
	time.Sleep(1100 * time.Millisecond) // the lease lapses: nobody renews it
	if got := reapTransitions(t, f.manager, sid); got != "running>stopped" {
		t.Fatalf("after the lease lapsed: %q; want running>stopped", got)
	}
}

// The same session repaired by two replicas at the same moment (both found its run's
// harness dead): one repairs it, so the log gets one run_interrupted and one synthetic
// result for the dangling call.
func TestTwoReplicasRepairADeadRunOnce(t *testing.T) {
	f, url := pgReplicas(t)
	ctx := context.Background()
	seedDeadRun := func(st *store.Store, sid string) {
		t.Helper()
		raw, _ := events.Encode(events.ModelMessage{Text: "calling", ToolCalls: []model.ToolCall{{ID: "c1", Name: "exec", Arguments: []byte(`{"command":"true"}`)}}})
		if _, err := st.Commit(ctx, store.Batch{SessionID: sid, RunID: "r-dead-" + sid, StartRun: &store.Run{ID: "r-dead-" + sid, Owner: "gone~00000000:1:1"},
			Events: []store.EventInput{{Kind: events.KindModelMessage, Payload: raw}}}); err != nil {
			t.Fatal(err)
		}
	}
	harnesstest.AddAgent(t, f.env.Store, "talker", "default", harnesstest.AgentSpec{"model": harnesstest.Script(text("hi"))})
	handles := []*store.Store{f.env.Store, storetest.Open(t, url)}
	for trial := 0; trial < 6; trial++ {
		sid, err := f.runner(t, "talker").NewSession(ctx, harnesstest.Owner)
		if err != nil {
			t.Fatal(err)
		}
		seedDeadRun(f.env.Store, sid)
		time.Sleep(20 * time.Millisecond) // the dead run's heartbeat is older than the timeout below
		atOnce(len(handles), func(i int) {
			if _, err := runner.RepairStale(ctx, handles[i], nil, fmt.Sprintf("replica-%d~0000000%d:1:1", i, i), 10*time.Millisecond, nil); err != nil {
				t.Error(err)
			}
		})
		if n := len(harnesstest.Payloads(t, f.env.Store, sid, events.KindRunInterrupted)); n != 1 {
			t.Fatalf("trial %d: %d run_interrupted events; want 1", trial, n)
		}
		if res := results(t, f.env.Store, sid); len(res) != 1 || res[0]["synthetic"] != true {
			t.Fatalf("trial %d: results %v; want one synthetic result for the dangling call", trial, res)
		}
	}
}
