package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
)

// approvalAt is a pending approval of a call in session, created at created (unix
// milliseconds) and due an hour later.
func approvalAt(id, session string, created int64) Approval {
	return Approval{
		ID: id, SessionID: session, RunID: "r1", ToolCallID: "call-" + id, User: "alice", Agent: "pr-bot", Owner: "ops",
		Kind: ApprovalKindMCPCall, Server: "https://mcp.example.com/mcp", Tool: "merge_pr", Arguments: `{"pr":7}`,
		Rule: 2, Reason: "merges need a second pair of eyes", Approvers: []string{"$caller", "team:ops"},
		CreatedAt: time.UnixMilli(created), Deadline: time.UnixMilli(created + time.Hour.Milliseconds()),
	}
}

func ids(list []Approval) string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ID
	}
	return strings.Join(out, ",")
}

// An approval reads back as created, pending whatever state it was given; lists select
// by session, user, state and deadline, newest first; approvals go with their session.
func TestApprovalsCreateGetList(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for _, id := range []string{"s1", "s2"} {
			must(t, st.CreateSession(ctx, Session{ID: id, Agent: "pr-bot", Owner: "alice"}))
		}
		a1 := approvalAt("ap-1", "s1", 1_000_000)
		a1.State, a1.DecidedBy = ApprovalApproved, "mallory" // ignored: an approval starts pending
		must(t, st.CreateApproval(ctx, a1))
		code := approvalAt("ap-2", "s1", 2_000_000)
		code.Kind, code.Server, code.Tool, code.Arguments, code.Code, code.Language, code.Approvers = ApprovalKindCode, "", "run_code", "", "print(1)", "python", nil
		must(t, st.CreateApproval(ctx, code))
		other := approvalAt("ap-3", "s2", 3_000_000)
		other.User = "bob"
		must(t, st.CreateApproval(ctx, other))

		got, err := st.GetApproval(ctx, "ap-1")
		if err != nil {
			t.Fatal(err)
		}
		want := a1
		want.State, want.DecidedBy = ApprovalPending, ""
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
		}
		if got, _ := st.GetApproval(ctx, "ap-2"); got.Approvers == nil || len(got.Approvers) != 0 || got.Code != "print(1)" || !got.DecidedAt.IsZero() {
			t.Fatalf("code approval read back as %+v", got)
		}

		if err := st.CreateApproval(ctx, approvalAt("ap-1", "s2", 5)); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("a duplicate id: %v; want ErrAlreadyExists", err)
		}
		if err := st.CreateApproval(ctx, approvalAt("ap-9", "nope", 5)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an approval in a missing session: %v; want ErrNotFound", err)
		}
		if err := st.CreateApproval(ctx, Approval{ID: "ap-9", SessionID: "s1", Kind: ApprovalKindCode}); err == nil {
			t.Fatal("an approval without a deadline was created")
		}
		if _, err := st.GetApproval(ctx, "ap-9"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("reading a missing approval: %v; want ErrNotFound", err)
		}
		unstamped := approvalAt("ap-4", "s2", 0)
		unstamped.CreatedAt, unstamped.Deadline = time.Time{}, time.Now().Add(time.Hour)
		before := time.Now().Add(-time.Second)
		must(t, st.CreateApproval(ctx, unstamped))
		if got, _ := st.GetApproval(ctx, "ap-4"); got.CreatedAt.Before(before) {
			t.Fatalf("created at %v; want the store's clock", got.CreatedAt)
		}

		if _, err := st.DecideApproval(ctx, "ap-3", ApprovalDenied, "carol", "no", time.UnixMilli(3_000_001)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			f    ApprovalFilter
			want string
		}{
			{ApprovalFilter{}, "ap-4,ap-3,ap-2,ap-1"},
			{ApprovalFilter{SessionID: "s1"}, "ap-2,ap-1"},
			{ApprovalFilter{User: "bob"}, "ap-3"},
			{ApprovalFilter{State: ApprovalPending}, "ap-4,ap-2,ap-1"},
			{ApprovalFilter{State: ApprovalDenied}, "ap-3"},
			{ApprovalFilter{SessionID: "s1", Limit: 1}, "ap-2"},
			{ApprovalFilter{State: ApprovalPending, DeadlineBefore: time.UnixMilli(2_000_000 + time.Hour.Milliseconds())}, "ap-1"},
		} {
			list, err := st.ListApprovals(ctx, c.f)
			if err != nil || ids(list) != c.want {
				t.Errorf("ListApprovals(%+v) = %s, %v; want %s", c.f, ids(list), err, c.want)
			}
		}

		must(t, st.DeleteSession(ctx, "s1"))
		if list, err := st.ListApprovals(ctx, ApprovalFilter{SessionID: "s1"}); err != nil || len(list) != 0 {
			t.Fatalf("approvals of a deleted session: %s, %v; want none", ids(list), err)
		}
	})
}

