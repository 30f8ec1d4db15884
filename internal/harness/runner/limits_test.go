package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// Every result passes the one choke point: a 200 KB command output reaches the model
// as head + marker + tail, the full text is kept, and read_output pages through it.
func TestLongOutputIsCutAndFetchable(t *testing.T) {
	f := newFixture(t)
	r, sid := f.session(t, "long", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec("echo FIRST; seq 1 40000; echo LAST"),
			call("read_output", map[string]any{"call_id": "replay-0-0", "offset": 100000, "length": 50}),
			text("ok"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	mustRun(t, r, sid, "go")
	res := results(t, f.env.Store, sid)
	first := res[0]["text"].(string)
	if res[0]["truncated"] != true || len(first) > 17000 || !strings.Contains(first, "FIRST") || !strings.Contains(first, "LAST") || !strings.Contains(first, "read_output") {
		t.Fatalf("cut result: truncated=%v, %d bytes", res[0]["truncated"], len(first))
	}
	full, err := f.env.Store.GetToolOutput(context.Background(), sid, "replay-0-0")
	if err != nil || len(full) < 200000 || !strings.Contains(string(full), "\n20000\n") {
		t.Fatalf("full output not kept: %d bytes, %v", len(full), err)
	}
	page := res[1]["text"].(string)
	if !strings.Contains(page, "[bytes 100000..100050 of") || !strings.Contains(page, string(full[100000:100050])) {
		t.Fatalf("read_output page: %q", page)
	}
}

// max turns and the token budget stop a run, and every call still gets a result.
func TestMaxTurnsAndTokenBudgetStopTheRun(t *testing.T) {
	st := harnesstest.NewStore(t)
	loop := []map[string]any{}
	for i := 0; i < 10; i++ {
		loop = append(loop, map[string]any{"tool_calls": []any{map[string]any{"name": "read_output", "arguments": map[string]any{"call_id": "x"}}},
			"usage": map[string]any{"input_tokens": 1000, "output_tokens": 100}})
	}
	harnesstest.SeedNoSandbox(t, st)
	harnesstest.AddAgent(t, st, "loopy", "default", harnesstest.AgentSpec{"model": harnesstest.Script(loop...), "max_turns": 3})
	r := storeRunner(t, st, "loopy")
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	out := mustRun(t, r, sid, "go")
	lim := harnesstest.Payloads(t, st, sid, events.KindLimit)
	if out.Steps != 3 || len(lim) != 1 || lim[0]["limit"] != "max_turns" {
		t.Fatalf("steps %d, limits %v; want 3 steps and a max_turns limit", out.Steps, lim)
	}
	r.MaxTurns, r.TokenBudget = 100, 2500
	sid2, _ := r.NewSession(context.Background(), harnesstest.Owner)
	out = mustRun(t, r, sid2, "go")
	lim = harnesstest.Payloads(t, st, sid2, events.KindLimit)
	if out.Steps != 3 || len(lim) != 1 || lim[0]["limit"] != "token_budget" {
		t.Fatalf("steps %d, limits %v; want the budget to stop step 3", out.Steps, lim)
	}
	res := results(t, st, sid2)
	if len(res) != 3 || !strings.Contains(res[2]["text"].(string), "token budget") {
		t.Fatalf("the calls of the last step did not get a not-run result: %v", res)
	}
	// Exactly at the budget is spent too: another model call could only go over it.
	r.TokenBudget = 2200
	sid3, _ := r.NewSession(context.Background(), harnesstest.Owner)
	out = mustRun(t, r, sid3, "go")
	if lim = harnesstest.Payloads(t, st, sid3, events.KindLimit); out.Steps != 2 || len(lim) != 1 || lim[0]["limit"] != "token_budget" {
		t.Fatalf("steps %d, limits %v; want the budget, reached exactly at step 2, to stop the run there", out.Steps, lim)
	}
}
