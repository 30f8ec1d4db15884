package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// govToken is the bearer token of govServer, which the governed agents name as
// TF_TEST_GOV_TOKEN.
const govToken = "gov-CANARY-4a1c"

// govServer is a real MCP server on loopback (go-sdk, streamable HTTP) whose one tool,
// lookup, counts the calls it receives: what an approval or a budget must keep from
// being sent.
type govServer struct {
	URL   string
	calls atomic.Int64
}

func newGovServer(t testing.TB) *govServer {
	t.Helper()
	t.Setenv("TF_TEST_GOV_TOKEN", govToken)
	g := &govServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "gov", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look something up."}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
		g.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer for " + in.Q}}}, nil, nil
	})
	g.URL = serveMCP(t, srv, govToken).URL
	return g
}

// govAgent adds agent, whose model plays turns, with the gov server as "kb" (no
// sandbox), to st.
func govAgent(t testing.TB, st *store.Store, agent string, g *govServer, turns ...map[string]any) {
	t.Helper()
	harnesstest.AddAgent(t, st, agent, "default", harnesstest.AgentSpec{
		"model":       harnesstest.Script(turns...),
		"mcp_servers": []any{map[string]any{"name": "kb", "url": g.URL, "credential_env": "TF_TEST_GOV_TOKEN"}},
	})
}

// loadPolicy is the operator's policy file text, loaded as the harness loads it.
func loadPolicy(t testing.TB, text string) *policy.Policy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// approvePolicy holds every lookup on g for $caller and lead-*, for timeout.
func approvePolicy(t testing.TB, g *govServer, timeout string) *policy.Policy {
	return loadPolicy(t, `{"rules": [
	  {"effect": "approve", "servers": ["`+g.URL+`"], "tools": ["lookup"], "approvers": ["$caller", "lead-*"],
	   "timeout": "`+timeout+`", "reason": "lookups need a person"}
	], "default": "allow"}`)
}

// governed is agent's runner on st for user's sessions, its MCP toolset wired as the
// harness's runnerFor wires it: the policy, the approval gate and the budgets' meter
// (each optional).
func governed(t testing.TB, st *store.Store, agent, user string, pol *policy.Policy, gate *approvals.Gate, meter *budgets.Meter) *runner.Runner {
	t.Helper()
	r := storeRunner(t, st, agent)
	opts := mcptools.Options{User: user, Agent: agent, Owner: r.Agent.Owner, Credentials: r.Agent.Authority(nil, harnesstest.Owner)}
	if pol != nil {
		opts.Policy = pol
	}
	if gate != nil {
		opts.Approver = gate
	}
	if meter != nil {
		opts.Budgets = meter
		r.Budgets = meter
	}
	ts := mcptools.New(r.Agent.Spec.MCPServers, opts)
	t.Cleanup(ts.Close)
	r.Tools.MCP = ts
	return r
}

// twoHandles is a seeded SQLite control plane opened twice, as two harness replicas on
// one machine open it: the first handle runs the turns, the second decides.
func twoHandles(t testing.TB) (*store.Store, *store.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trueforge.db")
	st := storetest.Open(t, path)
	harnesstest.SeedNoSandbox(t, st)
	return st, storetest.Open(t, path)
}

