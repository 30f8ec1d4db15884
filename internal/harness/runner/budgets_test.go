package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// budgetPolicy is a policy that allows every call and declares budgets (a JSON list).
func budgetPolicy(t testing.TB, list string) *policy.Policy {
	return loadPolicy(t, `{"rules": [], "default": "allow", "budgets": `+list+`}`)
}

// metered is agent's runner on st for user, charging pol's budgets through meter.
func metered(t testing.TB, st *store.Store, agent, user string, pol *policy.Policy, meter *budgets.Meter) *runner.Runner {
	t.Helper()
	meter.Store, meter.Policy = st, pol
	return governed(t, st, agent, user, pol, nil, meter)
}

// A per-user budget of 2 calls a day holds across a user's sessions: the third call,
// in a second session, is refused before it is sent, and the model is told the budget,
// its window and when it refills (the next UTC midnight). Another user has a budget of
// their own.
func TestBudgetPerUserCallsAcrossSessions(t *testing.T) {
	ctx := context.Background()
	g := newGovServer(t)
	st := seeded(t)
	govAgent(t, st, "looker", g, call("kb__lookup", map[string]any{"q": "a"}), call("kb__lookup", map[string]any{"q": "b"}), text("done"))
	pol := budgetPolicy(t, `[{"name": "lookups_per_user", "servers": ["`+g.URL+`"], "tools": ["lookup"], "per": ["user"], "window": "per_day", "calls": 2}]`)
	alice := metered(t, st, "looker", "alice", pol, &budgets.Meter{})
	first, _ := alice.NewSession(ctx, "alice")
	mustRun(t, alice, first, "look twice")
	for i, res := range results(t, st, first) {
		if res["is_error"] == true {
			t.Fatalf("call %d within the budget was refused: %v", i, res)
		}
	}
	second, _ := alice.NewSession(ctx, "alice")
	mustRun(t, alice, second, "look twice more")
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("the server received %d calls; want the budget's 2", n)
	}
	res := results(t, st, second)
	if len(res) != 2 || res[0]["is_error"] != true {
		t.Fatalf("the second session's results %v; want refusals", res)
	}
	y, m, d := time.Now().UTC().Date()
	refill := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	text := res[0]["text"].(string)
	for _, w := range []string{`"lookups_per_user"`, "user=alice", "2 of its 2 calls", "per day", "refills at " + refill} {
		if !strings.Contains(text, w) {
			t.Fatalf("the refusal %q lacks %q", text, w)
		}
	}
	bob := metered(t, st, "looker", "bob", pol, &budgets.Meter{})
	sid, _ := bob.NewSession(ctx, "bob")
	mustRun(t, bob, sid, "look")
	if n := g.calls.Load(); n != 4 {
		t.Fatalf("the server received %d calls after bob's; bob's budget is his own (want 4)", n)
	}
	usage, err := st.ListBudgetUsage(ctx, store.BudgetFilter{User: "alice"})
	if err != nil || len(usage) != 1 || usage[0].Calls != 2 {
		t.Fatalf("alice's counters %+v, %v; want 2 calls (refusals are not charged)", usage, err)
	}
}

// A per-agent budget is one counter for every replica: six turns racing on two harness
// replicas (two store handles on one PostgreSQL database), for two users, make exactly
// the budget's 3 calls, and the others are refused by it.
func TestBudgetPerAgentAcrossReplicasOnPostgreSQL(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Get(t).Database(t)
	g := newGovServer(t)
	a := storetest.Open(t, url)
	harnesstest.SeedNoSandbox(t, a)
	b := storetest.Open(t, url)
	govAgent(t, a, "shared", g, call("kb__lookup", map[string]any{"q": "x"}), text("done"))
	pol := budgetPolicy(t, `[{"name": "agent_calls", "per": ["agent"], "window": "per_day", "calls": 3}]`)
	replicas := []*runner.Runner{
		metered(t, a, "shared", "alice", pol, &budgets.Meter{}),
		metered(t, b, "shared", "bob", pol, &budgets.Meter{}),
	}
	users := []string{"alice", "bob"}
	var sids [6]string
	for i := range sids {
		sids[i], _ = replicas[i%2].NewSession(ctx, users[i%2])
	}
	atOnce(len(sids), func(i int) {
		out, err := replicas[i%2].Run(ctx, sids[i], "look", nil)
		if err != nil || out.Status != store.RunCompleted {
			t.Errorf("turn %d: %+v, %v", i, out, err)
		}
	})
	if n := g.calls.Load(); n != 3 {
		t.Fatalf("the server received %d calls from two replicas; want the budget's 3", n)
	}
	refused := 0
	for _, sid := range sids {
		if strings.Contains(lastResult(t, a, sid), `budget "agent_calls"`) {
			refused++
		}
	}
	if n := refused; n != 3 {
		t.Fatalf("%d turns were refused by the budget; want 3", n)
	}
	usage, err := b.ListBudgetUsage(ctx, store.BudgetFilter{Budget: "agent_calls"})
	if err != nil || len(usage) != 1 || usage[0].Calls != 3 || !strings.Contains(usage[0].Key, "agent=shared") {
		t.Fatalf("the counters %+v, %v; want one of 3 calls for the agent", usage, err)
	}
}