// Deciders racing on one approval, through two handles on the database as two harness
// replicas would hold: exactly one wins, and every other gets ErrDecided and the row as
// the winner left it.
func TestDecideApprovalOnce(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		replicas := []*Store{st, reopen(t, st)}
		must(t, st.CreateSession(ctx, Session{ID: "s1", Agent: "pr-bot", Owner: "alice"}))
		now := time.Now()
		for round := range 10 {
			id := fmt.Sprintf("ap-%d", round)
			a := approvalAt(id, "s1", now.UnixMilli())
			must(t, st.CreateApproval(ctx, a))
			const deciders = 6
			type result struct {
				a   Approval
				err error
			}
			results := make([]result, deciders)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range deciders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					state := []string{ApprovalApproved, ApprovalDenied, ApprovalExpired}[i%3]
					<-start
					got, err := replicas[i%2].DecideApproval(ctx, id, state, fmt.Sprintf("decider-%d", i), "", now)
					results[i] = result{got, err}
				}()
			}
			close(start)
			wg.Wait()
			var winner *Approval
			for i, r := range results {
				if r.err == nil {
					if winner != nil {
						t.Fatalf("round %d: two deciders won: %s and %s", round, winner.DecidedBy, r.a.DecidedBy)
					}
					winner = &results[i].a
				}
			}
			if winner == nil {
				t.Fatalf("round %d: nobody won: %v", round, results[0].err)
			}
			for _, r := range results {
				if r.err != nil && (!errors.Is(r.err, ErrDecided) || r.a.State != winner.State || r.a.DecidedBy != winner.DecidedBy) {
					t.Fatalf("round %d: a loser got %+v, %v; want ErrDecided and the winner's %s by %s", round, r.a, r.err, winner.State, winner.DecidedBy)
				}
			}
			if got, _ := st.GetApproval(ctx, id); got.State != winner.State || got.DecidedBy != winner.DecidedBy || !got.DecidedAt.Equal(time.UnixMilli(now.UnixMilli())) {
				t.Fatalf("round %d: stored %+v; want the winner's decision", round, got)
			}
		}
	})
}

