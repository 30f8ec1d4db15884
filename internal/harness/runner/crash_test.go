package runner_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// helperEnv makes the test binary act as a harness process running one turn (see
// runHelper), so a test can kill -9 a real harness mid-turn.
const helperEnv = "TRUEFORGE_HARNESS_TEST_HELPER"

// checkResumedAfterCrash checks session sid after its harness died in a turn's tool call
// (the "crashy" agent's) and another turn ran: its runs are the interrupted one then a
// completed one, its first tool result is the synthetic interrupted result of the call
// that dangled, and the second turn read the file the first wrote before the crash, so
// the sandbox kept it. It returns the runs.
func checkResumedAfterCrash(t *testing.T, st *store.Store, sid string) []store.Run {
	t.Helper()
	runs, _ := st.Runs(context.Background(), sid)
	if len(runs) != 2 || runs[0].Status != store.RunInterrupted || runs[1].Status != store.RunCompleted {
		t.Fatalf("runs %+v; want interrupted then completed", runs)
	}
	res := results(t, st, sid)
	if len(res) != 2 || res[0]["is_error"] != true || !strings.Contains(res[0]["text"].(string), "interrupted") {
		t.Fatalf("dangling call result %v; want a synthetic interrupted error first", res)
	}
	if !strings.Contains(res[1]["text"].(string), "before") {
		t.Fatalf("the sandbox lost its files with the harness that died: %q", res[1]["text"])
	}
	return runs
}

func TestMain(m *testing.M) {
	backends.ReexecMain() // the local backend re-executes this test binary as its helpers
	if os.Getenv(helperEnv) != "" {
		if err := runHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if helperDir != "" {
		os.RemoveAll(helperDir)
	}
	pgtest.Stop()
	os.Exit(code)
}

// runHelper runs HELPER_PROMPT in session HELPER_SESSION of agent HELPER_AGENT against
// the store at HELPER_DB, with the real backend, as the CLI would. HELPER_OWNER, when
// set, is the process's owner name (one in another pid space stands for a harness on
// another machine), and HELPER_HEARTBEAT its heartbeat interval.
func runHelper() error {
	ctx := context.Background()
	st, err := store.Open(ctx, os.Getenv("HELPER_DB"))
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := agents.Load(ctx, st, os.Getenv("HELPER_AGENT"))
	if err != nil {
		return err
	}
	m, err := a.NewModel(agents.ModelOptions{})
	if err != nil {
		return err
	}
	owner := os.Getenv("HELPER_OWNER")
	heartbeat, _ := time.ParseDuration(os.Getenv("HELPER_HEARTBEAT"))
	cfg := lifecycle.Config{Store: st, Runtimes: backend.New(controlplane.New(st)), Owner: owner}
	if helper := os.Getenv("HELPER_NETD"); helper != "" {
		// Egress as the CLI wires it, with the test's loopback upstream trusted.
		caPEM, err := os.ReadFile(os.Getenv("HELPER_UPSTREAM_CA"))
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: controlplane.New(st).EgressDir(), Helper: helper,
			Record: func(ctx context.Context, sessionID string, p events.Payload) {
				_, _ = events.Append(ctx, st, sessionID, "", p)
			},
			Resolver: loopbackResolver{}, AllowAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, RootCAs: pool, SystemRoots: caPEM})
		defer x.Close()
		cfg.Network = x
	}
	mgr := lifecycle.New(cfg)
	r := &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st, Sandboxes: mgr}, Owner: owner, HeartbeatEvery: heartbeat}
	_, err = r.Run(ctx, os.Getenv("HELPER_SESSION"), os.Getenv("HELPER_PROMPT"), nil)
	return err
}

// A harness killed with SIGKILL mid-turn (its command running in the sandbox): the next
// harness marks the run interrupted, gives the dangling call an error result, finds the
// command gone, and the session continues with everything already said.
func TestHarnessKilledMidTurnResumesSession(t *testing.T) {
	f := newFixture(t)
	marker := "tfcrash" + time.Now().Format("150405.000000")
	r, sid := f.scripted(t, "crashy", exec("echo before > mark.txt; sleep 300 # "+marker), exec("cat mark.txt"), text("resumed fine"))
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_DB="+f.env.Store.Path(), "HELPER_AGENT=crashy", "HELPER_SESSION="+sid, "HELPER_PROMPT=start the long job")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sandboxtest.WaitFor(t, "the helper's command in the sandbox", 60*time.Second, func() bool {
		rec, err := f.env.Store.GetSessionSandbox(context.Background(), sid)
		if err != nil {
			return false
		}
		_, err = f.env.Runtime.Runtime.ReadFile(context.Background(), rec.SandboxID, "mark.txt", 0)
		return err == nil && len(sandboxtest.ProcessesWith(marker)) > 0
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// What the dead harness said is in the log.
	before := kinds(t, f.env.Store, sid)
	if strings.Join(before, ",") != "user_message,model_message,usage,tool_call,sandbox_provisioned" {
		t.Fatalf("log after the kill: %v (helper stderr: %s)", before, stderr.String())
	}
	out := mustRun(t, r, sid, "are you still there?")
	// The command the dead harness left running was stopped when the session resumed
	// (the local runtime does not yet kill bwrap with a SIGKILLed harness).
	if p := sandboxtest.ProcessesWith(marker); len(p) > 0 {
		t.Fatalf("the dead harness's command still runs after resume: pids %v", p)
	}
	if out.Text != "resumed fine" {
		t.Fatalf("resumed turn answered %q", out.Text)
	}
	interrupted := harnesstest.Payloads(t, f.env.Store, sid, events.KindRunInterrupted)
	if len(interrupted) != 1 {
		t.Fatalf("%d run_interrupted events; want 1", len(interrupted))
	}
	checkResumedAfterCrash(t, f.env.Store, sid)
	// The busy mark of the dead harness does not pin the sandbox.
	rec, _ := f.env.Store.GetSessionSandbox(context.Background(), sid)
	if rec.ActiveExecs != 0 {
		t.Fatalf("active_execs %d after the turn; the dead harness's mark was not cleared", rec.ActiveExecs)
	}
}
