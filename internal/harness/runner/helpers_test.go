package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type fixture struct {
	env     *harnesstest.Env
	clock   *harnesstest.Clock
	manager *lifecycle.Manager
}

func newFixture(t testing.TB) *fixture {
	env := harnesstest.NewEnv(t)
	clock := harnesstest.NewClock()
	m := lifecycle.New(lifecycle.Config{Store: env.Store, Runtimes: harnesstest.Source{C: env.Runtime}, Now: clock.Now})
	return &fixture{env: env, clock: clock, manager: m}
}

func (f *fixture) runner(t testing.TB, agent string) *runner.Runner {
	return f.runnerWith(t, agent, &tools.Executor{Store: f.env.Store, Sandboxes: f.manager, Now: f.clock.Now})
}

// runnerNoSandbox is a runner whose tools have no sandbox manager at all.
func (f *fixture) runnerNoSandbox(t testing.TB, agent string) *runner.Runner {
	return f.runnerWith(t, agent, &tools.Executor{Store: f.env.Store})
}

// seeded is a fresh store with harnesstest.SeedNoSandbox's provider and environment.
func seeded(t testing.TB) *store.Store {
	t.Helper()
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)
	return st
}

// storeRunner is agent's runner on st, whose tools have no sandbox manager.
func storeRunner(t testing.TB, st *store.Store, agent string) *runner.Runner {
	t.Helper()
	return (&fixture{env: &harnesstest.Env{Store: st}}).runnerNoSandbox(t, agent)
}

func (f *fixture) runnerWith(t testing.TB, agent string, ex *tools.Executor) *runner.Runner {
	t.Helper()
	a, err := agents.Load(context.Background(), f.env.Store, agent)
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's agents are the test owner's, run as the single-user default (no
	// credentials file), under which they may name the harness's variables.
	m, err := a.NewModel(agents.ModelOptions{Credentials: a.Authority(nil, harnesstest.Owner)})
	if err != nil {
		t.Fatal(err)
	}
	return &runner.Runner{Store: f.env.Store, Agent: a, Model: m, Tools: ex}
}

// session adds an agent on the default environment, and returns its runner and a new
// session of the test owner.
func (f *fixture) session(t testing.TB, agent string, spec harnesstest.AgentSpec) (*runner.Runner, string) {
	t.Helper()
	harnesstest.AddAgent(t, f.env.Store, agent, "default", spec)
	r := f.runner(t, agent)
	return r, ownerSession(t, r)
}

// scripted is session for an agent whose model plays turns, with a sandbox on the
// default environment stopped after 15 idle minutes, archived after 60, deleted after 120.
func (f *fixture) scripted(t testing.TB, agent string, turns ...map[string]any) (*runner.Runner, string) {
	t.Helper()
	return f.session(t, agent, harnesstest.AgentSpec{
		"model":   harnesstest.Script(turns...),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
}

// ownerSession is a new session of r's agent for the test owner.
func ownerSession(t testing.TB, r *runner.Runner) string {
	t.Helper()
	sid, err := r.NewSession(context.Background(), harnesstest.Owner)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

func exec(cmd string) map[string]any {
	return map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": cmd}}}}
}

func text(s string) map[string]any { return map[string]any{"text": s} }

func call(name string, args map[string]any) map[string]any {
	return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
}

// results returns the tool_result payloads of a session, in order.
func results(t testing.TB, st *store.Store, session string) []map[string]any {
	t.Helper()
	return harnesstest.Payloads(t, st, session, events.KindToolResult)
}

// editEnvironment changes environment name in st with edit and stores the change.
func editEnvironment(t testing.TB, st *store.Store, name string, edit func(*store.Environment)) {
	t.Helper()
	ctx := context.Background()
	e, err := st.GetEnvironment(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	edit(&e)
	if err := st.UpdateEnvironment(ctx, e); err != nil {
		t.Fatal(err)
	}
}

// lastResult is the text of a session's last tool result.
func lastResult(t testing.TB, st *store.Store, session string) string {
	t.Helper()
	res := results(t, st, session)
	if len(res) == 0 {
		t.Fatal("no tool result")
	}
	return res[len(res)-1]["text"].(string)
}

func kinds(t testing.TB, st *store.Store, session string) []string {
	evs, err := st.Events(context.Background(), session, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func mustRun(t testing.TB, r *runner.Runner, session, prompt string) runner.Outcome {
	t.Helper()
	out, err := r.Run(context.Background(), session, prompt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != store.RunCompleted {
		t.Fatalf("run status %s", out.Status)
	}
	return out
}

// atOnce runs fn(0) to fn(n-1) in goroutines released at the same moment, so that they
// race, and waits for them all.
func atOnce(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// waitPayloads returns the session's events of kind once done holds for them, waiting at
// most 10 s (then it returns what there is, for the caller's check to fail on). Events
// another writer appends may land after the run's end: the egress proxy records a
// forwarded request's decision once the response has been relayed, which the sandbox's
// command may have read, and the turn ended, a moment before.
func waitPayloads(t *testing.T, st *store.Store, sid, kind string, done func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := harnesstest.Payloads(t, st, sid, kind)
		if done(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}
