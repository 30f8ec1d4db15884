package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// slowAgent answers after a delay, with one tool call, then text: time for a second run
// to try the session while the first is in it.
func slowAgent(t testing.TB, st *store.Store) {
	harnesstest.AddAgent(t, st, "slow", "default", harnesstest.AgentSpec{"model": harnesstest.Script(
		map[string]any{"text": "thinking", "delay_ms": 300, "tool_calls": []any{map[string]any{"name": "read_output", "arguments": map[string]any{"call_id": "x"}}}},
		map[string]any{"text": "done", "delay_ms": 300},
	)})
}

// checkOneRun asserts that the session's log is one clean run: one user message, each
// tool call with exactly one result.
func checkOneRun(t *testing.T, st *store.Store, sid string) {
	t.Helper()
	users, perCall := 0, map[string]int{}
	for _, k := range kinds(t, st, sid) {
		if k == events.KindUserMessage {
			users++
		}
	}
	for _, p := range results(t, st, sid) {
		perCall[p["id"].(string)]++
	}
	for id, n := range perCall {
		if n != 1 {
			t.Fatalf("call %s has %d results", id, n)
		}
	}
	if users != 1 {
		t.Fatalf("%d user messages in the log; want the one run that started", users)
	}
}

// Two harness processes (two store handles, two live owners) start the same session at
// the same moment: one runs, the other is told the session is busy and writes nothing.
func TestTwoProcessesCannotRunOneSessionAtOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "trueforge.db")
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st1 := open()
	harnesstest.SeedNoSandbox(t, st1)
	slowAgent(t, st1)
	st2 := open()
	mk := func(st *store.Store, owner string) *runner.Runner {
		a, err := agents.Load(ctx, st, "slow")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := a.NewModel(agents.ModelOptions{})
		return &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st}, Owner: owner}
	}
	// Two live owners: this process, and one on another host (which OwnerAlive cannot
	// check, so takes for alive).
	r1, r2 := mk(st1, ""), mk(st2, "peer-host:200:1")
	for trial := 0; trial < 8; trial++ {
		sid, _ := r1.NewSession(ctx, harnesstest.Owner)
		var errs [2]error
		rs := []*runner.Runner{r1, r2}
		atOnce(len(rs), func(i int) { _, errs[i] = rs[i].Run(ctx, sid, "go", nil) })
		busy := 0
		for _, err := range errs {
			if errors.Is(err, runner.ErrBusy) {
				busy++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if busy != 1 {
			t.Fatalf("trial %d: errors %v; want exactly one run told the session is busy", trial, errs)
		}
		checkOneRun(t, st1, sid)
	}
}

// A second Run of a session in the same process, while the first is in it, is told the
// session is busy; it does not end the first as if its harness had died.
func TestSecondRunInTheSameProcessIsBusy(t *testing.T) {
	st := seeded(t)
	slowAgent(t, st)
	r := storeRunner(t, st, "slow")
	ctx := context.Background()
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	var wg sync.WaitGroup
	var errA error
	var outA runner.Outcome
	wg.Add(1)
	go func() { defer wg.Done(); outA, errA = r.Run(ctx, sid, "first", nil) }()
	time.Sleep(150 * time.Millisecond)
	_, errB := r.Run(ctx, sid, "second", nil)
	wg.Wait()
	if errA != nil || outA.Status != store.RunCompleted {
		t.Fatalf("the first run: %s, %v; want completed", outA.Status, errA)
	}
	if !errors.Is(errB, runner.ErrBusy) {
		t.Fatalf("the second run: %v; want ErrBusy", errB)
	}
	checkOneRun(t, st, sid)
	for _, k := range kinds(t, st, sid) {
		if k == events.KindRunInterrupted {
			t.Fatal("the live first run was marked interrupted")
		}
	}
}

// doneThenCancel is an MCP tool whose call completes just as the user cancels.
type doneThenCancel struct{ cancel func() }

func (d *doneThenCancel) Specs(context.Context) []model.ToolSpec {
	return []model.ToolSpec{{Name: "srv__pay", Parameters: map[string]any{"type": "object"}}}
}
func (d *doneThenCancel) Has(n string) bool { return n == "srv__pay" }
func (d *doneThenCancel) Call(context.Context, mcptools.Origin, string, json.RawMessage) (string, bool) {
	d.cancel()
	return "payment 42 sent", false
}

// A call that completed when the cancel arrived keeps its real result; only the calls
// after it are recorded as not run.
func TestCancelKeepsTheResultOfACallThatFinished(t *testing.T) {
	st := seeded(t)
	harnesstest.AddAgent(t, st, "pay", "default", harnesstest.AgentSpec{"model": harnesstest.Script(
		map[string]any{"tool_calls": []any{
			map[string]any{"name": "srv__pay", "arguments": map[string]any{}},
			map[string]any{"name": "srv__pay", "arguments": map[string]any{}},
		}}, text("ok"))})
	r := storeRunner(t, st, "pay")
	ctx, cancel := context.WithCancel(context.Background())
	r.Tools.MCP = &doneThenCancel{cancel: cancel}
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	out, err := r.Run(ctx, sid, "pay", nil)
	if err != nil || out.Status != store.RunCancelled {
		t.Fatalf("run: %s, %v; want cancelled", out.Status, err)
	}
	res := results(t, st, sid)
	if len(res) != 2 {
		t.Fatalf("%d results; want 2", len(res))
	}
	if res[0]["text"] != "payment 42 sent" {
		t.Fatalf("the finished call's result is %q; want its real one", res[0]["text"])
	}
	if txt, _ := res[1]["text"].(string); !strings.Contains(txt, "cancelled") {
		t.Fatalf("the second call's result is %q; want it recorded as cancelled", txt)
	}
}