// pendingOf waits (15s at most) until session sid has one pending approval that user
// may decide, read through st, and returns it: for the goroutines that decide.
func pendingOf(st *store.Store, user, sid string) (store.Approval, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		list, err := approvals.Pending(context.Background(), st, user, sid)
		if err == nil && len(list) == 1 {
			return list[0], nil
		}
		if time.Now().After(deadline) {
			return store.Approval{}, fmt.Errorf("no pending approval of session %s for %s after 15s (%d, %v)", sid, user, len(list), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPending is pendingOf for the test's own goroutine.
func waitPending(t testing.TB, st *store.Store, user, sid string) store.Approval {
	t.Helper()
	a, err := pendingOf(st, user, sid)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// decidedEvents is the session's approval_decided payloads.
func decidedEvents(t testing.TB, st *store.Store, sid string) []map[string]any {
	t.Helper()
	return harnesstest.Payloads(t, st, sid, events.KindApprovalDecided)
}

// inOrder fails unless the session's log has want's kinds in that order (others may
// come between).
func inOrder(t testing.TB, st *store.Store, sid string, want ...string) {
	t.Helper()
	got := kinds(t, st, sid)
	i := 0
	for _, k := range got {
		if i < len(want) && k == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("the log %v does not have %v in that order", got, want)
	}
}

// A model's direct MCP call under an approve rule waits for a person, whose decision
// another replica (a second handle on the database) records: approved, the call is sent
// once and answers; denied with a note, nothing is sent and the model is told the rule
// and the note; timed out, the harness marks it expired and sends nothing; and a turn
// cancelled while it waits marks it cancelled and sends nothing.
func TestApprovalOfADirectMCPCall(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, timeout string) (*govServer, *store.Store, *store.Store, *runner.Runner, string) {
		g := newGovServer(t)
		st, other := twoHandles(t)
		govAgent(t, st, "asker", g, call("kb__lookup", map[string]any{"q": "trueforge"}), text("done"))
		r := governed(t, st, "asker", "alice", approvePolicy(t, g, timeout), &approvals.Gate{Store: st, Poll: 20 * time.Millisecond}, nil)
		sid, err := r.NewSession(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		return g, st, other, r, sid
	}

	t.Run("approved", func(t *testing.T) {
		g, st, other, r, sid := setup(t, "30s")
		decided := make(chan error, 1)
		go func() {
			a, err := pendingOf(other, "lead-ana", sid)
			if err != nil {
				decided <- err
				return
			}
			if a.Tool != "lookup" || a.Server != g.URL || a.User != "alice" || !strings.Contains(a.Arguments, "trueforge") || a.Rule != 0 {
				decided <- errors.New("the approval shows " + a.Tool + " " + a.Server + " " + a.User + " " + a.Arguments)
				return
			}
			if n := g.calls.Load(); n != 0 {
				decided <- errors.New("the call was sent before it was approved")
				return
			}
			_, err = approvals.Decide(ctx, other, a.ID, "lead-ana", true, "go ahead", time.Now())
			decided <- err
		}()
		mustRun(t, r, sid, "look it up")
		if err := <-decided; err != nil {
			t.Fatal(err)
		}
		if n := g.calls.Load(); n != 1 {
			t.Fatalf("the server received %d calls; want exactly 1", n)
		}
		res := results(t, st, sid)
		if len(res) != 1 || res[0]["text"] != "answer for trueforge" || res[0]["is_error"] == true {
			t.Fatalf("tool results %v; want the server's answer", res)
		}
		inOrder(t, st, sid, events.KindToolCall, events.KindApprovalRequested, events.KindApprovalDecided, events.KindToolResult)
		d := decidedEvents(t, st, sid)
		if len(d) != 1 || d[0]["state"] != store.ApprovalApproved || d[0]["by"] != "lead-ana" || d[0]["note"] != "go ahead" {
			t.Fatalf("approval_decided %v", d)
		}
		req := harnesstest.Payloads(t, st, sid, events.KindApprovalRequested)
		if len(req) != 1 || req[0]["tool"] != "lookup" || req[0]["tool_call_id"] == "" || req[0]["tool_call_id"] != d[0]["tool_call_id"] {
			t.Fatalf("approval_requested %v", req)
		}
	})

	t.Run("denied", func(t *testing.T) {
		g, st, other, r, sid := setup(t, "30s")
		go func() {
			a, err := pendingOf(other, "alice", sid) // $caller
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := approvals.Decide(ctx, other, a.ID, "alice", false, "not today", time.Now()); err != nil {
				t.Error(err)
			}
		}()
		mustRun(t, r, sid, "look it up")
		if n := g.calls.Load(); n != 0 {
			t.Fatalf("a denied call reached the server (%d calls)", n)
		}
		res := results(t, st, sid)
		if len(res) != 1 || res[0]["is_error"] != true {
			t.Fatalf("tool results %v; want one refusal", res)
		}
		text := res[0]["text"].(string)
		for _, w := range []string{"rule 0", "lookups need a person", "denied by alice", "not today"} {
			if !strings.Contains(text, w) {
				t.Fatalf("the model was told %q; want it to name %q", text, w)
			}
		}
		if d := decidedEvents(t, st, sid); len(d) != 1 || d[0]["state"] != store.ApprovalDenied || d[0]["note"] != "not today" {
			t.Fatalf("approval_decided %v", d)
		}
	})

	t.Run("timed out", func(t *testing.T) {
		g, st, other, r, sid := setup(t, "1s")
		start := time.Now()
		mustRun(t, r, sid, "look it up")
		if waited := time.Since(start); waited < time.Second || waited > 10*time.Second {
			t.Fatalf("the turn took %v; want the 1s timeout", waited)
		}
		if n := g.calls.Load(); n != 0 {
			t.Fatalf("an expired call reached the server (%d calls)", n)
		}
		if text := lastResult(t, st, sid); !strings.Contains(text, "deadline") {
			t.Fatalf("the model was told %q; want the deadline", text)
		}
		list, err := other.ListApprovals(ctx, store.ApprovalFilter{SessionID: sid})
		if err != nil || len(list) != 1 || list[0].State != store.ApprovalExpired || list[0].DecidedBy != approvals.Harness {
			t.Fatalf("approvals %+v, %v; want one expired by the harness", list, err)
		}
		// A decision after the deadline loses: the call was refused once and for all.
		if _, err := approvals.Decide(ctx, other, list[0].ID, "alice", true, "", time.Now()); !errors.Is(err, store.ErrDecided) {
			t.Fatalf("approving an expired call: %v; want ErrDecided", err)
		}
		if d := decidedEvents(t, st, sid); len(d) != 1 || d[0]["state"] != store.ApprovalExpired {
			t.Fatalf("approval_decided %v", d)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		g, st, other, r, sid := setup(t, "30s")
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		type ran struct {
			out runner.Outcome
			err error
		}
		done := make(chan ran, 1)
		go func() {
			out, err := r.Run(runCtx, sid, "look it up", nil)
			done <- ran{out, err}
		}()
		a := waitPending(t, other, "alice", sid)
		cancel()
		var res ran
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the turn did not end after it was cancelled while its call waited")
		}
		if res.err != nil || res.out.Status != store.RunCancelled {
			t.Fatalf("the cancelled turn: %+v, %v", res.out, res.err)
		}
		if n := g.calls.Load(); n != 0 {
			t.Fatalf("a cancelled call reached the server (%d calls)", n)
		}
		got, err := other.GetApproval(ctx, a.ID)
		if err != nil || got.State != store.ApprovalCancelled || got.DecidedBy != approvals.Harness {
			t.Fatalf("the approval after the cancel: %+v, %v", got, err)
		}
		if _, err := approvals.Decide(ctx, other, a.ID, "alice", true, "", time.Now()); !errors.Is(err, store.ErrDecided) {
			t.Fatalf("approving a cancelled call: %v; want ErrDecided", err)
		}
		if d := decidedEvents(t, st, sid); len(d) != 1 || d[0]["state"] != store.ApprovalCancelled {
			t.Fatalf("approval_decided %v", d)
		}
	})
}

// A user the rule does not name neither sees the
// pending call nor can decide it, and the call still waits for someone who may.
func TestApprovalIsNotDecidedByAnUnnamedUser(t *testing.T) {
	ctx := context.Background()
	g := newGovServer(t)
	st, other := twoHandles(t)
	govAgent(t, st, "asker", g, call("kb__lookup", map[string]any{"q": "x"}), text("done"))
	r := governed(t, st, "asker", "alice", approvePolicy(t, g, "30s"), &approvals.Gate{Store: st, Poll: 20 * time.Millisecond}, nil)
	sid, _ := r.NewSession(ctx, "alice")
	go func() {
		a, err := pendingOf(other, "lead-ben", sid)
		if err != nil {
			t.Error(err)
			return
		}
		if list, err := approvals.Pending(ctx, other, "bob", sid); err != nil || len(list) != 0 {
			t.Errorf("bob sees %d pending approvals (%v); want none", len(list), err)
		}
		if _, err := approvals.Decide(ctx, other, a.ID, "bob", true, "", time.Now()); !errors.Is(err, approvals.ErrNotFound) {
			t.Errorf("bob's decision: %v; want ErrNotFound", err)
		}
		if _, err := approvals.Get(ctx, other, a.ID, "bob"); !errors.Is(err, approvals.ErrNotFound) {
			t.Errorf("bob reads the approval: %v; want ErrNotFound", err)
		}
		if _, err := approvals.Decide(ctx, other, a.ID, "lead-ben", true, "", time.Now()); err != nil {
			t.Error(err)
		}
	}()
	mustRun(t, r, sid, "look it up")
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("the server received %d calls; want 1", n)
	}
	if d := decidedEvents(t, st, sid); len(d) != 1 || d[0]["by"] != "lead-ben" {
		t.Fatalf("approval_decided %v; want lead-ben's", d)
	}
}

// A Code Mode script's call under an approve rule waits at the gate, in Python and in
// JavaScript: approved, the script gets the result, even though the approval took
// longer than the script's run_timeout_seconds (its run clock stands while it waits);
// denied, the script catches an error that names the rule and the note. Each mcp_call
// record carries its approval, and only the approved call reached the server.
func TestCodeModeCallWaitsForApproval(t *testing.T) {
	for _, lang := range []string{codemode.Python, codemode.JavaScript} {
		t.Run(lang, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			kb := newKB(t, "kb-apr-tok")
			pol := loadPolicy(t, `{"rules": [
			  {"effect": "approve", "servers": ["`+kb.URL+`"], "tools": ["forecast", "population"], "approvers": ["$caller"],
			   "timeout": "1m", "reason": "kb needs a person"}
			], "default": "allow"}`)
			code := `f = kb.forecast(city="Rome")
print("forecast", f["temp_c"])
try:
    print("population", kb.population(city="Rome"))
except ToolError as e:
    print("refused:", e)`
			if lang == codemode.JavaScript {
				code = `const f = await kb.forecast({city: "Rome"});
console.log("forecast", f.temp_c);
try {
  console.log("population", await kb.population({city: "Rome"}));
} catch (e) {
  console.log("refused:", e.message);
}`
			}
			harnesstest.AddAgent(t, f.env.Store, "waiter", "default", harnesstest.AgentSpec{
				"model":            harnesstest.Script(runCode(lang, code), text("done")),
				"mcp_servers":      []any{map[string]any{"name": "kb", "url": kb.URL, "credential_env": "TF_TEST_KB_TOKEN"}},
				"sandbox":          harnesstest.Sandbox("default", 15, 60, 120),
				"code_mode":        true,
				"code_mode_limits": map[string]any{"run_timeout_seconds": 3},
			})
			r := f.runner(t, "waiter")
			withCodeMode(t, r, mcptools.Options{User: harnesstest.Owner, Agent: "waiter", Owner: r.Agent.Owner, Policy: pol,
				Approver: &approvals.Gate{Store: f.env.Store, Poll: 20 * time.Millisecond}})
			sid := ownerSession(t, r)
			const wait = 5 * time.Second
			go func() {
				a, err := pendingOf(f.env.Store, harnesstest.Owner, sid)
				if err != nil {
					t.Error(err)
					return
				}
				// Longer than the script's run_timeout_seconds.
				time.Sleep(wait)
				if _, err := approvals.Decide(ctx, f.env.Store, a.ID, harnesstest.Owner, true, "fine", time.Now()); err != nil {
					t.Error(err)
					return
				}
				b, err := pendingOf(f.env.Store, harnesstest.Owner, sid)
				if err != nil {
					t.Error(err)
					return
				}
				if b.Tool != "population" {
					t.Errorf("the second approval is for %s; want population", b.Tool)
				}
				if _, err := approvals.Decide(ctx, f.env.Store, b.ID, harnesstest.Owner, false, "no census", time.Now()); err != nil {
					t.Error(err)
				}
			}()
			start := time.Now()
			mustRun(t, r, sid, "weather?")
			if took := time.Since(start); took < wait {
				t.Fatalf("the turn took %v; the approval alone took %v", took, wait)
			}
			out := results(t, f.env.Store, sid)[0]["text"].(string)
			for _, w := range []string{"forecast 21.5", "refused:", "rule 0", "kb needs a person", "no census"} {
				if !strings.Contains(out, w) {
					t.Fatalf("the script's output %q lacks %q", out, w)
				}
			}
			if strings.Contains(out, "stopped:") || strings.Contains(out, "run_timeout_seconds") {
				t.Fatalf("the script was stopped while its call waited for approval: %q", out)
			}
			if got := kb.seenUsers(); len(got) != 1 {
				t.Fatalf("the kb server answered %d calls; want the approved forecast only", len(got))
			}
			calls := harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)
			if len(calls) != 2 {
				t.Fatalf("mcp_call records %v; want 2", calls)
			}
			approval := func(i int) map[string]any {
				a, _ := calls[i]["approval"].(map[string]any)
				return a
			}
			if calls[0]["outcome"] != events.OutcomeCompleted || approval(0)["state"] != store.ApprovalApproved || approval(0)["by"] != harnesstest.Owner || approval(0)["note"] != "fine" {
				t.Fatalf("the forecast's record %v; want completed with its approval", calls[0])
			}
			if calls[1]["outcome"] != events.OutcomeDenied || approval(1)["state"] != store.ApprovalDenied || approval(1)["note"] != "no census" {
				t.Fatalf("the population's record %v; want denied with its decision", calls[1])
			}
			inOrder(t, f.env.Store, sid, events.KindApprovalRequested, events.KindApprovalDecided, events.KindApprovalRequested, events.KindApprovalDecided, events.KindToolResult)
		})
	}
}