// Past the deadline a person may no longer decide, even before the harness marks the
// approval expired; the harness may expire or cancel it at any time, and once.
func TestDecideApprovalDeadline(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateSession(ctx, Session{ID: "s1", Agent: "pr-bot", Owner: "alice"}))
		a := approvalAt("ap-1", "s1", 1_000_000)
		must(t, st.CreateApproval(ctx, a))
		for _, state := range []string{ApprovalApproved, ApprovalDenied} {
			for _, at := range []time.Time{a.Deadline, a.Deadline.Add(time.Minute)} {
				got, err := st.DecideApproval(ctx, "ap-1", state, "bob", "late", at)
				if !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "deadline passed") || got.State != ApprovalPending {
					t.Fatalf("%s at %v past the deadline %v: %+v, %v; want ErrDecided saying the deadline passed", state, at, a.Deadline, got, err)
				}
			}
		}
		if _, err := st.DecideApproval(ctx, "ap-1", ApprovalPending, "bob", "", a.Deadline); err == nil || errors.Is(err, ErrDecided) {
			t.Fatalf("deciding pending: %v; want a refusal of the state", err)
		}
		got, err := st.DecideApproval(ctx, "ap-1", ApprovalExpired, "harness", "deadline", a.Deadline.Add(time.Minute))
		if err != nil || got.State != ApprovalExpired || got.DecidedBy != "harness" || got.Note != "deadline" || !got.DecidedAt.Equal(a.Deadline.Add(time.Minute)) {
			t.Fatalf("expiring: %+v, %v", got, err)
		}
		if _, err := st.DecideApproval(ctx, "ap-1", ApprovalCancelled, "harness", "", a.Deadline.Add(2*time.Minute)); !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("cancelling an expired approval: %v; want ErrDecided saying it expired", err)
		}

		// Before the deadline a person decides; cancelling a decided one is refused.
		b := approvalAt("ap-2", "s1", 1_000_000)
		must(t, st.CreateApproval(ctx, b))
		if got, err := st.DecideApproval(ctx, "ap-2", ApprovalApproved, "bob", "ok", b.Deadline.Add(-time.Millisecond)); err != nil || got.State != ApprovalApproved || got.Note != "ok" {
			t.Fatalf("approving before the deadline: %+v, %v", got, err)
		}
		if _, err := st.DecideApproval(ctx, "ap-2", ApprovalCancelled, "harness", "", b.Deadline); !errors.Is(err, ErrDecided) {
			t.Fatalf("cancelling an approved approval: %v; want ErrDecided", err)
		}
		c := approvalAt("ap-3", "s1", 1_000_000)
		must(t, st.CreateApproval(ctx, c))
		if got, err := st.DecideApproval(ctx, "ap-3", ApprovalCancelled, "harness", "turn cancelled", c.Deadline.Add(time.Hour)); err != nil || got.State != ApprovalCancelled {
			t.Fatalf("cancelling a pending approval: %+v, %v", got, err)
		}

		if _, err := st.DecideApproval(ctx, "ap-x", ApprovalApproved, "bob", "", time.UnixMilli(0)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deciding a missing approval: %v; want ErrNotFound", err)
		}
	})
}

// On PostgreSQL the harness connects as a member of trueforge_harness: it may use the
// approvals and budget counters, and a team may not touch them.
func TestGovernanceTablesAsHarnessRole(t *testing.T) {
	c := pgtest.Get(t)
	harness, team := c.Role(t, "harness"), c.Role(t, "team")
	admin := c.Database(t)
	owner := openAt(t, admin)
	ctx := context.Background()
	must(t, owner.ApplyRoles(ctx, HarnessRole, harness))
	must(t, owner.ApplyRoles(ctx, TeamRole, team))
	h := openAt(t, c.URL(pgtest.Name(admin), harness))
	must(t, h.CreateSession(ctx, Session{ID: "s1", Agent: "pr-bot", Owner: "alice"}))
	a := approvalAt("ap-1", "s1", time.Now().UnixMilli())
	must(t, h.CreateApproval(ctx, a))
	if got, err := h.DecideApproval(ctx, "ap-1", ApprovalApproved, "bob", "", time.Now()); err != nil || got.State != ApprovalApproved {
		t.Fatalf("the harness deciding: %+v, %v", got, err)
	}
	if list, err := h.ListApprovals(ctx, ApprovalFilter{SessionID: "s1"}); err != nil || len(list) != 1 {
		t.Fatalf("the harness listing approvals: %d, %v", len(list), err)
	}
	charge := BudgetCharge{Budget: "calls", Key: "user=alice", User: "alice", WindowEnd: time.UnixMilli(1), Calls: 1, Limits: BudgetLimits{Calls: 5}, Check: true}
	if u, ok, err := h.ChargeBudget(ctx, charge); err != nil || !ok || u.Calls != 1 {
		t.Fatalf("the harness charging: %+v, %v, %v", u, ok, err)
	}
	if list, err := h.ListBudgetUsage(ctx, BudgetFilter{User: "alice"}); err != nil || len(list) != 1 {
		t.Fatalf("the harness listing usage: %d, %v", len(list), err)
	}
	if n, err := h.PruneBudgetUsage(ctx, time.UnixMilli(2)); err != nil || n != 1 {
		t.Fatalf("the harness pruning usage: %d, %v", n, err)
	}
	asTeam := openAt(t, c.URL(pgtest.Name(admin), team))
	if _, err := asTeam.GetApproval(ctx, "ap-1"); !errors.Is(err, ErrForbidden) && (err == nil || !strings.Contains(err.Error(), "permission denied")) {
		t.Errorf("a team reading an approval: %v; want permission denied", err)
	}
	if _, _, err := asTeam.ChargeBudget(ctx, charge); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a team charging a budget: %v; want permission denied", err)
	}
}