// A budget over a duration window refills when the window ends: with the meter's clock
// advanced past the hour, the call that was refused goes through again.
func TestBudgetRefillsWhenItsWindowEnds(t *testing.T) {
	ctx := context.Background()
	g := newGovServer(t)
	st := seeded(t)
	govAgent(t, st, "hourly", g, call("kb__lookup", map[string]any{"q": "a"}), call("kb__lookup", map[string]any{"q": "b"}), text("done"))
	pol := budgetPolicy(t, `[{"name": "hourly", "per": ["user"], "window": "1h", "calls": 1}]`)
	clock := harnesstest.NewClock()
	r := metered(t, st, "hourly", "alice", pol, &budgets.Meter{Now: clock.Now})
	sid, _ := r.NewSession(ctx, "alice")
	mustRun(t, r, sid, "look twice")
	res := results(t, st, sid)
	_, end := policy.Window{Kind: policy.WindowDuration, Every: time.Hour}.Bounds(clock.Now())
	if len(res) != 2 || res[0]["is_error"] == true || res[1]["is_error"] != true ||
		!strings.Contains(res[1]["text"].(string), "per 1h0m0s") || !strings.Contains(res[1]["text"].(string), "refills at "+end.Format(time.RFC3339)) {
		t.Fatalf("results %v; want the first answered, the second refused until %s", res, end)
	}
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("the server received %d calls; want 1", n)
	}
	clock.Advance(time.Hour)
	again, _ := r.NewSession(ctx, "alice")
	mustRun(t, r, again, "look twice again")
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("the server received %d calls after the window ended; want 2", n)
	}
	if res := results(t, st, again); res[0]["is_error"] == true || res[1]["is_error"] != true {
		t.Fatalf("results in the next window %v; want one answer and one refusal", res)
	}
}

// A token budget stops a turn: once a model step spent the agent's tokens, the next
// step is not made, and the log says which budget stopped it (a limit event "budget");
// a new session of the agent is stopped before its first step.
func TestBudgetOfTokensStopsATurn(t *testing.T) {
	ctx := context.Background()
	g := newGovServer(t)
	st := seeded(t)
	step := call("kb__lookup", map[string]any{"q": "a"})
	step["usage"] = map[string]any{"input_tokens": 40, "output_tokens": 20}
	govAgent(t, st, "spender", g, step, text("never said"))
	pol := budgetPolicy(t, `[{"name": "agent_tokens", "per": ["agent"], "window": "per_day", "tokens": 50}]`)
	r := metered(t, st, "spender", "alice", pol, &budgets.Meter{})
	sid, _ := r.NewSession(ctx, "alice")
	out := mustRun(t, r, sid, "spend")
	if out.Steps != 1 {
		t.Fatalf("the turn made %d model steps; want 1, then the budget", out.Steps)
	}
	limits := harnesstest.Payloads(t, st, sid, events.KindLimit)
	if len(limits) != 1 || limits[0]["limit"] != "budget" || !strings.Contains(limits[0]["detail"].(string), `"agent_tokens"`) ||
		!strings.Contains(limits[0]["detail"].(string), "60 of its 50 tokens") {
		t.Fatalf("limit events %v; want the agent_tokens budget", limits)
	}
	for _, m := range harnesstest.Payloads(t, st, sid, events.KindModelMessage) {
		if m["text"] == "never said" {
			t.Fatal("the model was called past its token budget")
		}
	}
	next, _ := r.NewSession(ctx, "alice")
	if out := mustRun(t, r, next, "spend more"); out.Steps != 0 {
		t.Fatalf("a new session made %d model steps on a spent budget", out.Steps)
	}
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("the server received %d calls; want the first step's 1", n)
	}
}
