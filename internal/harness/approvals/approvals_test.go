package approvals_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// session is a store with one session of alice's, whose id it returns.
func session(t *testing.T) (*store.Store, string) {
	t.Helper()
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)
	harnesstest.AddAgent(t, st, "bot", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "hi"})})
	if err := st.CreateSession(context.Background(), store.Session{ID: "s-1", Agent: "bot", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	return st, "s-1"
}

func request(sid string, timeout time.Duration, args map[string]any) mcptools.ApprovalRequest {
	return mcptools.ApprovalRequest{
		Asking: mcptools.Asking{Origin: mcptools.Origin{SessionID: sid, RunID: "r-1", ToolCallID: "c-1"},
			User: "alice", Agent: "bot", Owner: "ops", Server: "https://mcp.test/"}, Tool: "create_pull_request", Name: "gh__create_pull_request",
		Args: args, Rule: 2, Reason: "pull requests need a person", Approvers: []string{policy.Caller, "lead_*"}, Timeout: timeout,
	}
}

type result struct {
	v   mcptools.Verdict
	err error
}

// await runs gate.Await in a goroutine.
func await(ctx context.Context, gate *approvals.Gate, req mcptools.ApprovalRequest) <-chan result {
	out := make(chan result, 1)
	go func() {
		v, err := gate.Await(ctx, req)
		out <- result{v, err}
	}()
	return out
}

// pending waits until the session has a pending approval alice may decide.
func pending(t *testing.T, st *store.Store, sid string) store.Approval {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := approvals.Pending(context.Background(), st, "alice", sid)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			return list[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pending approval after 10s")
	return store.Approval{}
}

func wait(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not return")
	}
	return result{}
}

// A call waits until an approver decides it; only the rule's approvers see or decide
// it, a decision is made once, and the session's log has the request and the decision.
func TestApprovalGateWaitsForTheDecisionOfAnApprover(t *testing.T) {
	ctx := context.Background()
	st, sid := session(t)
	gate := &approvals.Gate{Store: st, Poll: 10 * time.Millisecond}
	ch := await(ctx, gate, request(sid, time.Minute, map[string]any{"title": "Fix"}))
	a := pending(t, st, sid)
	if a.Rule != 2 || a.Reason != "pull requests need a person" || a.Arguments != `{"title":"Fix"}` || a.Kind != store.ApprovalKindMCPCall || !strings.HasPrefix(a.ID, "apr_") {
		t.Fatalf("the approval %+v", a)
	}
	for _, user := range []string{"bob", "", "lead"} {
		if _, err := approvals.Get(ctx, st, a.ID, user); !errors.Is(err, approvals.ErrNotFound) {
			t.Fatalf("%q reads the approval: %v; want ErrNotFound", user, err)
		}
		if _, err := approvals.Decide(ctx, st, a.ID, user, true, "", time.Now()); !errors.Is(err, approvals.ErrNotFound) {
			t.Fatalf("%q decides the approval: %v; want ErrNotFound", user, err)
		}
		if list, _ := approvals.Pending(ctx, st, user, ""); len(list) != 0 {
			t.Fatalf("%q lists %d pending approvals", user, len(list))
		}
	}
	if _, err := approvals.Get(ctx, st, "apr_none", "alice"); !errors.Is(err, approvals.ErrNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	select {
	case r := <-ch:
		t.Fatalf("the call returned before anyone decided: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := approvals.Decide(ctx, st, a.ID, "lead_ana", false, "needs a test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := approvals.Decide(ctx, st, a.ID, "alice", true, "", time.Now()); !errors.Is(err, store.ErrDecided) {
		t.Fatalf("a second decision: %v; want ErrDecided", err)
	}
	r := wait(t, ch)
	if r.err != nil || r.v.Approved || r.v.State != store.ApprovalDenied || r.v.By != "lead_ana" || r.v.Note != "needs a test" || r.v.ID != a.ID {
		t.Fatalf("the verdict %+v, %v; want lead_ana's denial", r.v, r.err)
	}
	req := harnesstest.Payloads(t, st, sid, events.KindApprovalRequested)
	dec := harnesstest.Payloads(t, st, sid, events.KindApprovalDecided)
	if len(req) != 1 || req[0]["id"] != a.ID || req[0]["tool_call_id"] != "c-1" || len(dec) != 1 || dec[0]["state"] != store.ApprovalDenied || dec[0]["by"] != "lead_ana" {
		t.Fatalf("the log: requested %v, decided %v", req, dec)
	}
}

// Nobody deciding before the deadline expires the approval (a denial by the harness),
// and a person's decision after it loses.
func TestApprovalGateExpiresAtTheDeadline(t *testing.T) {
	ctx := context.Background()
	st, sid := session(t)
	gate := &approvals.Gate{Store: st, Poll: 10 * time.Millisecond}
	start := time.Now()
	r := wait(t, await(ctx, gate, request(sid, time.Second, nil)))
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the call waited %v; want its 1s timeout", took)
	}
	if r.err != nil || r.v.Approved || r.v.State != store.ApprovalExpired || r.v.By != approvals.Harness {
		t.Fatalf("the verdict %+v, %v; want expired", r.v, r.err)
	}
	if _, err := approvals.Decide(ctx, st, r.v.ID, "alice", true, "", time.Now()); !errors.Is(err, store.ErrDecided) {
		t.Fatalf("a decision after the deadline: %v; want ErrDecided", err)
	}
}

// A person's decision made at a time past the deadline loses even before the harness
// marks the approval expired.
func TestApprovalDecisionPastTheDeadlineLoses(t *testing.T) {
	ctx := context.Background()
	st, sid := session(t)
	a := store.Approval{ID: approvals.NewID(), SessionID: sid, User: "alice", Kind: store.ApprovalKindMCPCall, Tool: "t",
		Approvers: []string{policy.Caller}, Deadline: time.Now().Add(time.Minute)}
	if err := st.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := approvals.Decide(ctx, st, a.ID, "alice", true, "", a.Deadline.Add(time.Millisecond)); !errors.Is(err, store.ErrDecided) {
		t.Fatalf("a decision past the deadline: %v; want ErrDecided", err)
	}
	got, err := st.GetApproval(ctx, a.ID)
	if err != nil || got.State != store.ApprovalPending {
		t.Fatalf("the approval after a late decision: %+v, %v; want pending", got, err)
	}
}

// A turn cancelled while its call waits cancels the approval; a decision then loses.
func TestApprovalGateCancelledWithItsTurn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, sid := session(t)
	gate := &approvals.Gate{Store: st, Poll: 10 * time.Millisecond}
	ch := await(ctx, gate, request(sid, time.Minute, nil))
	a := pending(t, st, sid)
	cancel()
	r := wait(t, ch)
	if r.err != nil || r.v.Approved || r.v.State != store.ApprovalCancelled || r.v.ID != a.ID {
		t.Fatalf("the verdict %+v, %v; want cancelled", r.v, r.err)
	}
	if _, err := approvals.Decide(context.Background(), st, a.ID, "alice", true, "", time.Now()); !errors.Is(err, store.ErrDecided) {
		t.Fatalf("a decision after the cancel: %v; want ErrDecided", err)
	}
	if dec := harnesstest.Payloads(t, st, sid, events.KindApprovalDecided); len(dec) != 1 || dec[0]["state"] != store.ApprovalCancelled {
		t.Fatalf("approval_decided %v", dec)
	}
}

// Approvers see each string argument cut to MaxArgumentText, and the whole to about
// MaxArguments.
func TestApprovalArgumentsAreCut(t *testing.T) {
	long := strings.Repeat("x", approvals.MaxArgumentText+100)
	got := approvals.Arguments(map[string]any{"body": long, "list": []any{long}, "n": 3})
	if strings.Contains(got, long) || !strings.Contains(got, "…(100 more bytes)") || !strings.Contains(got, `"n":3`) {
		t.Fatalf("the arguments as shown: %.200s…", got)
	}
	many := map[string]any{}
	for i := range 40 {
		many[strings.Repeat("k", i+1)] = long
	}
	if all := approvals.Arguments(many); len(all) > approvals.MaxArguments+len("…(cut)") || !strings.HasSuffix(all, "…(cut)") {
		t.Fatalf("the arguments are %d bytes; want at most %d, marked cut", len(all), approvals.MaxArguments)
	}
}
