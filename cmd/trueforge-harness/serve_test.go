package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// harnessProcess starts the real trueforge-harness binary (the static build TestMain
// makes) with args, as its own process, and stops it when the test ends.
func harnessProcess(t *testing.T, args ...string) (*exec.Cmd, *sandboxtest.SyncBuffer, *sandboxtest.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Getenv(sandboxnet.HelperEnv), args...)
	cmd.Env = append(os.Environ(), "TRUEFORGE_OWNER=")
	out, errOut := &sandboxtest.SyncBuffer{}, &sandboxtest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out, errOut
}

// pgControlPlane seeds a control plane on a fresh PostgreSQL database as an operator
// would (the superuser standing for the teams that applied): provider "local" with its
// release snapshot prepared in this machine's data directory, and environment
// "isolated" (block_all) on it. It returns the seeding store and the URL of a harness
// role (trueforge_harness), which the replicas connect as.
func pgControlPlane(t *testing.T) (*store.Store, string) {
	t.Helper()
	harnesstest.RequireSandboxTools(t)
	harnesstest.ShareMachine(t)
	pg := storetest.NewHarnessDB(t)
	st := pg.Owner
	ctx := context.Background()
	prov := store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner}
	be, cfg := harnesstest.Backend(t, st, prov)
	rel, _ := harnesstest.PrepareProvider(t, st, prov, be, cfg)
	if err := st.CreateEnvironment(ctx, store.Environment{ID: "env-isolated", Name: "isolated", Provider: "local", Owner: harnesstest.Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "release", SnapshotID: rel, BlockAll: true}); err != nil {
		t.Fatal(err)
	}
	return st, pg.URL(pg.Harness)
}

// Two `serve` replicas and a `run` process, each the real binary connected as the
// harness role to one PostgreSQL database. The run process is killed (SIGKILL) while
// its command runs in the sandbox: one replica (not both) marks the run interrupted and
// stops the orphaned command, the other finds nothing left to do, and the next turn, from
// another process, continues the session with everything said and the files intact.
// While the run process lived, the replicas left its run alone.
func TestServeReplicasRepairAKilledTurn(t *testing.T) {
	st, url := pgControlPlane(t)
	ctx := context.Background()
	marker := "tfserve" + time.Now().Format("150405.000000")
	harnesstest.AddAgent(t, st, "crashy", "isolated", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "echo before > mark.txt; sleep 300 # " + marker}}}},
			map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "cat mark.txt"}}}},
			map[string]any{"text": "resumed fine"}),
		"sandbox": harnesstest.Sandbox("isolated", 15, 60, 120),
	})
	replicas := make([]*exec.Cmd, 2)
	outs := make([]*sandboxtest.SyncBuffer, 2)
	for i := range replicas {
		replicas[i], outs[i], _ = harnessProcess(t, "--database-url", url, "serve", "--interval", "200ms")
	}
	turn, _, turnErr := harnessProcess(t, "--database-url", url, "run", "crashy", "start the long job")

	var sid string
	sandboxtest.WaitFor(t, "the turn's command in the sandbox", 60*time.Second, func() bool {
		ss, _ := st.ListSessions(ctx, "", "crashy")
		if len(ss) != 1 {
			return false
		}
		sid = ss[0].ID
		_, err := st.GetSessionSandbox(ctx, sid)
		return err == nil && len(sandboxtest.ProcessesWith(marker)) > 0
	})
	time.Sleep(time.Second) // several passes of both replicas while the turn runs
	runs, _ := st.Runs(ctx, sid)
	if len(runs) != 1 || runs[0].Status != store.RunRunning {
		t.Fatalf("runs %+v while the turn runs; the replicas must leave it alone (stderr: %s)", runs, turnErr)
	}

	if err := turn.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = turn.Wait()
	sandboxtest.WaitFor(t, "a replica to repair the killed turn", 20*time.Second, func() bool {
		runs, _ := st.Runs(ctx, sid)
		return len(runs) == 1 && runs[0].Status == store.RunInterrupted && len(sandboxtest.ProcessesWith(marker)) == 0
	})
	time.Sleep(600 * time.Millisecond) // more passes: nobody repairs it again
	if n := len(harnesstest.Payloads(t, st, sid, events.KindRunInterrupted)); n != 1 {
		t.Fatalf("%d run_interrupted events; want 1", n)
	}
	if n := len(harnesstest.Payloads(t, st, sid, events.KindSandboxReclaimed)); n != 1 {
		t.Fatalf("%d sandbox_reclaimed events; want 1", n)
	}
	reported := 0
	for _, o := range outs {
		reported += strings.Count(o.String(), fmt.Sprintf("run %s of harness process", runs[0].ID))
	}
	if reported != 1 {
		t.Fatalf("the replicas reported the repair %d times; want once:\n%s\n---\n%s", reported, outs[0], outs[1])
	}

	next, out, nextErr := harnessProcess(t, "--database-url", url, "run", "--session", sid, "crashy", "are you still there?")
	if err := next.Wait(); err != nil {
		t.Fatalf("the next turn: %v\n%s\n%s", err, out, nextErr)
	}
	if !strings.Contains(out.String(), "resumed fine") {
		t.Fatalf("the next turn printed:\n%s", out)
	}
	res := harnesstest.Payloads(t, st, sid, events.KindToolResult)
	if len(res) != 2 || res[0]["synthetic"] != true || !strings.Contains(res[1]["text"].(string), "before") {
		t.Fatalf("tool results %v; want the killed call's interrupted result, then the file written before the kill", res)
	}

	for i, r := range replicas {
		_ = r.Process.Signal(os.Interrupt)
		if err := r.Wait(); err != nil {
			t.Fatalf("replica %d did not stop cleanly on an interrupt: %v", i+1, err)
		}
	}
}
